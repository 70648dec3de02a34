package gpu_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"oengine/kernels/cuda"
	"oengine/model/gguf"
	"oengine/model/gpu"
	"oengine/model/synth"
	"oengine/model/verify"
)

// greedyDecode prefills prompt and then decodes n tokens greedily with
// Decoder.Greedy (argmax on the device).
func greedyDecode(t *testing.T, m *gpu.Decoder, kv *gpu.KV, prompt []int32, n, pageSize int) []int32 {
	t.Helper()
	table := make([]int32, (len(prompt)+n+pageSize-1)/pageSize)
	for i := range table {
		table[i] = int32(i)
	}
	b := &gpu.DecoderBatch{Seqs: [][]int32{table}, Logits: []int32{int32(len(prompt) - 1)}}
	for i, tok := range prompt {
		b.Tokens = append(b.Tokens, tok)
		b.Pos = append(b.Pos, int32(i))
		b.Seq = append(b.Seq, 0)
	}
	out := make([]int32, 1)
	if err := m.Greedy(kv, b, out); err != nil {
		t.Fatal(err)
	}
	got := []int32{out[0]}
	for pos := len(prompt); len(got) < n; pos++ {
		b := &gpu.DecoderBatch{Seqs: [][]int32{table}, Tokens: []int32{got[len(got)-1]}, Pos: []int32{int32(pos)}, Seq: []int32{0}, Logits: []int32{0}}
		if err := m.Greedy(kv, b, out); err != nil {
			t.Fatal(err)
		}
		got = append(got, out[0])
	}
	return got
}

// checkGreedy compares a free-running greedy continuation with the
// reference up to the first step whose reference top-1/top-2 margin is
// below 0.05 (shared/testdata/README.md).
func checkGreedy(t *testing.T, got []int32, cs verify.Case) {
	t.Helper()
	for j, want := range cs.Greedy {
		if j >= len(got) {
			return
		}
		if k := cs.GreedyTopK[j]; len(k) >= 2 && k[0].Logit-k[1].Logit < 0.05 {
			return
		}
		if got[j] != want {
			t.Fatalf("greedy step %d: %d, reference %d (got %v, want %v)", j, got[j], want, got, cs.Greedy)
		}
	}
}

func TestEmulatedGreedy(t *testing.T) {
	root, _ := os.Getwd()
	path := filepath.Join(root, "..", "..", "..", "shared", "testdata", "models", "tiny-qwen3-q4_k_m.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skip("shared testdata models missing")
	}
	d := emuDevice(t)
	for _, graphs := range []bool{false, true} {
		t.Run(fmt.Sprintf("graphs=%v", graphs), func(t *testing.T) { runGreedy(t, d, path, graphs, 8) })
	}
}

func TestGPUGreedy(t *testing.T) {
	d := device(t)
	for _, path := range refModels(t) {
		for _, graphs := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/graphs=%v", filepath.Base(path), graphs), func(t *testing.T) {
				runGreedy(t, d, path, graphs, 24)
			})
		}
	}
}

func runGreedy(t *testing.T, d *cuda.Device, path string, graphs bool, n int) {
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ref, err := verify.LoadReference(path[:len(path)-len(".gguf")] + ".ref.json")
	if err != nil {
		t.Fatal(err)
	}
	const pageSize = 16
	m, kv, _ := loadDecoder(t, d, f, 1100/pageSize+2, pageSize, 1024)
	m.ExactMatMul = true
	m.UseGraphs = graphs
	cases := ref.Cases
	if n < 24 {
		cases = cases[:1]
	}
	for _, cs := range cases {
		got := greedyDecode(t, m, kv, cs.Tokens, n, pageSize)
		checkGreedy(t, got, cs)
	}
}

// BenchmarkGPUDecode measures greedy decode throughput on synthetic models
// with the TinyLlama-1.1B and Llama-3-8B shapes (F16 and Q8_0 weights,
// constant patterns: the values do not change the speed), at batch 1 and
// 32, with CUDA graphs. It reports tokens/s and the fraction of the
// bandwidth ceiling: weight bytes read per step / step time / bandwidth,
// with bandwidth from $OENGINE_BW (bytes/s; default 4.3e12, the H200
// figure measured for issue 8).
func BenchmarkGPUDecode(b *testing.B) {
	d := device(b)
	bw := 4.3e12
	if v := os.Getenv("OENGINE_BW"); v != "" {
		fmt.Sscan(v, &bw)
	}
	for _, preset := range []string{"tinyllama-1.1b", "llama3-8b"} {
		for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeQ8_0} {
			b.Run(fmt.Sprintf("%s/%s", preset, typ), func(b *testing.B) {
				benchDecode(b, d, synth.Presets[preset], typ, bw)
			})
		}
	}
}

// patternMatrix returns a rows×cols matrix of type typ filled with a small
// constant pattern (finite F16 values, Q8_0 blocks with scale 1/1024).
func patternMatrix(typ gguf.Type, rows, cols int) gpu.HostMatrix {
	rb, _ := typ.RowBytes(cols)
	data := make([]byte, rows*rb)
	unit := make([]byte, typ.BlockBytes())
	switch typ {
	case gguf.TypeF16:
		unit[0], unit[1] = 0x00, 0x14 // 2^-10
	case gguf.TypeQ8_0:
		unit[0], unit[1] = 0x00, 0x14
		for i := 2; i < len(unit); i++ {
			unit[i] = byte(i%7) - 3
		}
	}
	for i := 0; i < len(data); i += len(unit) {
		copy(data[i:], unit)
	}
	return gpu.HostMatrix{Type: typ, Rows: rows, Cols: cols, Data: data}
}

func benchDecode(b *testing.B, d *cuda.Device, p synth.Dims, typ gguf.Type, bw float64) {
	hd := p.Dim / p.Heads
	const pageSize, prompt, steps, maxB = 16, 64, 64, 32
	ctx := prompt + steps + 16
	cfg := gpu.DecoderConfig{Dim: p.Dim, Layers: p.Layers, Heads: p.Heads, KVHeads: p.KVHeads, HeadDim: hd,
		FFN: p.FFN, Vocab: p.Vocab, RopeDims: hd, RopeBase: p.RopeBase, RopeFreqScale: 1, NormEps: 1e-5, Context: ctx}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	// One host copy per shape, shared by every layer (uploads copy it).
	q, k, o := patternMatrix(typ, p.Heads*hd, p.Dim), patternMatrix(typ, p.KVHeads*hd, p.Dim), patternMatrix(typ, p.Dim, p.Heads*hd)
	gate, down := patternMatrix(typ, p.FFN, p.Dim), patternMatrix(typ, p.Dim, p.FFN)
	w := gpu.HostWeights{Embed: patternMatrix(typ, p.Vocab, p.Dim), OutNorm: ones(p.Dim)}
	w.Output = patternMatrix(typ, p.Vocab, p.Dim)
	var weightBytes float64
	for _, mtx := range []gpu.HostMatrix{q, k, k, o, gate, gate, down} {
		weightBytes += float64(len(mtx.Data)) * float64(p.Layers)
	}
	weightBytes += float64(len(w.Output.Data))
	for i := 0; i < p.Layers; i++ {
		w.Layers = append(w.Layers, gpu.HostLayer{AttnNorm: ones(p.Dim), FFNNorm: ones(p.Dim),
			Q: q, K: k, V: k, O: o, Gate: gate, Up: gate, Down: down})
	}
	pagesPerSeq := (ctx + pageSize - 1) / pageSize
	m, err := gpu.NewDecoder(d, cfg, w, 128)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	kv, err := m.NewKV(maxB*pagesPerSeq, pageSize)
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	m.UseGraphs = true
	tables := make([][]int32, maxB)
	for s := range tables {
		for i := 0; i < pagesPerSeq; i++ {
			tables[s] = append(tables[s], int32(s*pagesPerSeq+i))
		}
	}
	// Prefill every sequence.
	out := make([]int32, maxB)
	for s := 0; s < maxB; s++ {
		pb := &gpu.DecoderBatch{Seqs: tables, Logits: []int32{prompt - 1}}
		for i := 0; i < prompt; i++ {
			pb.Tokens = append(pb.Tokens, int32((s*31+i*7)%p.Vocab))
			pb.Pos = append(pb.Pos, int32(i))
			pb.Seq = append(pb.Seq, int32(s))
		}
		if err := m.Greedy(kv, pb, out); err != nil {
			b.Fatal(err)
		}
	}
	for _, B := range []int{1, maxB} {
		step := func(pos int) error {
			db := &gpu.DecoderBatch{Seqs: tables}
			for s := 0; s < B; s++ {
				db.Tokens = append(db.Tokens, out[s]%int32(p.Vocab))
				db.Pos = append(db.Pos, int32(pos))
				db.Seq = append(db.Seq, int32(s))
				db.Logits = append(db.Logits, int32(s))
			}
			return m.Greedy(kv, db, out)
		}
		if err := step(prompt); err != nil { // warm-up and graph capture
			b.Fatal(err)
		}
		t0 := time.Now()
		n := 0
		for pos := prompt + 1; pos < prompt+steps; pos++ {
			if err := step(pos); err != nil {
				b.Fatal(err)
			}
			n++
		}
		el := time.Since(t0).Seconds()
		tps := float64(n*B) / el
		frac := weightBytes * float64(n) / el / bw
		b.ReportMetric(tps, fmt.Sprintf("tok/s@B%d", B))
		b.ReportMetric(frac, fmt.Sprintf("ceilfrac@B%d", B))
		fmt.Fprintf(os.Stderr, "decode %s %s B=%d: %.1f tok/s, step %.2f ms, weights %.2f GB/step, %.2f of %.2f TB/s ceiling (ceiling %.1f tok/s at B=1)\n",
			b.Name(), typ, B, tps, 1e3*el/float64(n), weightBytes/1e9, frac, bw/1e12, bw/weightBytes)
	}
}
