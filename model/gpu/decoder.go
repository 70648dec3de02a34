package gpu

import (
	"errors"
	"fmt"
	"sync/atomic"

	"oengine/ggml"
	"oengine/kernels/cuda"
	"oengine/model/llama"
)

// A llama-family decoder (llama, qwen2, qwen3) running on a CUDA device
// with a paged F16 KV cache in device memory (a KV, separate from the
// weights so that the engine sizes the pool), built from host weights
// (load.go reads them from a GGUF file). This file knows the block
// structure:
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
	// Context is the longest sequence (positions) a batch may reach: page
	// tables are ceil(Context/pageSize) wide, and graph-replayed decode
	// steps split attention for this many positions.
	Context int
	// Pooling is the file's pooling type for embeddings (the decoder
	// ignores it; the engine reads it).
	Pooling llama.Pooling
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
	attnNorm, qBias, kBias, vBias, qNorm, kNorm, ffnNorm cuda.DevPtr
	q, k, v, o, gate, up, down                           cuda.Weight
}

// Decoder holds a model's weights and the activation buffers for steps of
// up to maxT tokens (larger batches run in several steps), all in device
// memory. Its methods may be called from several goroutines: the device
// serialises them.
type Decoder struct {
	dev              *cuda.Device
	cfg              DecoderConfig
	maxT             int
	embed, out       cuda.Weight
	outNorm, freqs   cuda.DevPtr
	layers           []devLayer
	x, h, q, k, v, a cuda.DevPtr // activations
	gate, up, tmp    cuda.DevPtr
	logits           cuda.DevPtr
	owned            []cuda.DevPtr
	weights          []cuda.Weight
	closed           atomic.Bool

	// Owned by the device goroutine (touched only inside Do).
	tokens, pos, seq cuda.DevPtr // [maxT] int32
	npos, slot, lidx cuda.DevPtr
	tstart, tlen     cuda.DevPtr
	tables           cuda.DevPtr // [maxT][width] int32
	ints             cuda.DevPtr // the packed step buffer holding the int32 arrays above
	width            int         // page-table row length of ints
	host             []int32
	graphs           map[graphKey]*cuda.Graph
	graphKV          *KV // the KV the graphs were captured with

	// ExactMatMul keeps every matmul on the float32 GEMV kernels; otherwise
	// large batches take cuda.MatMul's GEMM paths on F16 (BF16) operands:
	// tensor cores for quantized weights, cuBLAS for F16 and BF16.
	ExactMatMul bool
	// UseGraphs makes Forward and Greedy replay CUDA graphs for decode
	// steps (one token per sequence): one graph per batch size, page-table
	// stride and attention split count (powers of two for Forward; Greedy
	// uses the context's), captured at the first step of each.
	UseGraphs bool
	// ScalarPrefill keeps prefill attention on the scalar attn_prefill_f16
	// kernel instead of the tensor-core attn_prefill_mma, which runs for
	// head dims 64 and 128 otherwise.
	ScalarPrefill bool
	// F16Prefill runs attn_prefill_mma with Q and the softmax weights
	// rounded to F16 (half its tensor-core work, relative error ~2^-11).
	// By default they are hi+lo F16 pairs: float32 precision, so a token's
	// logits agree with the decode kernel's (speculative verification) and
	// do not depend on how the prompt was chunked beyond float32 rounding.
	F16Prefill bool
}

// DecoderBatch is one step: any mix of prompt chunks and decode tokens, as
// llama.Batch. Token i of sequence Seq[i] sits at position Pos[i]; its K/V
// go to page Seqs[Seq[i]][Pos[i]/pageSize] and it attends to positions
// 0..Pos[i] of its sequence. Logits lists the tokens whose logits are
// wanted, in increasing order.
type DecoderBatch struct {
	Tokens, Pos, Seq []int32
	Seqs             [][]int32
	Logits           []int32
}

// NewDecoder uploads w and allocates buffers for maxTokens tokens per
// device step.
func NewDecoder(d *cuda.Device, cfg DecoderConfig, w HostWeights, maxTokens int) (*Decoder, error) {
	if len(w.Layers) != cfg.Layers || cfg.KVHeads <= 0 || cfg.Heads%cfg.KVHeads != 0 || maxTokens <= 0 || cfg.Context <= 0 {
		return nil, fmt.Errorf("gpu: decoder config %+v with %d layers, %d tokens per step", cfg, len(w.Layers), maxTokens)
	}
	if err := (cuda.AttnParams{Heads: cfg.Heads, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, PageSize: 1, MaxPages: 1}).Check(); err != nil {
		return nil, err
	}
	m := &Decoder{dev: d, cfg: cfg, maxT: maxTokens}
	err := d.Do(func(s *cuda.Stream) error { return m.upload(s, w) })
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Config returns the model's shape.
func (m *Decoder) Config() DecoderConfig { return m.cfg }

// Device returns the device the decoder runs on.
func (m *Decoder) Device() *cuda.Device { return m.dev }

// KVBytesPerPage returns the device memory one KV page of pageSize
// positions takes over all layers (F16 K and V).
func (c DecoderConfig) KVBytesPerPage(pageSize int) int64 {
	return int64(c.Layers) * 2 * int64(pageSize) * int64(c.KVHeads*c.HeadDim) * 2
}

func (m *Decoder) upload(s *cuda.Stream, w HostWeights) error {
	c := m.cfg
	mat := func(h HostMatrix, rows, cols int, name string) (cuda.Weight, error) {
		if h.Rows != rows || h.Cols != cols {
			return cuda.Weight{}, fmt.Errorf("gpu: %s is %dx%d, want %dx%d", name, h.Rows, h.Cols, rows, cols)
		}
		wt, err := s.UploadWeight(h.Type, h.Rows, h.Cols, h.Data)
		if err != nil {
			return cuda.Weight{}, fmt.Errorf("gpu: %s: %w", name, err)
		}
		m.weights = append(m.weights, wt)
		return wt, nil
	}
	vec := func(v []float32, n int, name string, optional bool) (cuda.DevPtr, error) {
		if v == nil && optional {
			return 0, nil
		}
		if len(v) != n {
			return 0, fmt.Errorf("gpu: %s has %d values, want %d", name, len(v), n)
		}
		p, err := m.alloc(s, uint64(4*n))
		if err != nil {
			return 0, err
		}
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
		m.layers = append(m.layers, l)
	}
	T := uint64(m.maxT)
	for _, b := range []struct {
		p *cuda.DevPtr
		n uint64
	}{
		{&m.x, T * uint64(c.Dim) * 4}, {&m.h, T * uint64(c.Dim) * 4}, {&m.tmp, T * uint64(c.Dim) * 4},
		{&m.q, T * uint64(qd) * 4}, {&m.a, T * uint64(qd) * 4},
		{&m.k, T * uint64(kvd) * 4}, {&m.v, T * uint64(kvd) * 4},
		{&m.gate, T * uint64(c.FFN) * 4}, {&m.up, T * uint64(c.FFN) * 4},
		{&m.logits, T * uint64(c.Vocab) * 4},
	} {
		if *b.p, err = m.alloc(s, b.n); err != nil {
			return err
		}
	}
	return nil
}

// intArrays is the number of [maxT] int32 arrays in the packed step buffer.
const intArrays = 8

// intPtrs lists the packed [maxT] arrays in buffer order.
func (m *Decoder) intPtrs() [intArrays]*cuda.DevPtr {
	return [intArrays]*cuda.DevPtr{&m.tokens, &m.pos, &m.seq, &m.npos, &m.slot, &m.lidx, &m.tstart, &m.tlen}
}

// ensureInts sizes the packed step buffer for page tables width pages wide:
// [intArrays][maxT] then the page tables [maxT][width], so that a step
// uploads them with one copy. Growing it drops the captured graphs.
func (m *Decoder) ensureInts(s *cuda.Stream, width int) error {
	if m.ints != 0 && m.width >= width {
		return nil
	}
	if m.ints != 0 {
		if err := s.Sync(); err != nil {
			return err
		}
		m.dropGraphs()
		s.Free(m.ints)
		m.ints = 0
	}
	T := uint64(m.maxT)
	p, err := s.Alloc((intArrays*T + T*uint64(width)) * 4)
	if err != nil {
		return err
	}
	m.ints, m.width = p, width
	for i, q := range m.intPtrs() {
		*q = m.ints + cuda.DevPtr(uint64(i)*T*4)
	}
	m.tables = m.ints + cuda.DevPtr(intArrays*T*4)
	return nil
}

func (m *Decoder) dropGraphs() {
	for _, g := range m.graphs {
		g.Destroy()
	}
	m.graphs = nil
}

func (m *Decoder) alloc(s *cuda.Stream, n uint64) (cuda.DevPtr, error) {
	p, err := s.Alloc(n)
	if err == nil {
		m.owned = append(m.owned, p)
	}
	return p, err
}

// Close frees the decoder's device memory (safe to call twice; KVs are
// closed separately).
func (m *Decoder) Close() {
	if m.closed.Swap(true) {
		return
	}
	m.dev.Do(func(s *cuda.Stream) error {
		m.dropGraphs()
		for _, p := range m.owned {
			s.Free(p)
		}
		for _, w := range m.weights {
			s.Free(w.Ptr)
		}
		s.Free(m.ints)
		m.ints = 0
		return nil
	})
}
