package llama

import (
	"errors"
	"fmt"
	"math"

	"oengine/kernels/cpu"
)

// ErrBadBatch is wrapped by Forward's errors about an invalid Batch or
// logits buffer.
var ErrBadBatch = errors.New("llama: bad batch")

// Batch is one forward step: any mix of prefill chunks and decode tokens of
// many sequences.
type Batch struct {
	Tokens []int32   // [T] token ids
	Pos    []int32   // [T] position of each token in its sequence (0-based)
	Seq    []int32   // [T] index into Seqs
	Seqs   [][]int32 // per sequence: its page table (page ids covering positions 0..max pos in this batch)
	Logits []int32   // indices into Tokens whose logits are wanted, in output order
	Hidden []int32   // indices into Tokens whose final hidden state is wanted (ForwardHidden), in output order
	// Types are an encoder's token types ([T], each below
	// Config.TokenTypes: BERT's segment of a pair); nil: all 0.
	Types []uint8
}

// Forward runs the batch through the model. Token i's K/V are written at
// row Pos[i]%pageSize of page Seqs[Seq[i]][Pos[i]/pageSize]; it attends
// causally to positions 0..Pos[i] of its own sequence, whether they were
// written in this batch or before. logits receives [len(Logits)][Vocab] raw
// logits.
//
// A token's results do not depend on the rest of the batch: the arithmetic
// is the same whatever else runs with it (batch-invariant), provided every
// position it attends to holds the same K/V.
func (m *Model) Forward(kv *KV, b *Batch, logits []float32) error {
	return m.ForwardHidden(kv, b, logits, nil)
}

// ForwardHidden is Forward that also writes [len(b.Hidden)][Dim] final
// hidden states to hidden: each chosen token's state after the last block
// and the output norm, the vector the output projection turns into logits
// (what llama.cpp pools into embeddings).
func (m *Model) ForwardHidden(kv *KV, b *Batch, logits, hidden []float32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := &m.fw
	maxN, err := m.checkBatch(kv, b, logits, hidden)
	if err != nil {
		return err
	}
	T := len(b.Tokens)
	if T == 0 {
		return nil
	}
	c := &m.cfg
	if c.Encoder {
		return m.encode(kv, b, hidden, maxN)
	}
	f.ensure(m, T, len(b.Logits), maxN)
	f.kv, f.b, f.t = kv, b, T
	f.planAttn()

	D, R := c.Dim, c.RopeDims
	for i, tok := range b.Tokens {
		x := f.x[i*D : (i+1)*D]
		m.tokEmb.RowF32(int(tok), x, f.row)
		if c.Gemma {
			cpu.Scale(x, x, float32(math.Sqrt(float64(D))))
		}
	}
	for i, pos := range b.Pos {
		m.ropeCache(f.cs[i*R:(i+1)*R], pos)
		if c.SWA > 0 {
			m.ropeCacheLocal(f.csLocal[i*R:(i+1)*R], pos)
		}
	}
	for l := range m.layers {
		m.layerForward(l)
	}
	for j, idx := range b.Hidden {
		cpu.RMSNorm(hidden[j*D:(j+1)*D], f.x[int(idx)*D:(int(idx)+1)*D], m.outNorm, c.NormEps)
	}
	nOut := len(b.Logits)
	if nOut > 0 {
		for j, idx := range b.Logits {
			cpu.RMSNorm(f.xo[j*D:(j+1)*D], f.x[int(idx)*D:(int(idx)+1)*D], m.outNorm, c.NormEps)
		}
		m.matMul(logits[:nOut*c.Vocab], m.out, f.xo[:nOut*D], nOut)
		if c.FinalSoftcap > 0 { // Gemma 2: cap·tanh(logit/cap)
			cap := float64(c.FinalSoftcap)
			for j, l := range logits[:nOut*c.Vocab] {
				logits[j] = float32(cap * math.Tanh(float64(l)/cap))
			}
		}
	}
	f.kv, f.b = nil, nil
	return nil
}

// layerForward runs block l on the T token states in f.x.
func (m *Model) layerForward(l int) {
	c, f, w := &m.cfg, &m.fw, &m.layers[l]
	T, D, QD, KD := f.t, c.Dim, c.QDim(), c.KVDim()
	b, kv := f.b, f.kv
	pool := m.pool

	// Attention block: xb = norm(x); q, k, v = xb·Wᵀ (+bias); per-head norm;
	// RoPE; K/V into the pages; att = attention; x += att·Woᵀ (Gemma:
	// x += norm(att·Woᵀ)). The per-token loops run on the pool for larger
	// batches (rows.go).
	f.layer = l
	m.forRows(rowNorm, w.attnNorm, nil)
	q, k, v := f.q[:T*QD], f.k[:T*KD], f.v[:T*KD]
	// One parallel loop for the three products (one activation
	// quantization, one wake-up); bitwise the same as three MatMuls.
	f.qkv[0], f.qkv[1], f.qkv[2] = cpu.MatOp{Dst: q, W: w.wq}, cpu.MatOp{Dst: k, W: w.wk}, cpu.MatOp{Dst: v, W: w.wv}
	m.matMuls(f.qkv[:], f.xb[:T*D], T)
	m.forRows(rowQK, nil, w) // biases, per-head q/k norms, RoPE
	for i := 0; i < T; i++ {
		pos := int(b.Pos[i])
		page := b.Seqs[b.Seq[i]][pos/kv.pageSize]
		kv.store(l, page, pos%kv.pageSize, k[i*KD:(i+1)*KD], v[i*KD:(i+1)*KD])
	}
	pool.For(f.slots, f.attnFn)
	m.matMul(f.xb[:T*D], w.wo, f.att[:T*QD], T)
	if w.bo != nil {
		for i := 0; i < T; i++ {
			cpu.Add(f.xb[i*D:(i+1)*D], f.xb[i*D:(i+1)*D], w.bo)
		}
	}
	if c.Gemma {
		m.forRows(rowNorm1, w.postAttnNorm, nil) // xb = norm(xb)
	}

	// Feed-forward block: x += (silu(xb·Wgᵀ) * xb·Wuᵀ)·Wdᵀ with xb = norm(x)
	// (Gemma: gelu for silu, and the result normed before the add).
	F := c.FFN
	m.forRows(rowAddNorm, w.ffnNorm, nil) // x += attention output; xb = norm(x)
	if c.MoELayer(l) {
		m.moeFFN(w) // xb = the mixture of experts of xb (moe.go)
	} else {
		f.gu[0], f.gu[1] = cpu.MatOp{Dst: f.hb[:T*F], W: w.wGate}, cpu.MatOp{Dst: f.hb2[:T*F], W: w.wUp}
		m.matMuls(f.gu[:], f.xb[:T*D], T)
		m.forRows(rowGLU, nil, nil)
		m.matMul(f.xb[:T*D], w.wDown, f.hb[:T*F], T)
	}
	if c.Gemma {
		m.forRows(rowNorm1, w.postFFNNorm, nil)
	}
	m.forRows(rowAdd, nil, nil)
}

// f16AttnPositions selects the attention arithmetic by query position, to
// follow llama.cpp as closely as a batch-invariant engine can. llama.cpp's
// CPU flash attention takes its one-row path (query and V accumulator in
// F16, cpu.AttendF16) for batches of fewer than 64 query rows, which covers
// decoding and short prompts, and a tiled float32 path (cpu.Attend) for
// longer prompt chunks. Which path a token takes there depends on the batch;
// here it depends only on the token's position: the first 64 positions of a
// sequence (where short prompts live) use AttendF16, later ones Attend. An
// F32 store always uses Attend.
const f16AttnPositions = 64

// attnSlots runs the attention work items of slots [lo, hi): slot s takes
// items s, s+slots, s+2*slots, ... (interleaved, because causal attention
// costs grow with position) and uses its own scratch. With enough tokens
// to share out (attnRows) the items are f.attnItems (planAttn): a run of
// consecutive prefill tokens of one sequence on the cpu.Attend path comes
// as tiles of cpu.AttnChunkTokens tokens (cpu.AttendChunk: the K/V blocks
// are read once per tile instead of once per token), any other token as
// one item with all its KV heads (cpu.AttendHeads: the pages' rows are
// read whole, one stream instead of KVHeads strided ones,
// BenchmarkAttendStep in kernels/cpu); otherwise an item is a (token, KV
// head) pair, numbered i*KVHeads+h. All give the same bits per token
// (cpu.AttendChunk is cpu.AttendHeads per token, which is Attend per
// head).
func (f *forward) attnSlots(lo, hi int) {
	c := &f.m.cfg
	rows := f.attnRows()
	items := f.t * c.KVHeads
	if rows {
		items = len(f.attnItems)
	}
	for s := lo; s < hi; s++ {
		scratch := f.attnScratch[s]
		for it := s; it < items; it += f.slots {
			if rows {
				a := f.attnItems[it]
				switch {
				case a.n > 1 && f.tileable(int(a.i+a.n-1)):
					f.attendTile(int(a.i), int(a.n), scratch)
				default: // a tile the sliding window cuts goes token by token
					for i := a.i; i < a.i+a.n; i++ {
						f.attendToken(int(i), scratch)
					}
				}
				continue
			}
			f.attendHead(it/c.KVHeads, it%c.KVHeads, scratch)
		}
	}
}

// attnRows reports whether attnSlots takes whole tokens (or tiles) as
// items: when every pool thread gets at least two tokens.
func (f *forward) attnRows() bool { return f.t >= 2*f.m.pool.Threads() }

// attnItem is a work item of attnSlots in rows mode: the n tokens from
// batch index i, consecutive positions of one sequence when n > 1.
type attnItem struct{ i, n int32 }

// planAttn fills f.attnItems for the call in progress: runs of at least
// two consecutive tokens of one sequence at consecutive positions, all on
// the cpu.Attend path (not GGML mode, positions from f16AttnPositions on),
// cut into tiles of cpu.AttnChunkTokens tokens in position order; every
// other token an item of its own. Decode tokens (one per sequence) keep
// the per-token path. When there are tiles it grows the slots' scratch to
// cpu.AttnChunkScratch (ensure sizes it for the per-token kernels only).
func (f *forward) planAttn() {
	f.attnItems = f.attnItems[:0]
	if !f.attnRows() {
		return
	}
	m, b := f.m, f.b
	c := &m.cfg
	g := c.Heads / c.KVHeads
	tile := cpu.AttnChunkTokens(g)
	chunk := func(i int) bool { return m.ggml == nil && b.Pos[i] >= f16AttnPositions }
	maxN := 0 // positions the last token of a tile attends to, at most
	for i := 0; i < f.t; {
		j := i + 1
		if chunk(i) {
			for j < f.t && b.Seq[j] == b.Seq[i] && b.Pos[j] == b.Pos[j-1]+1 {
				j++
			}
		}
		if j-i > 1 && tile > 1 {
			maxN = max(maxN, int(b.Pos[j-1])+1)
		}
		for k := i; k < j; k += tile { // one item when j = i+1
			f.attnItems = append(f.attnItems, attnItem{int32(k), int32(min(tile, j-k))})
		}
		i = j
	}
	if maxN > 0 {
		need := cpu.AttnChunkScratch(g, maxN, c.HeadDim)
		for s, sc := range f.attnScratch {
			if len(sc) < need {
				f.attnScratch[s] = grow(sc, need)
			}
		}
	}
}

// window returns how token i attends in the layer in progress when that
// takes cpu.AttendWindow: through the sliding window (Config.SWA), as the
// page table from the page holding the window's first position, the
// positions through that table (up to and including token i's) and how
// many of them lie before the window; and with Config.AttnSoftcap. ok is
// false when the token sees every position from 0 without a cap.
func (f *forward) window(i int) (table []int32, n int, o cpu.AttnOpts, ok bool) {
	c, b := &f.m.cfg, f.b
	pos := int(b.Pos[i])
	lo := 0
	if c.Local(f.layer) {
		lo = max(0, pos+1-c.SWA)
	}
	sinks := f.m.layers[f.layer].sinks
	if lo == 0 && c.AttnSoftcap == 0 && sinks == nil {
		return nil, 0, o, false
	}
	ps := f.kv.pageSize
	first := lo / ps
	o = cpu.AttnOpts{Skip: lo - first*ps, Softcap: c.AttnSoftcap, Sinks: sinks}
	return b.Seqs[b.Seq[i]][first:], pos + 1 - first*ps, o, true
}

// tileable reports whether a tile of tokens ending with token i runs as
// one cpu.AttendChunkSinks in the layer in progress: every token sees
// every position from 0 (no sliding window cuts token i's, nor so any
// earlier token's) and no soft-cap applies; sinks do not matter.
func (f *forward) tileable(i int) bool {
	c := &f.m.cfg
	return c.AttnSoftcap == 0 && (!c.Local(f.layer) || int(f.b.Pos[i]) < c.SWA)
}

// f16Window reports whether token i, which attends with o's variations,
// takes cpu.AttendF16Window: as a token without them takes cpu.AttendF16
// (f16AttnPositions), when o has no soft-cap (a window and sinks only).
func (f *forward) f16Window(i int, o cpu.AttnOpts) bool {
	return f.m.ggml == nil && f.b.Pos[i] < f16AttnPositions && o.Softcap == 0
}

// attendToken computes the attention of token i for every KV head.
func (f *forward) attendToken(i int, scratch []float32) {
	m, b := f.m, f.b
	c := &m.cfg
	if table, n, o, ok := f.window(i); ok && !f.f16Window(i, o) {
		QD, l := c.QDim(), f.layer
		cpu.AttendHeadsWindow(f.att[i*QD:(i+1)*QD], f.q[i*QD:(i+1)*QD], c.KVHeads, c.Heads/c.KVHeads,
			f.kv.k[l], f.kv.v[l], table, n, f.scale, o, scratch)
		return
	}
	if m.ggml != nil || b.Pos[i] < f16AttnPositions { // not cpu.Attend (or cpu.AttendF16Window): head by head
		for h := 0; h < c.KVHeads; h++ {
			f.attendHead(i, h, scratch)
		}
		return
	}
	QD, l := c.QDim(), f.layer
	cpu.AttendHeads(f.att[i*QD:(i+1)*QD], f.q[i*QD:(i+1)*QD], c.KVHeads, c.Heads/c.KVHeads,
		f.kv.k[l], f.kv.v[l], b.Seqs[b.Seq[i]], int(b.Pos[i])+1, f.scale, scratch)
}

// attendTile computes the attention of the n tokens from batch index i
// (consecutive positions of one sequence, planAttn) for every KV head.
func (f *forward) attendTile(i, n int, scratch []float32) {
	m, b := f.m, f.b
	c := &m.cfg
	QD, l := c.QDim(), f.layer
	cpu.AttendChunkSinks(f.att[i*QD:(i+n)*QD], f.q[i*QD:(i+n)*QD], n, c.KVHeads, c.Heads/c.KVHeads,
		f.kv.k[l], f.kv.v[l], b.Seqs[b.Seq[i]], int(b.Pos[i]), f.scale, m.layers[l].sinks, scratch)
}

// attendHead computes the attention of token i for KV head h.
func (f *forward) attendHead(i, h int, scratch []float32) {
	m, b, kv, l := f.m, f.b, f.kv, f.layer
	c := &m.cfg
	HD, QD := c.HeadDim, c.QDim()
	g := c.Heads / c.KVHeads
	off := i*QD + h*g*HD
	if table, n, o, ok := f.window(i); ok {
		if o.Sinks != nil {
			o.Sinks = o.Sinks[h*g : (h+1)*g]
		}
		attend := cpu.AttendWindow
		if f.f16Window(i, o) {
			attend = cpu.AttendF16Window
		}
		attend(f.att[off:off+g*HD], f.q[off:off+g*HD], g, kv.k[l], kv.v[l], table, n, h*HD, f.scale, o, scratch)
		return
	}
	attend := f.attendFunc(i) // by position; by batch size in GGML mode (ggml_arith.go)
	attend(f.att[off:off+g*HD], f.q[off:off+g*HD], g, kv.k[l], kv.v[l],
		b.Seqs[b.Seq[i]], int(b.Pos[i])+1, h*HD, f.scale, scratch)
}

// checkBatch validates b against the model, kv and the output buffers and
// returns the largest attention length (max Pos + 1).
func (m *Model) checkBatch(kv *KV, b *Batch, logits, hidden []float32) (int, error) {
	c := &m.cfg
	if kv == nil || b == nil {
		return 0, fmt.Errorf("%w: nil KV or batch", ErrBadBatch)
	}
	if kv.owner != m {
		return 0, fmt.Errorf("%w: KV store was made by another model", ErrBadBatch)
	}
	T := len(b.Tokens)
	if len(b.Pos) != T || len(b.Seq) != T {
		return 0, fmt.Errorf("%w: %d tokens, %d positions, %d sequence indices", ErrBadBatch, T, len(b.Pos), len(b.Seq))
	}
	if len(logits) < len(b.Logits)*c.Vocab {
		return 0, fmt.Errorf("%w: logits buffer holds %d values, need %d", ErrBadBatch, len(logits), len(b.Logits)*c.Vocab)
	}
	if len(hidden) < len(b.Hidden)*c.Dim {
		return 0, fmt.Errorf("%w: hidden buffer holds %d values, need %d", ErrBadBatch, len(hidden), len(b.Hidden)*c.Dim)
	}
	for _, idx := range b.Logits {
		if idx < 0 || int(idx) >= T {
			return 0, fmt.Errorf("%w: logits index %d outside %d tokens", ErrBadBatch, idx, T)
		}
	}
	for _, idx := range b.Hidden {
		if idx < 0 || int(idx) >= T {
			return 0, fmt.Errorf("%w: hidden index %d outside %d tokens", ErrBadBatch, idx, T)
		}
	}
	maxN := 0
	for i := 0; i < T; i++ {
		tok, pos, s := b.Tokens[i], b.Pos[i], b.Seq[i]
		if tok < 0 || int(tok) >= c.Vocab {
			return 0, fmt.Errorf("%w: token %d outside vocabulary of %d", ErrBadBatch, tok, c.Vocab)
		}
		if s < 0 || int(s) >= len(b.Seqs) {
			return 0, fmt.Errorf("%w: token %d names sequence %d of %d", ErrBadBatch, i, s, len(b.Seqs))
		}
		if pos < 0 || pos == math.MaxInt32 {
			return 0, fmt.Errorf("%w: token %d has position %d", ErrBadBatch, i, pos)
		}
		table := b.Seqs[s]
		need := int(pos)/kv.pageSize + 1
		if need > len(table) {
			return 0, fmt.Errorf("%w: sequence %d position %d needs %d pages, table has %d", ErrBadBatch, s, pos, need, len(table))
		}
		maxN = max(maxN, int(pos)+1)
	}
	for s, table := range b.Seqs {
		for _, p := range table {
			if p < 0 || int(p) >= kv.pages {
				return 0, fmt.Errorf("%w: sequence %d uses page %d outside %d pages", ErrBadBatch, s, p, kv.pages)
			}
		}
	}
	return maxN, nil
}
