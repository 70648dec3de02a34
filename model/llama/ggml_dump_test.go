package llama

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"oengine/kernels/cpu"
	"oengine/model/gguf"
)

// TestGGMLDump is a diagnostic for matching llama.cpp's arithmetic, run on
// demand: OE_DUMP=dir OE_DUMP_MODEL=m.gguf OE_DUMP_TOKENS="1 2 3" [OE_DUMP_NGEN=n].
// It runs the prompt as one batch, then n greedy decode steps, through a
// copy of Forward that writes every intermediate tensor as float32 to
// dir/s<step>/<name>.bin, named as llama.cpp's graph names them, so a dump
// of llama.cpp's eval callback can be compared op by op. OE_DUMP_GGML=1
// loads the model in GGML arithmetic mode.
func TestGGMLDump(t *testing.T) {
	dir := os.Getenv("OE_DUMP")
	if dir == "" {
		t.Skip("set OE_DUMP to write intermediate tensors")
	}
	f, err := gguf.Open(os.Getenv("OE_DUMP_MODEL"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := Load(f, Options{Threads: 2, GGMLArithmetic: os.Getenv("OE_DUMP_GGML") != ""})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var toks []int32
	for _, s := range strings.Fields(os.Getenv("OE_DUMP_TOKENS")) {
		v, _ := strconv.Atoi(s)
		toks = append(toks, int32(v))
	}
	ngen, _ := strconv.Atoi(os.Getenv("OE_DUMP_NGEN"))
	kv, err := m.NewKV(128, 16, KVF16)
	if err != nil {
		t.Fatal(err)
	}
	table := make([]int32, 128)
	for i := range table {
		table[i] = int32(i)
	}
	pos := 0
	for step := 0; step <= ngen; step++ {
		d := filepath.Join(dir, "s"+strconv.Itoa(step))
		os.MkdirAll(d, 0o755)
		var logits []float32
		for u := 0; u < len(toks); u += 512 { // llama.cpp's default ubatch
			ub := toks[u:min(u+512, len(toks))]
			b := &Batch{Seqs: [][]int32{table}}
			for i, tk := range ub {
				b.Tokens = append(b.Tokens, tk)
				b.Pos = append(b.Pos, int32(pos+u+i))
				b.Seq = append(b.Seq, 0)
				b.Logits = append(b.Logits, int32(i))
			}
			logits = make([]float32, len(ub)*m.cfg.Vocab)
			m.dumpForward(kv, b, logits, d)
		}
		last := logits[len(logits)-m.cfg.Vocab:]
		best := 0
		for j, v := range last {
			if v > last[best] {
				best = j
			}
		}
		pos += len(toks)
		toks = []int32{int32(best)}
		t.Logf("step %d: token %d", step, best)
	}
}

func dumpF32(t testing.TB, dir, name string, x []float32) {
	buf := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
	}
	if err := os.WriteFile(filepath.Join(dir, name+".bin"), buf, 0o644); err != nil {
		panic(err)
	}
}

// dumpForward mirrors Forward and layerForward step by step.
func (m *Model) dumpForward(kv *KV, b *Batch, logits []float32, dir string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := &m.fw
	maxN, err := m.checkBatch(kv, b, logits, nil)
	if err != nil {
		panic(err)
	}
	T := len(b.Tokens)
	c := &m.cfg
	f.ensure(m, T, len(b.Logits), maxN)
	f.kv, f.b, f.t = kv, b, T
	D, R := c.Dim, c.RopeDims
	for i, tok := range b.Tokens {
		m.tokEmb.RowF32(int(tok), f.x[i*D:(i+1)*D], f.row)
	}
	dumpF32(nil, dir, "embd", f.x[:T*D])
	for i, pos := range b.Pos {
		m.ropeCache(f.cs[i*R:(i+1)*R], pos)
	}
	pool := m.pool
	mm := m.matMul
	for l := range m.layers {
		w := &m.layers[l]
		L := "-" + strconv.Itoa(l)
		QD, KD, HD := c.QDim(), c.KVDim(), c.HeadDim
		for i := 0; i < T; i++ {
			cpu.RMSNorm(f.xb[i*D:(i+1)*D], f.x[i*D:(i+1)*D], w.attnNorm, c.NormEps)
		}
		dumpF32(nil, dir, "attn_norm"+L, f.xb[:T*D])
		q, k, v := f.q[:T*QD], f.k[:T*KD], f.v[:T*KD]
		mm(q, w.wq, f.xb[:T*D], T)
		mm(k, w.wk, f.xb[:T*D], T)
		mm(v, w.wv, f.xb[:T*D], T)
		dumpF32(nil, dir, "q_mm"+L, q)
		dumpF32(nil, dir, "k_mm"+L, k)
		dumpF32(nil, dir, "v_mm"+L, v)
		if w.bq != nil {
			cpu.AddBias(q, w.bq)
			cpu.AddBias(k, w.bk)
			cpu.AddBias(v, w.bv)
			dumpF32(nil, dir, "q_bias"+L, q)
			dumpF32(nil, dir, "k_bias"+L, k)
		}
		if w.qNorm != nil {
			for h := 0; h < T*c.Heads; h++ {
				cpu.RMSNorm(q[h*HD:(h+1)*HD], q[h*HD:(h+1)*HD], w.qNorm, c.NormEps)
			}
			for h := 0; h < T*c.KVHeads; h++ {
				cpu.RMSNorm(k[h*HD:(h+1)*HD], k[h*HD:(h+1)*HD], w.kNorm, c.NormEps)
			}
			dumpF32(nil, dir, "q_norm"+L, q)
			dumpF32(nil, dir, "k_norm"+L, k)
		}
		for i := 0; i < T; i++ {
			cs := f.cs[i*R : (i+1)*R]
			cpu.Rope(q[i*QD:(i+1)*QD], c.Heads, HD, R, cs, c.RopeNeoX)
			cpu.Rope(k[i*KD:(i+1)*KD], c.KVHeads, HD, R, cs, c.RopeNeoX)
			pos := int(b.Pos[i])
			page := b.Seqs[b.Seq[i]][pos/kv.pageSize]
			kv.store(l, page, pos%kv.pageSize, k[i*KD:(i+1)*KD], v[i*KD:(i+1)*KD])
		}
		dumpF32(nil, dir, "q_rope"+L, q)
		dumpF32(nil, dir, "k_rope"+L, k)
		f.layer = l
		pool.For(f.slots, f.attnFn)
		dumpF32(nil, dir, "kqv_out"+L, f.att[:T*QD])
		mm(f.xb[:T*D], w.wo, f.att[:T*QD], T)
		dumpF32(nil, dir, "attn_out"+L, f.xb[:T*D])
		cpu.Add(f.x[:T*D], f.x[:T*D], f.xb[:T*D])
		dumpF32(nil, dir, "ffn_inp"+L, f.x[:T*D])
		F := c.FFN
		for i := 0; i < T; i++ {
			cpu.RMSNorm(f.xb[i*D:(i+1)*D], f.x[i*D:(i+1)*D], w.ffnNorm, c.NormEps)
		}
		dumpF32(nil, dir, "ffn_norm"+L, f.xb[:T*D])
		mm(f.hb[:T*F], w.wGate, f.xb[:T*D], T)
		mm(f.hb2[:T*F], w.wUp, f.xb[:T*D], T)
		dumpF32(nil, dir, "ffn_gate"+L, f.hb[:T*F])
		dumpF32(nil, dir, "ffn_up"+L, f.hb2[:T*F])
		for i := 0; i < T; i++ {
			cpu.SwiGLU(f.hb[i*F:(i+1)*F], f.hb[i*F:(i+1)*F], f.hb2[i*F:(i+1)*F])
		}
		dumpF32(nil, dir, "ffn_swiglu"+L, f.hb[:T*F])
		mm(f.xb[:T*D], w.wDown, f.hb[:T*F], T)
		dumpF32(nil, dir, "ffn_out"+L, f.xb[:T*D])
		cpu.Add(f.x[:T*D], f.x[:T*D], f.xb[:T*D])
		dumpF32(nil, dir, "l_out"+L, f.x[:T*D])
	}
	nOut := len(b.Logits)
	for j, idx := range b.Logits {
		cpu.RMSNorm(f.xo[j*D:(j+1)*D], f.x[int(idx)*D:(int(idx)+1)*D], m.outNorm, c.NormEps)
	}
	dumpF32(nil, dir, "result_norm", f.xo[:nOut*D])
	mm(logits[:nOut*c.Vocab], m.out, f.xo[:nOut*D], nOut)
	dumpF32(nil, dir, "result_output", logits[:nOut*c.Vocab])
	f.kv, f.b = nil, nil
}
