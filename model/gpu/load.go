package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"oengine/ggml"
	"oengine/kernels/cuda"
	"oengine/model/gguf"
	"oengine/model/llama"
)

// Weights are read straight from the GGUF file's tensor data (mapped or
// copied by package gguf) and uploaded as they are: nothing goes through
// the CPU loader, which may rewrite Q4_0, Q5_0, Q5_1, Q8_0 and K-quant blocks in place for
// its own decode layouts.

// Options configure Load.
type Options struct {
	// MaxTokens is the number of tokens one device step holds (activation
	// buffers); larger batches run as several steps. Default 512.
	MaxTokens int
	// Context bounds the positions of a sequence (page-table width);
	// 0 means the model's training context, at most DefaultContext when
	// the file states none.
	Context int
	// ExactMatMul keeps every matmul on the float32 GEMV kernels (no
	// reduced-precision GEMM path for large batches).
	ExactMatMul bool
	// NoGraphs runs every step's kernels one launch at a time; by default
	// decode steps replay CUDA graphs (Decoder.UseGraphs).
	NoGraphs bool
}

// ErrNoKernel is matched (errors.Is) by a *NoKernelError: a weight matrix
// whose type has no CUDA kernel (cuda.Supports).
var ErrNoKernel = errors.New("no CUDA kernel")

// NoKernelError names the first weight matrix of a file whose type the
// CUDA kernels cannot run, or (Arch) an architecture whose blocks they do
// not compute. Its message is the reason --device auto gives for using
// the CPU; it also matches llama.ErrUnsupported.
type NoKernelError struct {
	Tensor  string
	Type    ggml.Type
	Arch    string
	Feature string // a part of the model the kernels do not compute (e.g. "YaRN rope scaling")
}

func (e *NoKernelError) Error() string {
	switch {
	case e.Arch != "":
		return fmt.Sprintf("no CUDA kernels for the %s architecture", e.Arch)
	case e.Feature != "":
		return fmt.Sprintf("no CUDA kernels for %s", e.Feature)
	}
	return fmt.Sprintf("no CUDA kernel for %s (tensor %s)", e.Type, e.Tensor)
}

// Is makes a NoKernelError match ErrNoKernel and llama.ErrUnsupported.
func (e *NoKernelError) Is(target error) bool {
	return target == ErrNoKernel || target == llama.ErrUnsupported
}

// KernelsFor returns nil when the CUDA kernels can run every weight matrix
// of f, else the *NoKernelError naming the first that they cannot. Other
// problems of the file are left to Load.
func KernelsFor(f *gguf.File) error {
	var nk *NoKernelError
	if _, _, _, err := FromGGUF(f); errors.As(err, &nk) {
		return nk
	}
	return nil
}

// DefaultContext is the context used when the GGUF file states none.
const DefaultContext = 4096

// FromGGUF reads the decoder shape and host views of the weights of a
// llama-family GGUF file. The matrices alias the file's data: keep f open
// until they are uploaded.
func FromGGUF(f *gguf.File) (DecoderConfig, HostWeights, llama.Config, error) {
	c, err := llama.ConfigFromGGUF(f)
	if err != nil {
		return DecoderConfig{}, HostWeights{}, c, err
	}
	// Post-norms, GELU, sliding windows, experts, fused projections, sinks,
	// encoders, classification heads, LongRoPE and YaRN: CPU only.
	switch {
	case c.Gemma || c.SWA > 0 || c.Experts > 0 || c.FusedUp || c.AttnSinks || c.OutBias || c.Encoder:
		return DecoderConfig{}, HostWeights{}, c, &NoKernelError{Arch: c.Arch}
	case c.RankOutputs > 0:
		return DecoderConfig{}, HostWeights{}, c, &NoKernelError{Feature: "a reranker's classification head"}
	case c.Yarn:
		return DecoderConfig{}, HostWeights{}, c, &NoKernelError{Feature: "YaRN rope scaling"}
	case c.AttnTempScale != 0:
		return DecoderConfig{}, HostWeights{}, c, &NoKernelError{Feature: "attention temperature scaling"}
	case c.RopeFactors || c.RopeAttnFactor != 0 && c.RopeAttnFactor != 1:
		return DecoderConfig{}, HostWeights{}, c, &NoKernelError{Feature: "LongRoPE rope scaling"}
	}
	cfg := DecoderConfig{Dim: c.Dim, Layers: c.Layers, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		FFN: c.FFN, Vocab: c.Vocab, RopeDims: c.RopeDims, RopeBase: c.RopeBase, RopeFreqScale: c.RopeFreqScale,
		RopeNeoX: c.RopeNeoX, NormEps: c.NormEps, Context: c.CtxLen, Pooling: c.Pooling}
	if cfg.Context <= 0 {
		cfg.Context = DefaultContext
	}
	r := reader{f: f}
	w := HostWeights{Embed: r.mat("token_embd.weight"), OutNorm: r.f32s("output_norm.weight", false)}
	w.Output = w.Embed
	if !c.TiedOut {
		w.Output = r.mat("output.weight")
	}
	if c.RopeFreqs {
		w.RopeFreqs = r.f32s("rope_freqs.weight", false)
	}
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		l := HostLayer{
			AttnNorm: r.f32s(p+"attn_norm.weight", false), FFNNorm: r.f32s(p+"ffn_norm.weight", false),
			Q: r.mat(p + "attn_q.weight"), K: r.mat(p + "attn_k.weight"), V: r.mat(p + "attn_v.weight"),
			O: r.mat(p + "attn_output.weight"), Gate: r.mat(p + "ffn_gate.weight"),
			Up: r.mat(p + "ffn_up.weight"), Down: r.mat(p + "ffn_down.weight"),
		}
		if c.QKVBias {
			l.QBias, l.KBias, l.VBias = r.f32s(p+"attn_q.bias", false), r.f32s(p+"attn_k.bias", false), r.f32s(p+"attn_v.bias", false)
		}
		if c.QKNorm {
			l.QNorm, l.KNorm = r.f32s(p+"attn_q_norm.weight", false), r.f32s(p+"attn_k_norm.weight", false)
		}
		w.Layers = append(w.Layers, l)
	}
	if r.err != nil {
		return DecoderConfig{}, HostWeights{}, c, r.err
	}
	return cfg, w, c, nil
}

// reader collects the first error of a sequence of tensor reads.
type reader struct {
	f   *gguf.File
	err error
}

func (r *reader) mat(name string) HostMatrix {
	ti, ok := r.f.Tensor(name)
	switch {
	case r.err != nil:
		return HostMatrix{}
	case !ok:
		r.err = fmt.Errorf("gpu: missing tensor %s", name)
		return HostMatrix{}
	case len(ti.Dims) != 2:
		r.err = fmt.Errorf("gpu: tensor %s has %d dimensions, want 2", name, len(ti.Dims))
		return HostMatrix{}
	case !cuda.Supports(ti.Type):
		r.err = &NoKernelError{Tensor: name, Type: ti.Type}
		return HostMatrix{}
	}
	return HostMatrix{Type: ti.Type, Cols: int(ti.Dims[0]), Rows: int(ti.Rows()), Data: ti.Data}
}

func (r *reader) f32s(name string, optional bool) []float32 {
	ti, ok := r.f.Tensor(name)
	switch {
	case r.err != nil:
		return nil
	case !ok && optional:
		return nil
	case !ok:
		r.err = fmt.Errorf("gpu: missing tensor %s", name)
		return nil
	case ti.Type != ggml.TypeF32:
		r.err = fmt.Errorf("gpu: tensor %s is %s, want F32", name, ti.Type)
		return nil
	}
	v := make([]float32, len(ti.Data)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(ti.Data[4*i:]))
	}
	return v
}

// Load uploads a llama-family model from f to the device. f may be closed
// once Load returns.
func Load(dev *cuda.Device, f *gguf.File, o Options) (*Decoder, error) {
	cfg, w, _, err := FromGGUF(f)
	if err != nil {
		return nil, err
	}
	if o.Context > 0 {
		cfg.Context = o.Context
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 512
	}
	m, err := NewDecoder(dev, cfg, w, o.MaxTokens)
	if err != nil {
		return nil, err
	}
	m.ExactMatMul, m.UseGraphs = o.ExactMatMul, !o.NoGraphs
	return m, nil
}
