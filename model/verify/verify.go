package verify

import (
	"errors"
	"fmt"
	"math"

	"oengine/ggml"
	"oengine/kernels/cuda"
	"oengine/model/gguf"
	"oengine/model/gpu"
	"oengine/model/llama"
)

// Tolerance bounds the differences to the reference.
type Tolerance struct {
	MaxAbs       float64 // max |logprob - reference logprob| over compared entries
	MeanAbs      float64 // mean of the same
	ArgmaxMargin float64 // argmax must equal the reference where its top-1/top-2 logit margin is at least this
}

// Weight classes, with the tolerances of shared/testdata/README.md.
const (
	ClassFloat     = "f32/f16"
	ClassBF16      = "bf16"
	ClassQuantized = "quantized"
)

// ToleranceFor returns the tolerance for a weight class.
func ToleranceFor(class string) Tolerance {
	switch class {
	case ClassFloat:
		return Tolerance{MaxAbs: 0.1, MeanAbs: 0.01, ArgmaxMargin: 0.1}
	case ClassBF16:
		return Tolerance{MaxAbs: 0.15, MeanAbs: 0.03, ArgmaxMargin: 0.25}
	default:
		return Tolerance{MaxAbs: 1.0, MeanAbs: 0.2, ArgmaxMargin: 0.5}
	}
}

// WeightClass classifies a model by its matrix types: quantized when any
// matrix is, else bf16 when any is, else f32/f16.
func WeightClass(f *gguf.File) string {
	class := ClassFloat
	for _, t := range f.Tensors {
		if len(t.Dims) < 2 {
			continue
		}
		switch t.Type {
		case ggml.TypeF32, ggml.TypeF16:
		case ggml.TypeBF16:
			class = ClassBF16
		default:
			return ClassQuantized
		}
	}
	return class
}

// Options tune Run. The zero value checks everything with the defaults.
type Options struct {
	Threads   int          // worker threads (<= 0: all cores)
	KV        llama.KVType // K/V store type (default F16, as the reference)
	PageSize  int          // tokens per KV page (default 16)
	Chunks    []int        // teacher-forcing chunk sizes, used in turn (default 1, 7, 16, 64, 33, 128)
	Cases     []int        // indices of the cases to run (nil: all)
	MaxTokens int          // > 0: skip cases whose teacher-forced sequence is longer
	Tolerance *Tolerance   // nil: ToleranceFor(WeightClass(model))
	// MinLogprob: reference entries below it are not compared (default -8).
	MinLogprob float64
	// GreedyTie: free-running greedy must match up to the first step whose
	// reference margin is below this (default 0.05).
	GreedyTie float64
	// SkipTokenize turns the tokenization check off.
	SkipTokenize bool
	// PerPosition records each position's max error in CaseReport.PosMaxAbs.
	PerPosition bool
	// GGML runs the free-running greedy check in llama.cpp arithmetic
	// mode (llama.Model.SetGGMLArithmetic), feeding the prompt the way
	// llama.cpp did when it wrote the reference: one Forward per ubatch of
	// at most UBatch tokens, then one token per step. Greedy decoding then
	// follows llama.cpp token for token where the mode is exact.
	GGML bool
	// GGMLForced also runs teacher forcing in GGML mode (diagnostics of
	// bit-exactness); by default it checks oengine's own kernels.
	GGMLForced bool
	// GGMLAVX512 selects, in GGML mode, the summation orders of an AVX-512
	// build of llama.cpp (llama.Model.SetGGMLAVX512): the shared reference
	// data was written by one.
	GGMLAVX512 bool
	// UBatch is llama.cpp's n_ubatch for the GGML greedy prefill (default 512).
	UBatch int
	// CUDA, when set, checks the CUDA forward pass (model/gpu) on this
	// device instead of the CPU one: K/V in F16 on the device, the
	// arithmetic the engine serves with (cuBLAS on F16 operands for large
	// chunks) unless CUDAExact; the GGML modes and KV do not apply.
	CUDA      *cuda.Device
	CUDAExact bool
}

func (o *Options) defaults() {
	if o.PageSize <= 0 {
		o.PageSize = 16
	}
	if len(o.Chunks) == 0 {
		o.Chunks = []int{1, 7, 16, 64, 33, 128}
	}
	if o.MinLogprob == 0 {
		o.MinLogprob = -8
	}
	if o.GreedyTie == 0 {
		o.GreedyTie = 0.05
	}
	if o.UBatch <= 0 {
		o.UBatch = 512
	}
}

// Run loads the model and the reference and checks every selected case.
// An error means the check could not run (files, shapes); a failed check is
// a Report whose Pass is false.
func Run(modelPath, refPath string, opts Options) (Report, error) {
	opts.defaults()
	ref, err := LoadReference(refPath)
	if err != nil {
		return Report{}, err
	}
	f, err := gguf.Open(modelPath)
	if err != nil {
		return Report{}, err
	}
	defer f.Close()
	m, err := loadModel(f, ref, opts)
	if err != nil {
		return Report{}, err
	}
	defer m.close()
	var enc encoder
	if !opts.SkipTokenize {
		if enc, err = newEncoder(f); err != nil {
			return Report{}, err
		}
	}
	return check(m, enc, ref, WeightClass(f), modelPath, opts, outputBatchDependent(f))
}

// loadModel loads the forward pass the options select.
func loadModel(f *gguf.File, ref *Reference, opts Options) (model, error) {
	if opts.CUDA == nil {
		m, err := llama.Load(f, llama.Options{Threads: opts.Threads, GGMLArithmetic: opts.GGMLForced})
		if err != nil {
			return nil, err
		}
		if opts.GGMLForced && opts.GGMLAVX512 {
			m.SetGGMLAVX512(true)
		}
		return cpuModel{m: m, kv: opts.KV}, nil
	}
	_, _, cfg, err := gpu.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	longest := 0
	for _, c := range ref.Cases {
		longest = max(longest, len(c.Tokens)+len(c.Greedy))
	}
	m, err := gpu.Load(opts.CUDA, f, gpu.Options{MaxTokens: 512, ExactMatMul: opts.CUDAExact,
		Context: max(cfg.CtxLen, longest+1)})
	if err != nil {
		return nil, err
	}
	return &gpuModel{m: m, cfg: cfg}, nil
}

// outputBatchDependent reports whether llama.cpp's arithmetic for the
// output matrix depends on how many logits rows it computes (F16: tinyBLAS
// for two rows or more; Q4_K: repacked gemm for groups of 4 rows), in which
// case the GGML greedy prefill asks for every prompt token's logits, as the
// reference run did.
func outputBatchDependent(f *gguf.File) bool {
	t, ok := f.Tensor("output.weight")
	if !ok {
		t, ok = f.Tensor("token_embd.weight")
	}
	return ok && (t.Type == ggml.TypeF16 || t.Type == ggml.TypeQ4_K)
}

// check runs the selected cases of ref on m.
func check(m model, enc encoder, ref *Reference, class, name string, opts Options, prefillAll bool) (Report, error) {
	cfg := m.config()
	ggml := m.cpu() != nil && m.cpu().GGMLArithmetic()
	if ref.NVocab != 0 && ref.NVocab != cfg.Vocab {
		return Report{}, fmt.Errorf("verify: reference has vocabulary %d, model %d", ref.NVocab, cfg.Vocab)
	}
	tol := ToleranceFor(class)
	if opts.Tolerance != nil {
		tol = *opts.Tolerance
	}
	cases := opts.Cases
	if cases == nil {
		for i := range ref.Cases {
			cases = append(cases, i)
		}
	}
	rep := Report{Model: name, Arch: cfg.Arch, Class: class, Tol: tol, KV: opts.KV, PageSize: opts.PageSize, GGMLForced: ggml, GGMLGreedy: m.cpu() != nil && (opts.GGML || ggml), Pass: true}
	if opts.CUDA != nil {
		rep.Device, rep.KV = opts.CUDA.Info().String(), llama.KVF16
	}
	r := &runner{m: m, opts: opts, tol: tol, prefillAll: prefillAll}
	for _, ci := range cases {
		if ci < 0 || ci >= len(ref.Cases) {
			return Report{}, fmt.Errorf("verify: case %d outside %d cases", ci, len(ref.Cases))
		}
		c := &ref.Cases[ci]
		if opts.MaxTokens > 0 && len(c.Tokens)+len(c.Greedy)-1 > opts.MaxTokens {
			continue
		}
		cr, err := r.runCase(ci, c, enc)
		if err != nil {
			return Report{}, err
		}
		rep.Cases = append(rep.Cases, cr)
		rep.Pass = rep.Pass && cr.Pass
	}
	if len(rep.Cases) == 0 {
		return Report{}, errors.New("verify: no case selected")
	}
	return rep, nil
}

// logSoftmaxAt returns, for a row of logits, the log-sum-exp (float64) and
// the argmax.
func logSumExp(row []float32) (lse float64, arg int) {
	mx := math.Inf(-1)
	for i, v := range row {
		if float64(v) > mx {
			mx, arg = float64(v), i
		}
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(s), arg
}
