package cuda

import (
	"errors"
	"fmt"
	"math"

	"oengine/ggml"
)

// A llama-family decoder (llama, qwen2, qwen3) running on the device with a
// paged F16 KV cache, built from host weights. The model package decides
// what the weights are; this file only knows the block structure:
//
//	x = embed[tokens]
//	per layer: h = rmsnorm(x)·attn_norm; q,k,v = h·Wq,Wk,Wvᵀ (+bias) (qk-norm per head)
//	           rope(q,k), write k,v to the cache; a = attention(q, cache)
//	           x += a·Woᵀ; h = rmsnorm(x)·ffn_norm; x += (silu(h·Wgateᵀ)*(h·Wupᵀ))·Wdownᵀ
//	logits = (rmsnorm(x[wanted])·out_norm)·Woutᵀ

// DecoderConfig is the shape of the model.
type DecoderConfig struct {
	Dim, Layers, Heads, KVHeads, HeadDim, FFN, Vocab int
	RopeDims                                         int     // rotated values per head
	RopeBase                                         float32 // rope.freq_base
	RopeFreqScale                                    float32 // 1 unless linear rope scaling
	RopeNeoX                                         bool    // half-split pairs (qwen) instead of adjacent (llama)
	NormEps                                          float32
}

// HostMatrix is an encoded matrix [Rows][Cols] in host memory (row-major
// GGML blocks, as cpu.Matrix).
type HostMatrix struct {
	Type       ggml.Type
	Rows, Cols int
	Data       []byte
}

// HostLayer is one transformer block's weights. Biases and QK-norm vectors
// are nil when the architecture has none.
type HostLayer struct {
	AttnNorm            []float32 // [Dim]
	Q, K, V, O          HostMatrix
	QBias, KBias, VBias []float32 // [Heads*HeadDim], [KVHeads*HeadDim] x2 (qwen2)
	QNorm, KNorm        []float32 // [HeadDim] (qwen3)
	FFNNorm             []float32 // [Dim]
	Gate, Up, Down      HostMatrix
}

// HostWeights is a whole model. Output may be Embed itself (tied).
type HostWeights struct {
	Embed     HostMatrix // [Vocab][Dim]
	Layers    []HostLayer
	OutNorm   []float32  // [Dim]
	Output    HostMatrix // [Vocab][Dim]
	RopeFreqs []float32  // [RopeDims/2] or nil
}

type devLayer struct {
	attnNorm, qBias, kBias, vBias, qNorm, kNorm, ffnNorm DevPtr
	q, k, v, o, gate, up, down                           Weight
	kc, vc                                               DevPtr // [pages*pageSize][KVHeads*HeadDim] F16
}

// Decoder holds a model's weights, its KV cache pages and the activation
// buffers for batches of up to MaxTokens tokens, all in device memory.
type Decoder struct {
	dev              *Device
	cfg              DecoderConfig
	pages, pageSize  int
	maxT             int
	embed, out       Weight
	outNorm, freqs   DevPtr
	layers           []devLayer
	x, h, q, k, v, a DevPtr // activations
	gate, up, tmp    DevPtr
	logits           DevPtr
	tokens, pos, seq DevPtr // [maxT] int32
	npos, slot, lidx DevPtr
	tstart, tlen     DevPtr
	tables           DevPtr // [maxT][pages] int32
	ints             DevPtr // the packed step buffer holding the int32 arrays above
	host             []int32
	owned            []DevPtr

	// ExactMatMul keeps every matmul on the float32 GEMV kernels; otherwise
	// batches of GemmMinTokens or more use cuBLAS on F16 operands.
	ExactMatMul bool
	// UseGraphs makes Greedy replay CUDA graphs for decode batches; it
	// needs MaxContext, the largest position+1 any sequence will reach
	// (it fixes the attention split count inside the graph).
	UseGraphs  bool
	MaxContext int
	graphs     map[int]*Graph // by batch size; owned by the device goroutine
	weights    []Weight
}

// DecoderBatch is one step: any mix of prompt chunks and decode tokens, as
// llama.Batch. Token i of sequence Seq[i] sits at position Pos[i]; its K/V
// go to page Seqs[Seq[i]][Pos[i]/pageSize] and it attends to positions
// 0..Pos[i] of its sequence. Logits lists the tokens whose logits are wanted.
type DecoderBatch struct {
	Tokens, Pos, Seq []int32
	Seqs             [][]int32
	Logits           []int32
}

// NewDecoder uploads w and allocates a KV cache of pages pages of pageSize
// positions per layer, and buffers for maxTokens tokens per step.
func NewDecoder(d *Device, cfg DecoderConfig, w HostWeights, pages, pageSize, maxTokens int) (*Decoder, error) {
	if len(w.Layers) != cfg.Layers || cfg.Heads%cfg.KVHeads != 0 || pages <= 0 || pageSize <= 0 || maxTokens <= 0 {
		return nil, fmt.Errorf("cuda: decoder config %+v with %d layers, %d pages of %d, %d tokens", cfg, len(w.Layers), pages, pageSize, maxTokens)
	}
	if err := (AttnParams{Heads: cfg.Heads, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, PageSize: pageSize, MaxPages: pages}).check(); err != nil {
		return nil, err
	}
	m := &Decoder{dev: d, cfg: cfg, pages: pages, pageSize: pageSize, maxT: maxTokens}
	err := d.Do(func(s *Stream) error { return m.upload(s, w) })
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// KVBytes returns the device memory one KV page takes over all layers.
func (c DecoderConfig) KVBytesPerPage(pageSize int) int64 {
	return int64(c.Layers) * 2 * int64(pageSize) * int64(c.KVHeads*c.HeadDim) * 2
}

func (m *Decoder) upload(s *Stream, w HostWeights) error {
	c := m.cfg
	mat := func(h HostMatrix, rows, cols int, name string) (Weight, error) {
		if h.Rows != rows || h.Cols != cols {
			return Weight{}, fmt.Errorf("cuda: %s is %dx%d, want %dx%d", name, h.Rows, h.Cols, rows, cols)
		}
		wt, err := s.UploadWeight(h.Type, h.Rows, h.Cols, h.Data)
		if err != nil {
			return Weight{}, fmt.Errorf("cuda: %s: %w", name, err)
		}
		m.weights = append(m.weights, wt)
		return wt, nil
	}
	vec := func(v []float32, n int, name string, optional bool) (DevPtr, error) {
		if v == nil && optional {
			return 0, nil
		}
		if len(v) != n {
			return 0, fmt.Errorf("cuda: %s has %d values, want %d", name, len(v), n)
		}
		p, err := s.Alloc(uint64(4 * n))
		if err != nil {
			return 0, err
		}
		m.owned = append(m.owned, p)
		return p, s.UploadF32(p, v)
	}
	var err error
	if m.embed, err = mat(w.Embed, c.Vocab, c.Dim, "token_embd"); err != nil {
		return err
	}
	tied := len(w.Output.Data) == 0 || (len(w.Embed.Data) > 0 && &w.Output.Data[0] == &w.Embed.Data[0])
	if tied {
		m.out = m.embed
	} else if m.out, err = mat(w.Output, c.Vocab, c.Dim, "output"); err != nil {
		return err
	}
	if m.outNorm, err = vec(w.OutNorm, c.Dim, "output_norm", false); err != nil {
		return err
	}
	if m.freqs, err = vec(w.RopeFreqs, c.RopeDims/2, "rope_freqs", true); err != nil {
		return err
	}
	qd, kvd := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	kvBytes := uint64(m.pages*m.pageSize*kvd) * 2
	for i, hl := range w.Layers {
		var l devLayer
		n := fmt.Sprintf("blk.%d.", i)
		steps := []error{}
		add := func(e error) { steps = append(steps, e) }
		l.attnNorm, err = vec(hl.AttnNorm, c.Dim, n+"attn_norm", false)
		add(err)
		l.ffnNorm, err = vec(hl.FFNNorm, c.Dim, n+"ffn_norm", false)
		add(err)
		l.qBias, err = vec(hl.QBias, qd, n+"attn_q.bias", true)
		add(err)
		l.kBias, err = vec(hl.KBias, kvd, n+"attn_k.bias", true)
		add(err)
		l.vBias, err = vec(hl.VBias, kvd, n+"attn_v.bias", true)
		add(err)
		l.qNorm, err = vec(hl.QNorm, c.HeadDim, n+"attn_q_norm", true)
		add(err)
		l.kNorm, err = vec(hl.KNorm, c.HeadDim, n+"attn_k_norm", true)
		add(err)
		l.q, err = mat(hl.Q, qd, c.Dim, n+"attn_q")
		add(err)
		l.k, err = mat(hl.K, kvd, c.Dim, n+"attn_k")
		add(err)
		l.v, err = mat(hl.V, kvd, c.Dim, n+"attn_v")
		add(err)
		l.o, err = mat(hl.O, c.Dim, qd, n+"attn_output")
		add(err)
		l.gate, err = mat(hl.Gate, c.FFN, c.Dim, n+"ffn_gate")
		add(err)
		l.up, err = mat(hl.Up, c.FFN, c.Dim, n+"ffn_up")
		add(err)
		l.down, err = mat(hl.Down, c.Dim, c.FFN, n+"ffn_down")
		add(err)
		if err := errors.Join(steps...); err != nil {
			return err
		}
		if l.kc, err = m.alloc(s, kvBytes); err != nil {
			return err
		}
		if l.vc, err = m.alloc(s, kvBytes); err != nil {
			return err
		}
		m.layers = append(m.layers, l)
	}
	T := uint64(m.maxT)
	for _, b := range []struct {
		p *DevPtr
		n uint64
	}{
		{&m.x, T * uint64(c.Dim) * 4}, {&m.h, T * uint64(c.Dim) * 4}, {&m.tmp, T * uint64(c.Dim) * 4},
		{&m.q, T * uint64(qd) * 4}, {&m.a, T * uint64(qd) * 4},
		{&m.k, T * uint64(kvd) * 4}, {&m.v, T * uint64(kvd) * 4},
		{&m.gate, T * uint64(c.FFN) * 4}, {&m.up, T * uint64(c.FFN) * 4},
		{&m.logits, T * uint64(c.Vocab) * 4},
		{&m.ints, (intArrays*T + T*uint64(m.pages)) * 4},
	} {
		if *b.p, err = m.alloc(s, b.n); err != nil {
			return err
		}
	}
	// The per-step int32 arrays share one buffer so that a step uploads
	// them with one copy: [intArrays][maxT] then the page tables [maxT][pages].
	for i, p := range m.intPtrs() {
		*p = m.ints + DevPtr(uint64(i)*T*4)
	}
	m.tables = m.ints + DevPtr(intArrays*T*4)
	return nil
}

// intArrays is the number of [maxT] int32 arrays in the packed step buffer.
const intArrays = 8

// intPtrs lists the packed [maxT] arrays in buffer order.
func (m *Decoder) intPtrs() [intArrays]*DevPtr {
	return [intArrays]*DevPtr{&m.tokens, &m.pos, &m.seq, &m.npos, &m.slot, &m.lidx, &m.tstart, &m.tlen}
}

func (m *Decoder) alloc(s *Stream, n uint64) (DevPtr, error) {
	p, err := s.Alloc(n)
	if err == nil {
		m.owned = append(m.owned, p)
	}
	return p, err
}

// Close frees the decoder's device memory (safe to call twice).
func (m *Decoder) Close() {
	if len(m.owned) == 0 && len(m.weights) == 0 {
		return
	}
	m.dev.Do(func(s *Stream) error {
		for _, g := range m.graphs {
			g.Destroy()
		}
		m.graphs = nil
		for _, p := range m.owned {
			s.Free(p)
		}
		for _, w := range m.weights {
			s.Free(w.Ptr)
		}
		return nil
	})
	m.owned, m.weights = nil, nil
}

// hostBatch is a validated batch resolved to the device's int32 arrays.
type hostBatch struct {
	T, nseq, maxNPos int
	slot, npos       []int32
	tables           []int32 // [nseq][pages]
	tstart, tlen     []int32
}

func (m *Decoder) resolve(b *DecoderBatch, logits []float32) (hostBatch, error) {
	T := len(b.Tokens)
	hb := hostBatch{T: T, nseq: len(b.Seqs)}
	if T == 0 || T > m.maxT || len(b.Pos) != T || len(b.Seq) != T {
		return hb, fmt.Errorf("cuda: batch of %d tokens (%d pos, %d seq), at most %d", T, len(b.Pos), len(b.Seq), m.maxT)
	}
	if len(b.Logits) > m.maxT || (logits != nil && len(logits) < len(b.Logits)*m.cfg.Vocab) {
		return hb, fmt.Errorf("cuda: %d logits rows into %d values", len(b.Logits), len(logits))
	}
	if len(b.Seqs) > m.maxT {
		return hb, fmt.Errorf("cuda: %d sequences, at most %d", len(b.Seqs), m.maxT)
	}
	hb.tables = make([]int32, len(b.Seqs)*m.pages)
	for s, tb := range b.Seqs {
		if len(tb) > m.pages {
			return hb, fmt.Errorf("cuda: sequence %d has %d pages, the cache %d", s, len(tb), m.pages)
		}
		for i, p := range tb {
			if p < 0 || int(p) >= m.pages {
				return hb, fmt.Errorf("cuda: sequence %d page %d is %d, outside [0, %d)", s, i, p, m.pages)
			}
		}
		copy(hb.tables[s*m.pages:], tb)
	}
	hb.slot, hb.npos = make([]int32, T), make([]int32, T)
	for i := 0; i < T; i++ {
		tok, pos, sq := b.Tokens[i], b.Pos[i], b.Seq[i]
		if tok < 0 || int(tok) >= m.cfg.Vocab || sq < 0 || int(sq) >= len(b.Seqs) || pos < 0 {
			return hb, fmt.Errorf("cuda: token %d: id %d, seq %d, pos %d out of range", i, tok, sq, pos)
		}
		pi := int(pos) / m.pageSize
		if pi >= len(b.Seqs[sq]) {
			return hb, fmt.Errorf("cuda: token %d at position %d has no page in sequence %d", i, pos, sq)
		}
		hb.slot[i] = b.Seqs[sq][pi]*int32(m.pageSize) + pos%int32(m.pageSize)
		hb.npos[i] = pos + 1
		hb.maxNPos = max(hb.maxNPos, int(pos)+1)
	}
	for _, l := range b.Logits {
		if l < 0 || int(l) >= T {
			return hb, fmt.Errorf("cuda: logits index %d outside the batch", l)
		}
	}
	hb.tstart, hb.tlen = PrefillTiles(b.Seq, b.Pos, m.attn())
	return hb, nil
}

func (m *Decoder) attn() AttnParams {
	c := m.cfg
	return AttnParams{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, PageSize: m.pageSize,
		MaxPages: m.pages, Scale: float32(1 / math.Sqrt(float64(c.HeadDim)))}
}

func (m *Decoder) rope() RopeParams {
	c := m.cfg
	fs := c.RopeFreqScale
	if fs == 0 {
		fs = 1
	}
	return RopeParams{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, NRot: c.RopeDims,
		Base: c.RopeBase, FreqScale: fs, Factors: m.freqs, NeoX: c.RopeNeoX}
}

// Forward runs one batch and writes logits [len(b.Logits)][Vocab].
func (m *Decoder) Forward(b *DecoderBatch, logits []float32) error {
	hb, err := m.resolve(b, logits)
	if err != nil {
		return err
	}
	if logits == nil && len(b.Logits) > 0 {
		return fmt.Errorf("cuda: %d logits rows wanted, no buffer", len(b.Logits))
	}
	return m.dev.Do(func(s *Stream) error {
		if err := m.uploadBatch(s, b, hb); err != nil {
			return err
		}
		if err := m.step(s, hb, len(b.Logits)); err != nil {
			return err
		}
		if len(b.Logits) == 0 {
			return s.Sync()
		}
		return s.DownloadF32(logits[:len(b.Logits)*m.cfg.Vocab], m.logits)
	})
}

// step queues the whole forward pass (no host synchronisation).
func (m *Decoder) step(s *Stream, hb hostBatch, nlog int) error {
	c, T := m.cfg, hb.T
	qd, kvd := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	ap, rp := m.attn(), m.rope()
	run := func(errs ...error) error { return errors.Join(errs...) }
	mm := s.MatMul
	if m.ExactMatMul {
		mm = s.Gemv
	}
	if err := s.GetRows(m.x, m.embed, m.tokens, T); err != nil {
		return err
	}
	prefill := len(hb.tstart) < T // some tiles hold several tokens
	for _, l := range m.layers {
		if err := run(
			s.RMSNorm(m.h, m.x, l.attnNorm, T, c.Dim, c.NormEps),
			mm(m.q, l.q, m.h, T),
			mm(m.k, l.k, m.h, T),
			mm(m.v, l.v, m.h, T),
		); err != nil {
			return err
		}
		if l.qBias != 0 {
			if err := run(s.AddBias(m.q, l.qBias, T, qd), s.AddBias(m.k, l.kBias, T, kvd), s.AddBias(m.v, l.vBias, T, kvd)); err != nil {
				return err
			}
		}
		if l.qNorm != 0 {
			if err := run(s.RMSNorm(m.q, m.q, l.qNorm, T*c.Heads, c.HeadDim, c.NormEps),
				s.RMSNorm(m.k, m.k, l.kNorm, T*c.KVHeads, c.HeadDim, c.NormEps)); err != nil {
				return err
			}
		}
		if err := s.RopeKVWrite(m.q, m.k, m.v, l.kc, l.vc, m.pos, m.slot, T, rp); err != nil {
			return err
		}
		var err error
		if prefill {
			err = s.AttnPrefill(m.a, m.q, l.kc, l.vc, m.tables, m.seq, m.npos, m.tstart, m.tlen, len(hb.tstart), ap)
		} else {
			err = s.AttnDecode(m.a, m.q, l.kc, l.vc, m.tables, m.seq, m.npos, T, hb.maxNPos, ap)
		}
		if err != nil {
			return err
		}
		if err := run(
			mm(m.tmp, l.o, m.a, T),
			s.Add(m.x, m.x, m.tmp, T*c.Dim),
			s.RMSNorm(m.h, m.x, l.ffnNorm, T, c.Dim, c.NormEps),
			mm(m.gate, l.gate, m.h, T),
			mm(m.up, l.up, m.h, T),
			s.SiLUMul(m.gate, m.gate, m.up, T*c.FFN),
			mm(m.tmp, l.down, m.gate, T),
			s.Add(m.x, m.x, m.tmp, T*c.Dim),
		); err != nil {
			return err
		}
	}
	if nlog == 0 {
		return nil
	}
	return run(
		s.GatherRows(m.h, m.x, m.lidx, nlog, c.Dim),
		s.RMSNorm(m.h, m.h, m.outNorm, nlog, c.Dim, c.NormEps),
		mm(m.logits, m.out, m.h, nlog),
	)
}
