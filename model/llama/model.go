package llama

import (
	"fmt"
	"slices"
	"sync"

	"oengine/kernels/cpu"
	"oengine/model/gguf"
)

// Options tune Load.
type Options struct {
	Threads int       // worker threads when Pool is nil (<= 0: all cores)
	Pool    *cpu.Pool // optional shared pool; Close leaves a shared pool open
	// GGMLArithmetic computes as llama.cpp's x86 CPU backend does, for
	// checks against llama.cpp references (ggml_arith.go); slower, and the
	// attention arithmetic then depends on the batch size.
	GGMLArithmetic bool
	// RowMajor keeps Q4_0, Q5_0, Q5_1, Q8_0, K-quant and IQ4_NL weights row-major,
	// and BF16 weights BF16.
	// Otherwise, when the file's tensor bytes are writable
	// (gguf.OpenCopy) and the CPU has the AVX-512 VNNI kernels, Load
	// rewrites the Q4_0, Q5_0, Q5_1, Q8_0, Q2_K-Q6_K and IQ4_NL linear weights (a tied
	// output's token embedding too) in place into their decode layouts
	// (cpu.PackDecodeLayout: the same bytes, 16 rows interleaved per
	// block, read by 16-row kernels as one stream), and, with AVX2, BF16
	// linear weights into F16 values (cpu.PackBF16). Results are bitwise
	// the same either way.
	RowMajor bool
}

// layer holds one transformer block's weights. Matrices are [rows][cols]
// row-major with rows the output features:
//
//	wq [Heads*HeadDim][Dim], wk, wv [KVHeads*HeadDim][Dim], wo [Dim][Heads*HeadDim]
//	wGate, wUp [FFN][Dim], wDown [Dim][FFN]
type layer struct {
	attnNorm, ffnNorm []float32 // [Dim]
	wq, wk, wv, wo    cpu.Matrix
	bq, bk, bv        []float32 // [Heads*HeadDim], [KVHeads*HeadDim] x2 (qwen2), else nil
	qNorm, kNorm      []float32 // [HeadDim] (qwen3, gemma3), else nil
	wGate, wUp, wDown cpu.Matrix
	// postAttnNorm, postFFNNorm: [Dim] (Config.Gemma), else nil.
	postAttnNorm, postFFNNorm []float32
	// router ([Experts][Dim]) and each expert's matrices (Config.Experts;
	// the dense wGate, wUp, wDown are then empty).
	router                     cpu.Matrix
	gateExps, upExps, downExps []cpu.Matrix
	// gpt-oss: bo [Dim] (Config.OutBias), sinks [Heads] (Config.AttnSinks),
	// the router's bias [Experts] and the experts' biases, [Experts][ExpertFFN]
	// for gate and up and [Experts][Dim] for down (Config.ExpertBias).
	bo, sinks                              []float32
	routerB, gateExpsB, upExpsB, downExpsB []float32
	// Encoder (Config.Encoder; encoder.go): the LayerNorms after the
	// attention and after the feed-forward ([Dim] weights and biases), and
	// the feed-forward's biases, [FFN] for up and [Dim] for down (bert;
	// nil when the file has none). bq, bk, bv and bo are optional there.
	attnOutNormW, attnOutNormB, outNormW, outNormB []float32
	bUp, bDown                                     []float32
}

// Model is a loaded model. Its weights are views into the GGUF file's
// mapping: keep the file open while the model is in use.
//
// Forward may be called from several goroutines; calls are serialized (one
// scratch arena per model).
type Model struct {
	cfg       Config
	tokEmb    cpu.Matrix // [Vocab][Dim]
	outNorm   []float32  // [Dim]
	out       cpu.Matrix // [Vocab][Dim] (token_embd when tied)
	ropeFreqs []float32  // [RopeDims/2] or nil
	yarn      cpu.YaRN   // Config.Yarn's rope
	yarnSWA   cpu.YaRN   // the local layers' (Config.Yarn and Config.SWA)
	layers    []layer
	// An encoder's embedding (Config.Encoder): the LayerNorm after it
	// ([Dim] weight and bias), the token-type rows ([TokenTypes][Dim]; nil
	// without token_types) and the position rows ([CtxLen][Dim], AbsPos);
	embNormW, embNormB, typeEmb, posEmb []float32
	// A classification head (rank.go; empty without one): clsW [Dim][Dim]
	// and clsB [Dim] (dense, then tanh, or GELU and a LayerNorm of
	// clsNormW and clsNormB), clsOutW [outputs][Dim] and clsOutB
	// [outputs].
	clsW, clsOutW                     cpu.Matrix
	clsB, clsOutB, clsNormW, clsNormB []float32
	// Dense layers after pooling (dense.go; empty without them): dense2
	// [inner][Dim] with bias dense2B, dense3 [Dim][inner].
	dense2, dense3 cpu.Matrix
	dense2B        []float32
	alibi          []float32 // Config.ALiBi's slope per query head

	pool    *cpu.Pool
	ownPool bool

	mu   sync.Mutex // protects fwd and serializes Forward
	fw   forward
	ggml *ggmlState // GGML arithmetic mode (ggml_arith.go); nil when off
}

// Load builds a model from an open GGUF file, checking every tensor's shape
// and type. Unknown or unsupported tensor types are an error naming the
// tensor and its type.
func Load(f *gguf.File, opts Options) (*Model, error) {
	cfg, err := ConfigFromGGUF(f)
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg}
	if cfg.ALiBi {
		m.alibi = alibiSlopes(cfg.Heads, alibiMaxBias)
	}
	if cfg.Yarn {
		m.yarn = cfg.YaRN()
		m.yarnSWA = cfg.yarnFor(cfg.RopeBaseSWA, cfg.RopeScaleSWA)
	}
	ld := loader{f: f}
	c := cfg
	m.tokEmb = ld.matrix("token_embd.weight", c.Vocab, c.Dim)
	if c.Encoder && !c.Gemma {
		m.layers = make([]layer, c.Layers)
		m.loadEncoder(&ld)
	} else { // a decoder's tensors; EmbeddingGemma has Gemma 3's
		m.loadDecoder(&ld)
	}
	m.loadRankHead(&ld)
	m.loadDense(&ld)
	if ld.err != nil {
		return nil, ld.err
	}
	if f.Claimed() {
		return nil, fmt.Errorf("llama: the file's tensors were rewritten in place by another model; open the file again")
	}
	if opts.GGMLArithmetic {
		if c.Gemma || c.AttnSinks || c.Encoder {
			return nil, fmt.Errorf("%w: GGML arithmetic mode for %s", ErrUnsupported, c.Arch)
		}
		m.ggml = newGGMLState(false)
	}
	if opts.Pool != nil {
		m.pool = opts.Pool
	} else {
		m.pool = cpu.NewPool(opts.Threads)
		m.ownPool = true
	}
	if !opts.RowMajor && f.ClaimWritable() {
		m.packDecodeLayout()
	}
	return m, nil
}

// loadDecoder reads a decoder's output and its layers (Load has read the
// token embedding).
func (m *Model) loadDecoder(ld *loader) {
	c, f := m.cfg, ld.f
	m.outNorm = ld.vector("output_norm.weight", c.Dim)
	if c.TiedOut {
		m.out = m.tokEmb
	} else {
		m.out = ld.matrix("output.weight", c.Vocab, c.Dim)
	}
	if c.RopeFreqs {
		m.ropeFreqs = ld.vector("rope_freqs.weight", c.RopeDims/2)
	}
	if name := c.RopeFactorsTensor(); name != "" {
		m.ropeFreqs = ld.vector(name, c.RopeDims/2)
	}
	m.layers = make([]layer, c.Layers)
	for i := range m.layers {
		l := &m.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		l.attnNorm = ld.vector(p+"attn_norm.weight", c.Dim)
		if _, fused := f.Tensor(p + "attn_qkv.weight"); fused {
			// One matrix whose rows are Q's, then K's, then V's (phi3).
			qkv := ld.rows(p+"attn_qkv.weight", c.QDim()+2*c.KVDim(), c.Dim, []int{c.QDim(), c.KVDim(), c.KVDim()})
			if qkv != nil {
				l.wq, l.wk, l.wv = qkv[0], qkv[1], qkv[2]
			}
		} else {
			l.wq = ld.matrix(p+"attn_q.weight", c.QDim(), c.Dim)
			l.wk = ld.matrix(p+"attn_k.weight", c.KVDim(), c.Dim)
			l.wv = ld.matrix(p+"attn_v.weight", c.KVDim(), c.Dim)
		}
		l.wo = ld.matrix(p+"attn_output.weight", c.Dim, c.QDim())
		if c.QKVBias {
			l.bq = ld.vector(p+"attn_q.bias", c.QDim())
			l.bk = ld.vector(p+"attn_k.bias", c.KVDim())
			l.bv = ld.vector(p+"attn_v.bias", c.KVDim())
		}
		if c.QKNorm {
			l.qNorm = ld.vector(p+"attn_q_norm.weight", c.HeadDim)
			l.kNorm = ld.vector(p+"attn_k_norm.weight", c.HeadDim)
		}
		if c.OutBias {
			l.bo = ld.vector(p+"attn_output.bias", c.Dim)
		}
		if c.AttnSinks {
			l.sinks = ld.vector(p+"attn_sinks.weight", c.Heads)
		}
		l.ffnNorm = ld.vector(p+c.ffnNormTensor(), c.Dim)
		if c.Experts > 0 {
			l.router = ld.matrix(p+"ffn_gate_inp.weight", c.Experts, c.Dim)
			l.gateExps = ld.experts(p+"ffn_gate_exps.weight", c.Experts, c.ExpertFFN, c.Dim)
			l.upExps = ld.experts(p+"ffn_up_exps.weight", c.Experts, c.ExpertFFN, c.Dim)
			l.downExps = ld.experts(p+"ffn_down_exps.weight", c.Experts, c.Dim, c.ExpertFFN)
			if c.ExpertBias {
				l.routerB = ld.vector(p+"ffn_gate_inp.bias", c.Experts)
				l.gateExpsB = ld.table(p+"ffn_gate_exps.bias", c.Experts, c.ExpertFFN)
				l.upExpsB = ld.table(p+"ffn_up_exps.bias", c.Experts, c.ExpertFFN)
				l.downExpsB = ld.table(p+"ffn_down_exps.bias", c.Experts, c.Dim)
			}
		} else {
			if c.FusedUp {
				if gu := ld.rows(p+"ffn_up.weight", 2*c.FFN, c.Dim, []int{c.FFN, c.FFN}); gu != nil {
					l.wGate, l.wUp = gu[0], gu[1]
				}
			} else {
				l.wGate = ld.matrix(p+"ffn_gate.weight", c.FFN, c.Dim)
				l.wUp = ld.matrix(p+"ffn_up.weight", c.FFN, c.Dim)
			}
			l.wDown = ld.matrix(p+"ffn_down.weight", c.Dim, c.FFN)
		}
		if c.Gemma {
			l.postAttnNorm = ld.vector(p+"post_attention_norm.weight", c.Dim)
			l.postFFNNorm = ld.vector(p+"post_ffw_norm.weight", c.Dim)
		}
		if ld.err != nil {
			break
		}
	}
}

// packDecodeLayout rewrites the Q4_0, Q5_0, Q5_1, Q8_0, Q2_K-Q6_K and
// IQ4_NL linear weights in place into their decode layouts, and BF16 ones into F16
// values (exactly, scaled by a power of two: cpu.PackBF16), the output
// matrix included when it is the token embedding (tied), whose rows the
// embedding lookup then copies out (cpu.Matrix.RowF32).
// The caller owns the tensor bytes (gguf.File.ClaimWritable).
func (m *Model) packDecodeLayout() {
	ws := m.linearMatrices()
	// Matrices are independent: rewrite them on the model's workers.
	m.pool.For(len(ws), func(lo, hi int) {
		for _, w := range ws[lo:hi] {
			if p, ok := cpu.PackDecodeLayout(*w, w.Data); ok {
				*w = p
			}
		}
	})
	if m.cfg.TiedOut {
		m.tokEmb = m.out // the same bytes, now in the layout
	}
}

// linearMatrices lists the weight matrices that MatMul reads: the layers'
// projections and the output matrix (the token embedding when tied).
func (m *Model) linearMatrices() []*cpu.Matrix {
	ws := []*cpu.Matrix{&m.out}
	for i := range m.layers {
		l := &m.layers[i]
		ws = append(ws, &l.wq, &l.wk, &l.wv, &l.wo)
		if m.cfg.MoELayer(i) {
			ws = append(ws, &l.router)
			for e := range l.upExps {
				if l.gateExps != nil { // nomic-bert-moe's experts have none
					ws = append(ws, &l.gateExps[e])
				}
				ws = append(ws, &l.upExps[e], &l.downExps[e])
			}
			continue
		}
		ws = append(ws, &l.wGate, &l.wUp, &l.wDown)
	}
	// The classification head; empty matrices (bert's gate, a model
	// without a head) are left out.
	ws = append(ws, &m.clsW, &m.clsOutW, &m.dense2, &m.dense3)
	return slices.DeleteFunc(ws, func(w *cpu.Matrix) bool { return w.Rows == 0 })
}

// DecodeLayout reports how many weight matrices Load rewrote: into a
// decode layout, or from BF16 into F16.
func (m *Model) DecodeLayout() int {
	n := 0
	for _, w := range m.linearMatrices() {
		if w.DecodeLayout() || w.FromBF16() {
			n++
		}
	}
	return n
}

// Config returns the model's shape.
func (m *Model) Config() Config { return m.cfg }

// Pool returns the worker pool the model computes on.
func (m *Model) Pool() *cpu.Pool { return m.pool }

// Close stops the model's own worker pool (a shared one stays open). The
// GGUF file is the caller's to close. Safe to call twice.
func (m *Model) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ownPool && m.pool != nil {
		m.pool.Close()
	}
}

// loader reads tensors and keeps the first error.
type loader struct {
	f   *gguf.File
	err error
}

func (ld *loader) tensor(name string, dims ...int) *gguf.TensorInfo {
	if ld.err != nil {
		return nil
	}
	t, ok := ld.f.Tensor(name)
	if !ok {
		ld.err = fmt.Errorf("llama: missing tensor %s", name)
		return nil
	}
	if !t.Type.Supported() {
		ld.err = fmt.Errorf("%w: tensor %s has type %s (id %d)", ErrUnsupported, name, t.Type, uint32(t.Type))
		return nil
	}
	// GGUF dims are innermost first; callers pass them that way (cols, rows).
	match := len(t.Dims) == len(dims)
	for i := 0; match && i < len(dims); i++ {
		match = t.Dims[i] == uint64(dims[i])
	}
	if !match {
		ld.err = fmt.Errorf("llama: tensor %s has dims %v, want %v", name, t.Dims, dims)
		return nil
	}
	return t
}

// matrix returns tensor name as a [rows][cols] matrix (GGUF dims [cols, rows]).
func (ld *loader) matrix(name string, rows, cols int) cpu.Matrix {
	t := ld.tensor(name, cols, rows)
	if t == nil {
		return cpu.Matrix{}
	}
	mat, err := cpu.NewMatrix(t.Type, rows, cols, t.Data)
	if err != nil {
		ld.err = fmt.Errorf("llama: tensor %s: %w", name, err)
	}
	return mat
}

// rows returns tensor name, a [rows][cols] matrix, as consecutive row
// ranges of the given sizes (a fused projection: each range is a Matrix
// over its own bytes).
func (ld *loader) rows(name string, rows, cols int, parts []int) []cpu.Matrix {
	whole := ld.matrix(name, rows, cols)
	if ld.err != nil {
		return nil
	}
	rowBytes := len(whole.Data) / rows
	out := make([]cpu.Matrix, len(parts))
	r := 0
	for i, n := range parts {
		mat, err := cpu.NewMatrix(whole.Type, n, cols, whole.Data[r*rowBytes:(r+n)*rowBytes:(r+n)*rowBytes])
		if err != nil {
			ld.err = fmt.Errorf("llama: tensor %s rows %d-%d: %w", name, r, r+n, err)
			return nil
		}
		out[i] = mat
		r += n
	}
	return out
}

// experts returns tensor name, n matrices of [rows][cols] (GGUF dims
// [cols, rows, n]), as one Matrix per expert over its bytes.
func (ld *loader) experts(name string, n, rows, cols int) []cpu.Matrix {
	t := ld.tensor(name, cols, rows, n)
	if t == nil {
		return nil
	}
	size := len(t.Data) / n
	out := make([]cpu.Matrix, n)
	for e := range out {
		mat, err := cpu.NewMatrix(t.Type, rows, cols, t.Data[e*size:(e+1)*size:(e+1)*size])
		if err != nil {
			ld.err = fmt.Errorf("llama: tensor %s expert %d: %w", name, e, err)
			return nil
		}
		out[e] = mat
	}
	return out
}

// table returns tensor name, [rows][cols] (GGUF dims [cols, rows], any
// supported type), as float32.
func (ld *loader) table(name string, rows, cols int) []float32 {
	t := ld.tensor(name, cols, rows)
	if t == nil {
		return nil
	}
	v := make([]float32, rows*cols)
	if err := cpu.Dequantize(t.Type, t.Data, v); err != nil {
		ld.err = fmt.Errorf("llama: tensor %s: %w", name, err)
		return nil
	}
	return v
}

// vector returns tensor name ([n], any supported type) as float32.
func (ld *loader) vector(name string, n int) []float32 {
	t := ld.tensor(name, n)
	if t == nil {
		return nil
	}
	v := make([]float32, n)
	if err := cpu.Dequantize(t.Type, t.Data, v); err != nil {
		ld.err = fmt.Errorf("llama: tensor %s: %w", name, err)
		return nil
	}
	return v
}
