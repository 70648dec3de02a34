// Package synth builds GGUF models with seeded random weights and real shapes:
// the built-in default model, test models and benchmark models (oengine synth).
package synth

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/model/gguf"
	"oengine/model/tokenizer"
)

// Dims are the shapes of a llama-family transformer.
type Dims struct {
	Dim, Layers, Heads, KVHeads, FFN, Vocab, CtxLen int
	RopeBase                                        float32
	// HeadDim is the width of one attention head (attention.key_length);
	// 0: Dim/Heads.
	HeadDim int
	// SlidingWindow is gemma3's attention.sliding_window (every sixth
	// layer global; 0: 512), gemma2's (every other layer; 0: 4096) or
	// gpt-oss's (every other layer; 0: 128). Other architectures have none.
	SlidingWindow int
	// AttnSoftcap, FinalSoftcap: gemma2's soft-capping of attention and
	// output logits; 0: Gemma 2's 50 and 30.
	AttnSoftcap, FinalSoftcap float32
	// Experts, ExpertsUsed, ExpertFFN: the mixture of experts of qwen3moe
	// (each of ExpertFFN width, ExpertsUsed a token; 0: 2 of 8, FFN wide)
	// or of a llama model (Mixtral's kind: FFN wide; 0: none).
	Experts, ExpertsUsed, ExpertFFN int
	// RopeOrigCtx (Options.LongRope) writes LongRoPE: rope_factors_short
	// (about 1) and rope_factors_long (about 4) tensors, this original
	// context length, and the attention factor Phi-3's converter derives
	// from it (√(1 + ln(CtxLen/RopeOrigCtx)/ln(RopeOrigCtx)) when CtxLen
	// is longer). 0: none.
	RopeOrigCtx int
	// RopeDims is rope.dimension_count, the rotated values of each head
	// (Phi-4-mini rotates 96 of 128); 0: the whole head.
	RopeDims int
	// Tied leaves out output.weight: the output projection is the token
	// embedding.
	Tied bool
}

// Presets maps a preset name to its shapes.
var Presets = map[string]Dims{
	// tiny: the built-in default and test model; a byte-level vocabulary.
	"tiny": {Dim: 128, Layers: 2, Heads: 4, KVHeads: 2, FFN: 384, Vocab: 512, CtxLen: 2048, RopeBase: 10000},
	// tinyllama-1.1b: the shapes of TinyLlama 1.1B.
	"tinyllama-1.1b": {Dim: 2048, Layers: 22, Heads: 32, KVHeads: 4, FFN: 5632, Vocab: 32000, CtxLen: 2048, RopeBase: 10000},
	// llama3-8b: the shapes of Llama 3 8B.
	"llama3-8b": {Dim: 4096, Layers: 32, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256, CtxLen: 8192, RopeBase: 500000},
	// qwen3-30b-a3b: the shapes of Qwen3 30B-A3B (with --arch qwen3moe).
	"qwen3-30b-a3b": {Dim: 2048, Layers: 48, Heads: 32, KVHeads: 4, HeadDim: 128, FFN: 6144, Vocab: 151936, CtxLen: 40960, RopeBase: 1000000, Experts: 128, ExpertsUsed: 8, ExpertFFN: 768},
	// gemma2-2b: the shapes of Gemma 2 2B (with --arch gemma2).
	"gemma2-2b": {Dim: 2304, Layers: 26, Heads: 8, KVHeads: 4, HeadDim: 256, FFN: 9216, Vocab: 256000, CtxLen: 8192, RopeBase: 10000, SlidingWindow: 4096},
	// qwen3-0.6b: the shapes of Qwen3 0.6B and Qwen3-Embedding-0.6B
	// (with --arch qwen3).
	"qwen3-0.6b": {Dim: 1024, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, FFN: 3072, Vocab: 151936, CtxLen: 32768, RopeBase: 1000000},
	// phi3-mini: the shapes of Phi-3-mini-4k (with --arch phi3).
	"phi3-mini": {Dim: 3072, Layers: 32, Heads: 32, KVHeads: 32, FFN: 8192, Vocab: 32064, CtxLen: 4096, RopeBase: 10000},
	// gpt-oss-20b: the shapes of gpt-oss 20B (with --arch gpt-oss; its
	// YaRN is --yarn 32,4096).
	"gpt-oss-20b": {Dim: 2880, Layers: 24, Heads: 64, KVHeads: 8, HeadDim: 64, FFN: 2880, Vocab: 201088, CtxLen: 131072, RopeBase: 150000, Experts: 32, ExpertsUsed: 4, ExpertFFN: 2880, SlidingWindow: 128},
	// bge-small-en: the shapes of BAAI's bge-small-en-v1.5 (with --arch
	// bert; the real model's WordPiece vocabulary: --vocab).
	"bge-small-en": {Dim: 384, Layers: 12, Heads: 12, KVHeads: 12, FFN: 1536, Vocab: 30522, CtxLen: 512, RopeBase: 10000},
	// nomic-embed-text: the shapes of nomic-embed-text-v1.5 (with --arch
	// nomic-bert).
	"nomic-embed-text": {Dim: 768, Layers: 12, Heads: 12, KVHeads: 12, FFN: 3072, Vocab: 30522, CtxLen: 2048, RopeBase: 1000},
	// gemma3-1b: the shapes of Gemma 3 1B (with --arch gemma3).
	"gemma3-1b": {Dim: 1152, Layers: 26, Heads: 4, KVHeads: 1, HeadDim: 256, FFN: 6912, Vocab: 262144, CtxLen: 32768, RopeBase: 1000000, SlidingWindow: 512},
}

// PresetNames lists the presets in a stable order.
func PresetNames() []string {
	names := make([]string, 0, len(Presets))
	for n := range Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Options selects what Build writes.
type Options struct {
	Arch string // "llama", "qwen2", "qwen3", "gemma2", "gemma3", "qwen3moe", "phi3", "mistral3", "gpt-oss", "bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "modern-bert" or "gemma-embedding"
	// Type is the weight type of the 2-D matrices (norms stay F32; the zero
	// value is F32). MXFP4, as llama-quantize's MXFP4_MOE writes it, is
	// for the experts of gpt-oss, whose other matrices are then Q8_0.
	Preset string // a key of Presets, or "" when Dims is set
	Dims   Dims   // used when Preset is ""
	Type   ggml.Type
	Seed   uint64
	CtxLen int // overrides the preset's context length when > 0
	// Vocab, when set, supplies the tokenizer (its tokenizer.* metadata is
	// copied); the model's vocabulary size becomes its token count.
	Vocab *gguf.File
	Name  string // general.name; default "synthetic-<preset>"
	// YarnFactor > 0 writes YaRN rope scaling (rope.scaling.type yarn,
	// this factor, YarnOrigCtx as original_context_length), as Qwen's
	// long-context files have it.
	YarnFactor  float32
	YarnOrigCtx int
	// YarnLogMul, YarnBetaFast, YarnBetaSlow, when > 0, are written as
	// rope.scaling.yarn_log_multiplier / yarn_beta_fast / yarn_beta_slow
	// (mistral3 reads them).
	YarnLogMul, YarnBetaFast, YarnBetaSlow float32
	// AttnTempScale, when > 0, is written as attention.temperature_scale
	// (mistral3's query temperature).
	AttnTempScale float32
	// LongRope, for phi3, is LongRoPE's original context length
	// (Dims.RopeOrigCtx); 0: no LongRoPE.
	LongRope int
	// Pooling, when set ("mean", "cls" or "last"), is written as
	// <arch>.pooling_type, as embedding models' files say it.
	Pooling string
	// Rerank adds a reranker's classification head (rankHead) and writes
	// pooling_type rank: bert and nomic-bert get cls.weight and .bias
	// (dense then tanh) and cls.output.weight and .bias (one relevance
	// logit), modern-bert cls.weight, cls.norm.weight and cls.output.weight
	// and .bias, qwen3 Qwen3-Reranker's: cls.output.weight with two rows,
	// classifier.output_labels "yes" and "no", and its prompt as
	// tokenizer.chat_template.rerank (with the synthetic vocabulary, the
	// chat tokens it needs are added: RerankChatTokens).
	Rerank bool
	// TokenTypes (bert, nomic-bert) is the rows of token_types (0: 2,
	// BERT's two segments).
	TokenTypes int
	// Progress, when set, is called (from one goroutine at a time) after
	// each tensor is generated, with the bytes of tensor data generated so
	// far and in all.
	Progress func(done, total int64)
}

// poolingTypes are llama.cpp's numbers of the pooling types.
var poolingTypes = map[string]uint32{"mean": 1, "cls": 2, "last": 3}

// ErrOptions reports unusable options.
var ErrOptions = errors.New("synth: invalid options")

// Resolve returns the dims the options describe.
func (o Options) Resolve() (Dims, error) {
	d := o.Dims
	if o.Preset != "" {
		p, ok := Presets[o.Preset]
		if !ok {
			return Dims{}, fmt.Errorf("%w: unknown preset %q (have %s)", ErrOptions, o.Preset, strings.Join(PresetNames(), ", "))
		}
		d = p
	}
	if o.CtxLen > 0 {
		d.CtxLen = o.CtxLen
	}
	if o.LongRope != 0 {
		if o.Arch != "phi3" || o.LongRope < 0 || o.LongRope > 1<<24 {
			return Dims{}, fmt.Errorf("%w: LongRoPE (original context %d) is for phi3", ErrOptions, o.LongRope)
		}
		d.RopeOrigCtx = o.LongRope
	}
	if o.YarnFactor < 0 || o.YarnFactor > 0 && (o.YarnOrigCtx <= 0 || o.Arch == "phi3" || o.Arch == "gemma2" || o.Arch == "gemma3") {
		return Dims{}, fmt.Errorf("%w: YaRN needs a positive factor and original context, on llama, qwen2, qwen3 or qwen3moe", ErrOptions)
	}
	if o.TokenTypes != 0 && (!encoder(o.Arch) || o.Arch == "modern-bert") || o.TokenTypes < 0 || o.TokenTypes > 16 {
		return Dims{}, fmt.Errorf("%w: token types (0-16) are for bert and nomic-bert", ErrOptions)
	}
	if o.Rerank && (!encoder(o.Arch) && o.Arch != "qwen3" || o.Pooling != "") {
		return Dims{}, fmt.Errorf("%w: a reranker head is for bert, nomic-bert, modern-bert and qwen3, without another pooling", ErrOptions)
	}
	if _, ok := poolingTypes[o.Pooling]; o.Pooling != "" && !ok {
		return Dims{}, fmt.Errorf("%w: pooling %q (want mean, cls or last)", ErrOptions, o.Pooling)
	}
	if d.RopeBase == 0 {
		d.RopeBase = 10000
		if o.Arch == "gemma3" || o.Arch == "gemma-embedding" {
			d.RopeBase = 1000000 // Gemma 3's global layers (the local ones: 10000)
		}
	}
	if d.Dim <= 0 || d.Layers <= 0 || d.Heads <= 0 || d.KVHeads <= 0 || d.FFN <= 0 || d.CtxLen <= 0 {
		return Dims{}, fmt.Errorf("%w: dims must be positive: %+v", ErrOptions, d)
	}
	if d.HeadDim == 0 && d.Dim%d.Heads != 0 || d.Heads%d.KVHeads != 0 {
		return Dims{}, fmt.Errorf("%w: dim %d, heads %d, kv heads %d do not divide", ErrOptions, d.Dim, d.Heads, d.KVHeads)
	}
	if d.HeadDim == 0 {
		d.HeadDim = d.Dim / d.Heads
	}
	if d.HeadDim < 0 || d.HeadDim%2 != 0 || d.SlidingWindow < 0 {
		return Dims{}, fmt.Errorf("%w: head dim %d (even) or sliding window %d", ErrOptions, d.HeadDim, d.SlidingWindow)
	}
	if d.RopeDims < 0 || d.RopeDims%2 != 0 || d.RopeDims > d.HeadDim {
		return Dims{}, fmt.Errorf("%w: rope dims %d (even, at most the head's %d)", ErrOptions, d.RopeDims, d.HeadDim)
	}
	if o.Arch == "llama" && d.Experts > 0 && d.ExpertFFN != 0 && d.ExpertFFN != d.FFN {
		return Dims{}, fmt.Errorf("%w: a llama model's experts are FFN (%d) wide, not %d", ErrOptions, d.FFN, d.ExpertFFN)
	}
	if o.Type == ggml.TypeMXFP4 && o.Arch != "gpt-oss" {
		return Dims{}, fmt.Errorf("%w: MXFP4 is for gpt-oss's experts", ErrOptions)
	}
	if o.Arch == "qwen3moe" || o.Arch == "gpt-oss" || o.Arch == "nomic-bert-moe" || o.Arch == "llama" && d.Experts > 0 {
		if d.Experts == 0 {
			d.Experts, d.ExpertsUsed = 8, 2
		}
		if d.ExpertFFN == 0 {
			d.ExpertFFN = d.FFN
		}
		if d.ExpertsUsed <= 0 || d.ExpertsUsed > d.Experts || d.ExpertFFN <= 0 {
			return Dims{}, fmt.Errorf("%w: %d experts, %d used, %d wide", ErrOptions, d.Experts, d.ExpertsUsed, d.ExpertFFN)
		}
	}
	return d, nil
}

// Build writes the model as GGUF bytes.
func Build(o Options) ([]byte, error) {
	w, err := NewWriter(o)
	if err != nil {
		return nil, err
	}
	return w.Bytes()
}

// WriteFile writes the model to path.
func WriteFile(o Options, path string) error {
	w, err := NewWriter(o)
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}

// NewWriter fills a gguf.Writer with the model's metadata and tensors.
func NewWriter(o Options) (*gguf.Writer, error) {
	if o.Arch == "" {
		o.Arch = "llama"
	}
	switch o.Arch {
	case "llama", "qwen2", "qwen3", "gemma2", "gemma3", "qwen3moe", "phi3", "mistral3", "gpt-oss", "bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "modern-bert", "gemma-embedding":
	default:
		return nil, fmt.Errorf("%w: unknown arch %q (llama, qwen2, qwen3, gemma2, gemma3, qwen3moe, phi3, mistral3, gpt-oss, bert, nomic-bert, nomic-bert-moe, jina-bert-v2, modern-bert, gemma-embedding)", ErrOptions, o.Arch)
	}
	if !cpu.CanQuantize(o.Type) {
		return nil, fmt.Errorf("%w: cannot write weights of type %s", ErrOptions, o.Type)
	}
	d, err := o.Resolve()
	if err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
	vocabSize, err := writeVocab(w, o, d)
	if err != nil {
		return nil, err
	}
	d.Vocab = vocabSize
	name := o.Name
	if name == "" {
		p := o.Preset
		if p == "" {
			p = "custom"
		}
		name = "synthetic-" + p
	}
	a := o.Arch
	headDim := d.HeadDim
	w.SetString("general.architecture", a)
	w.SetString("general.name", name)
	w.SetUint32("general.file_type", fileType(o.Type))
	w.SetUint32("general.quantization_version", 2)
	w.SetUint32(a+".context_length", uint32(d.CtxLen))
	w.SetUint32(a+".embedding_length", uint32(d.Dim))
	w.SetUint32(a+".block_count", uint32(d.Layers))
	w.SetUint32(a+".feed_forward_length", uint32(d.FFN))
	w.SetUint32(a+".attention.head_count", uint32(d.Heads))
	w.SetUint32(a+".attention.head_count_kv", uint32(d.KVHeads))
	w.SetUint32(a+".attention.key_length", uint32(headDim))
	w.SetUint32(a+".attention.value_length", uint32(headDim))
	w.SetFloat32(a+".rope.freq_base", d.RopeBase)
	eps := float32(1e-5)
	if a == "gemma2" || a == "gemma3" || a == "gemma-embedding" {
		eps = 1e-6 // Gemma's
	}
	if encoder(a) {
		// BERT's LayerNorm epsilon; a non-causal attention.
		w.SetFloat32(a+".attention.layer_norm_epsilon", 1e-12)
		w.SetBool(a+".attention.causal", false)
	} else {
		w.SetFloat32(a+".attention.layer_norm_rms_epsilon", eps)
	}
	ropeDims := headDim
	if d.RopeDims > 0 {
		ropeDims = d.RopeDims
	}
	w.SetUint32(a+".rope.dimension_count", uint32(ropeDims))
	w.SetUint32(a+".vocab_size", uint32(d.Vocab))
	if d.Experts > 0 {
		w.SetUint32(a+".expert_count", uint32(d.Experts))
		w.SetUint32(a+".expert_used_count", uint32(d.ExpertsUsed))
		if a == "nomic-bert-moe" {
			w.SetUint32(a+".moe_every_n_layers", 2) // nomic-embed-text-v2-moe's: the odd layers
		}
		if a == "qwen3moe" || a == "gpt-oss" {
			w.SetUint32(a+".expert_feed_forward_length", uint32(d.ExpertFFN))
		}
	}
	if o.Pooling != "" {
		w.SetUint32(a+".pooling_type", poolingTypes[o.Pooling]) // checked by Resolve
	}
	if o.Rerank {
		w.SetUint32(a+".pooling_type", 4) // llama.cpp's rank
		if a == "qwen3" {
			w.SetStrings(a+".classifier.output_labels", []string{"yes", "no"})
			w.SetString("tokenizer.chat_template.rerank", Qwen3RerankTemplate)
		}
	}
	if encoder(a) {
		types := o.TokenTypes
		if types == 0 {
			types = 2
		}
		w.SetUint32("tokenizer.ggml.token_type_count", uint32(types)) // llama.cpp sizes token_types by it
	}
	if a == "gemma2" {
		// Gemma 2's window on every other layer and its soft-capping
		// (the pattern is llama.cpp's default, not a key).
		win, ac, fc := d.SlidingWindow, d.AttnSoftcap, d.FinalSoftcap
		if win == 0 {
			win = 4096
		}
		if ac == 0 {
			ac = 50
		}
		if fc == 0 {
			fc = 30
		}
		w.SetUint32(a+".attention.sliding_window", uint32(win))
		w.SetFloat32(a+".attn_logit_softcapping", ac)
		w.SetFloat32(a+".final_logit_softcapping", fc)
	}
	// window writes a sliding window (d.SlidingWindow, else def) and,
	// when non-zero, its pattern and the local layers' rope base.
	window := func(def, pattern uint32, baseSWA float32) {
		win := uint32(d.SlidingWindow)
		if win == 0 {
			win = def
		}
		w.SetUint32(a+".attention.sliding_window", win)
		if pattern > 0 {
			w.SetUint32(a+".attention.sliding_window_pattern", pattern)
		}
		if baseSWA > 0 {
			w.SetFloat32(a+".rope.freq_base_swa", baseSWA)
		}
	}
	switch a {
	case "gpt-oss":
		window(128, 0, 0)
	case "modern-bert":
		// ModernBERT's symmetric window on two layers of three (layer 0
		// global), the local layers' rope base written out.
		window(128, 3, 10000)
	}
	if o.YarnFactor > 0 {
		w.SetString(a+".rope.scaling.type", "yarn")
		w.SetFloat32(a+".rope.scaling.factor", o.YarnFactor)
		w.SetUint32(a+".rope.scaling.original_context_length", uint32(o.YarnOrigCtx))
		for _, k := range []struct {
			key string
			v   float32
		}{{"yarn_log_multiplier", o.YarnLogMul}, {"yarn_beta_fast", o.YarnBetaFast}, {"yarn_beta_slow", o.YarnBetaSlow}} {
			if k.v > 0 {
				w.SetFloat32(a+".rope.scaling."+k.key, k.v)
			}
		}
	}
	if o.AttnTempScale > 0 {
		w.SetFloat32(a+".attention.temperature_scale", o.AttnTempScale)
	}
	if d.RopeOrigCtx > 0 {
		w.SetUint32(a+".rope.scaling.original_context_length", uint32(d.RopeOrigCtx))
		f := 1.0
		if d.CtxLen > d.RopeOrigCtx {
			f = math.Sqrt(1 + math.Log(float64(d.CtxLen)/float64(d.RopeOrigCtx))/math.Log(float64(d.RopeOrigCtx)))
		}
		w.SetFloat32(a+".rope.scaling.attn_factor", float32(f))
	}
	if a == "gemma3" {
		// Gemma 3's sliding window on five layers of six, and the local
		// layers' rope base (llama.cpp's defaults, written out).
		window(512, 6, 10000)
	}
	if a == "gemma-embedding" {
		// EmbeddingGemma: Gemma 3's windows (symmetric: half either side),
		// no causal mask, mean pooling, and the Dense layers' widths.
		window(512, 6, 10000)
		w.SetBool(a+".attention.causal", false)
		if o.Pooling == "" {
			w.SetUint32(a+".pooling_type", poolingTypes["mean"])
		}
		inner := uint32(4 * d.Dim)
		w.SetUint32(a+".dense_2_feat_in", uint32(d.Dim))
		w.SetUint32(a+".dense_2_feat_out", inner)
		w.SetUint32(a+".dense_3_feat_in", inner)
		w.SetUint32(a+".dense_3_feat_out", uint32(d.Dim))
	}

	specs := tensorSpecs(o.Arch, d, o.Type)
	if encoder(a) {
		specs = encoderExtras(specs, o)
	}
	if o.Rerank {
		specs = rankHead(specs, a, d)
	}
	datas := make([][]byte, len(specs))
	errs := make([]error, len(specs))
	// Tensors are generated in parallel; each from its own seed, so the
	// result does not depend on scheduling.
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.NumCPU())
	report := progressReporter(specs, o.Progress)
	for i := range specs {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			datas[i], errs[i] = specs[i].generate(o.Seed)
			report(int64(len(datas[i])))
		}(i)
	}
	wg.Wait()
	for i, s := range specs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if err := w.AddTensor(s.name, s.typ, s.dims, datas[i]); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// progressReporter returns the function each generating goroutine calls
// with its tensor's size; it forwards running totals to fn (nil: nothing).
func progressReporter(specs []tensorSpec, fn func(done, total int64)) func(n int64) {
	if fn == nil {
		return func(int64) {}
	}
	var total int64
	for _, s := range specs {
		n := int64(1)
		for _, d := range s.dims[1:] {
			n *= int64(d)
		}
		if rb, err := s.typ.RowBytes(int(s.dims[0])); err == nil {
			total += int64(rb) * n
		}
	}
	var mu sync.Mutex // serialises fn and protects done
	var done int64
	return func(n int64) {
		mu.Lock()
		defer mu.Unlock()
		done += n
		fn(done, total)
	}
}

// fileType is general.file_type (llama_ftype) for a weight type.
func fileType(t ggml.Type) uint32 {
	switch t {
	case ggml.TypeF32:
		return 0
	case ggml.TypeF16:
		return 1
	case ggml.TypeQ4_0:
		return 2
	case ggml.TypeQ4_1:
		return 3
	case ggml.TypeQ8_0:
		return 7
	case ggml.TypeQ5_0:
		return 8
	case ggml.TypeQ5_1:
		return 9
	case ggml.TypeQ2_K:
		return 10
	case ggml.TypeQ3_K:
		return 12
	case ggml.TypeQ4_K:
		return 15
	case ggml.TypeQ5_K:
		return 17
	case ggml.TypeQ6_K:
		return 18
	case ggml.TypeIQ4_NL:
		return 25
	case ggml.TypeIQ4_XS:
		return 30
	case ggml.TypeBF16:
		return 32
	case ggml.TypeMXFP4:
		return 38 // MXFP4_MOE
	}
	return 0
}

type tensorSpec struct {
	name  string
	typ   ggml.Type
	dims  []uint64 // ggml order: dims[0] = columns
	std   float32  // weights ~ N(0, std); ignored when ones
	ones  bool     // norm weights: 1 + small noise
	noise float32
	mul   float32 // when > 0, ones values are multiplied by it (LongRoPE's long factors)
}

// encoder reports the BERT-style architectures (encoderSpecs).
func encoder(arch string) bool {
	return arch == "bert" || arch == "nomic-bert" || arch == "nomic-bert-moe" || arch == "jina-bert-v2" || arch == "modern-bert"
}

func tensorSpecs(arch string, d Dims, t ggml.Type) []tensorSpec {
	if encoder(arch) {
		return encoderSpecs(arch, d, t)
	}
	headDim := d.HeadDim
	qDim, kvDim := d.Heads*headDim, d.KVHeads*headDim
	inv := func(n int) float32 { return float32(1 / math.Sqrt(float64(n))) }
	mat := func(name string, cols, rows int, std float32) tensorSpec {
		tt := t
		if tt == ggml.TypeMXFP4 { // for the experts (below); the other matrices Q8_0
			tt = ggml.TypeQ8_0
		}
		if tt == ggml.TypeIQ4_XS && cols%tt.BlockElems() != 0 {
			tt = ggml.TypeIQ4_NL // as llama-quantize falls back for rows not of whole super-blocks
		}
		if cols%tt.BlockElems() != 0 {
			tt = ggml.TypeF16
		}
		return tensorSpec{name: name, typ: tt, dims: []uint64{uint64(cols), uint64(rows)}, std: std}
	}
	vec := func(name string, n int, ones bool, std float32) tensorSpec {
		return tensorSpec{name: name, typ: ggml.TypeF32, dims: []uint64{uint64(n)}, ones: ones, noise: 0.1, std: std}
	}
	specs := []tensorSpec{
		mat("token_embd.weight", d.Dim, d.Vocab, 1),
		vec("output_norm.weight", d.Dim, true, 0),
		// Logit spread about 4 nats: usable, non-uniform next-token distributions.
		mat("output.weight", d.Dim, d.Vocab, 4*inv(d.Dim)),
	}
	if arch == "gemma2" || arch == "gemma3" || arch == "gemma-embedding" {
		// Gemma scales the embedding by √Dim on the way in: values of
		// about 1, as the blocks' normed outputs.
		specs[0].std = inv(d.Dim)
	}
	if arch == "gemma2" || arch == "gemma-embedding" || d.Tied {
		specs = specs[:2] // Gemma 2 always ties the output to the embedding; EmbeddingGemma has none
	}
	if arch == "gemma-embedding" { // the Dense layers after pooling
		specs = append(specs, mat("dense_2.weight", d.Dim, 4*d.Dim, inv(d.Dim)), mat("dense_3.weight", 4*d.Dim, d.Dim, inv(4*d.Dim)))
	}
	if d.Tied && arch != "gemma2" && arch != "gemma3" {
		specs[0].std = 4 * inv(d.Dim) // the output's spread (the first norm rescales the inputs)
	}
	if d.RopeOrigCtx > 0 {
		n := headDim / 2
		if d.RopeDims > 0 {
			n = d.RopeDims / 2
		}
		short := vec("rope_factors_short.weight", n, true, 0)
		long := vec("rope_factors_long.weight", n, true, 0)
		long.mul = 4
		specs = append(specs, short, long)
	}
	// experts: the matrices of d.Experts experts as one 3-D tensor
	// (cols, rows, experts), as GGUF stores ffn_*_exps.
	experts := func(name string, cols, rows int, std float32) tensorSpec {
		s := mat(name, cols, rows, std)
		s.dims = append(s.dims, uint64(d.Experts))
		if t == ggml.TypeMXFP4 && cols%t.BlockElems() == 0 {
			s.typ = t
		}
		return s
	}
	for l := 0; l < d.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		specs = append(specs, vec(p+"attn_norm.weight", d.Dim, true, 0))
		if arch == "phi3" { // Q, K and V rows in one matrix
			specs = append(specs, mat(p+"attn_qkv.weight", d.Dim, qDim+2*kvDim, inv(d.Dim)))
		} else {
			specs = append(specs,
				mat(p+"attn_q.weight", d.Dim, qDim, inv(d.Dim)),
				mat(p+"attn_k.weight", d.Dim, kvDim, inv(d.Dim)),
				mat(p+"attn_v.weight", d.Dim, kvDim, inv(d.Dim)))
		}
		ffnNorm := "ffn_norm.weight"
		if arch == "gpt-oss" {
			ffnNorm = "post_attention_norm.weight"
		}
		specs = append(specs,
			mat(p+"attn_output.weight", qDim, d.Dim, 0.5*inv(qDim)),
			vec(p+ffnNorm, d.Dim, true, 0),
		)
		switch {
		case arch == "phi3": // the gate's rows, then up's, in one matrix
			specs = append(specs,
				mat(p+"ffn_up.weight", d.Dim, 2*d.FFN, inv(d.Dim)),
				mat(p+"ffn_down.weight", d.FFN, d.Dim, 0.5*inv(d.FFN)))
		case arch == "gpt-oss":
			// The router stays F32, the experts' gate and up are wide
			// enough that the activation's clamp at ±7 binds; biases
			// everywhere, and a sink logit per head.
			router := mat(p+"ffn_gate_inp.weight", d.Dim, d.Experts, 8*inv(d.Dim))
			router.typ = ggml.TypeF32
			bias := func(name string, n int) tensorSpec {
				s := vec(name, n, false, 0.1)
				s.dims = append(s.dims, uint64(d.Experts))
				return s
			}
			specs = append(specs, router, vec(p+"ffn_gate_inp.bias", d.Experts, false, 0.5),
				experts(p+"ffn_gate_exps.weight", d.Dim, d.ExpertFFN, 4*inv(d.Dim)),
				experts(p+"ffn_up_exps.weight", d.Dim, d.ExpertFFN, 4*inv(d.Dim)),
				experts(p+"ffn_down_exps.weight", d.ExpertFFN, d.Dim, 0.1*inv(d.ExpertFFN)),
				bias(p+"ffn_gate_exps.bias", d.ExpertFFN), bias(p+"ffn_up_exps.bias", d.ExpertFFN),
				bias(p+"ffn_down_exps.bias", d.Dim),
				vec(p+"attn_output.bias", d.Dim, false, 0.1), vec(p+"attn_sinks.weight", d.Heads, false, 2))
		case d.Experts > 0:
			// The router stays F32, as llama-quantize keeps it.
			router := mat(p+"ffn_gate_inp.weight", d.Dim, d.Experts, 8*inv(d.Dim))
			router.typ = ggml.TypeF32
			specs = append(specs, router,
				experts(p+"ffn_gate_exps.weight", d.Dim, d.ExpertFFN, inv(d.Dim)),
				experts(p+"ffn_up_exps.weight", d.Dim, d.ExpertFFN, inv(d.Dim)),
				experts(p+"ffn_down_exps.weight", d.ExpertFFN, d.Dim, inv(d.ExpertFFN)))
		default:
			specs = append(specs,
				mat(p+"ffn_gate.weight", d.Dim, d.FFN, inv(d.Dim)),
				mat(p+"ffn_up.weight", d.Dim, d.FFN, inv(d.Dim)),
				mat(p+"ffn_down.weight", d.FFN, d.Dim, 0.5*inv(d.FFN)))
		}
		switch arch {
		case "qwen2", "gpt-oss":
			specs = append(specs,
				vec(p+"attn_q.bias", qDim, false, 0.1),
				vec(p+"attn_k.bias", kvDim, false, 0.1),
				vec(p+"attn_v.bias", kvDim, false, 0.1))
		case "qwen3", "qwen3moe":
			specs = append(specs,
				vec(p+"attn_q_norm.weight", headDim, true, 0),
				vec(p+"attn_k_norm.weight", headDim, true, 0))
		case "gemma3", "gemma-embedding":
			specs = append(specs,
				vec(p+"attn_q_norm.weight", headDim, true, 0),
				vec(p+"attn_k_norm.weight", headDim, true, 0),
				vec(p+"post_attention_norm.weight", d.Dim, true, 0),
				vec(p+"post_ffw_norm.weight", d.Dim, true, 0))
		case "gemma2":
			specs = append(specs,
				vec(p+"post_attention_norm.weight", d.Dim, true, 0),
				vec(p+"post_ffw_norm.weight", d.Dim, true, 0))
		}
	}
	return specs
}

// encoderSpecs are the tensors of a BERT-style encoder as llama.cpp's
// converter names them: "bert" with learned positions, biases everywhere
// and a GELU feed-forward; "nomic-bert" with Q, K and V in one matrix, no
// biases but the norms' and a SwiGLU feed-forward (RoPE, no position
// tensor). Both have two token types and LayerNorms (weight and bias).
func encoderSpecs(arch string, d Dims, t ggml.Type) []tensorSpec {
	qDim, kvDim := d.Heads*d.HeadDim, d.KVHeads*d.HeadDim
	inv := func(n int) float32 { return float32(1 / math.Sqrt(float64(n))) }
	mat := func(name string, cols, rows int, std float32) tensorSpec {
		tt := t
		if cols%tt.BlockElems() != 0 {
			tt = ggml.TypeF16
		}
		return tensorSpec{name: name, typ: tt, dims: []uint64{uint64(cols), uint64(rows)}, std: std}
	}
	vec := func(name string, n int, ones bool, std float32) tensorSpec {
		return tensorSpec{name: name, typ: ggml.TypeF32, dims: []uint64{uint64(n)}, ones: ones, noise: 0.1, std: std}
	}
	f32 := func(name string, cols, rows int, std float32) tensorSpec {
		return tensorSpec{name: name, typ: ggml.TypeF32, dims: []uint64{uint64(cols), uint64(rows)}, std: std}
	}
	if arch == "modern-bert" {
		return modernBERTSpecs(d, mat, vec)
	}
	bert := arch == "bert" || arch == "jina-bert-v2"
	specs := []tensorSpec{
		mat("token_embd.weight", d.Dim, d.Vocab, 1),
		f32("token_types.weight", d.Dim, 2, 0.5),
		vec("token_embd_norm.weight", d.Dim, true, 0),
		vec("token_embd_norm.bias", d.Dim, false, 0.1),
	}
	if arch == "bert" {
		specs = append(specs, f32("position_embd.weight", d.Dim, d.CtxLen, 0.5))
	}
	for l := 0; l < d.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		if bert {
			specs = append(specs,
				mat(p+"attn_q.weight", d.Dim, qDim, 2*inv(d.Dim)), vec(p+"attn_q.bias", qDim, false, 0.1),
				mat(p+"attn_k.weight", d.Dim, kvDim, 2*inv(d.Dim)), vec(p+"attn_k.bias", kvDim, false, 0.1),
				mat(p+"attn_v.weight", d.Dim, kvDim, inv(d.Dim)), vec(p+"attn_v.bias", kvDim, false, 0.1),
				mat(p+"attn_output.weight", qDim, d.Dim, inv(qDim)), vec(p+"attn_output.bias", d.Dim, false, 0.1))
			if arch == "jina-bert-v2" { // GeGLU: the gate's rows, then the up projection's, no bias
				specs = append(specs, mat(p+"ffn_up.weight", d.Dim, 2*d.FFN, inv(d.Dim)))
			} else {
				specs = append(specs, mat(p+"ffn_up.weight", d.Dim, d.FFN, inv(d.Dim)), vec(p+"ffn_up.bias", d.FFN, false, 0.1))
			}
			specs = append(specs, mat(p+"ffn_down.weight", d.FFN, d.Dim, inv(d.FFN)), vec(p+"ffn_down.bias", d.Dim, false, 0.1))
		} else if arch == "nomic-bert-moe" {
			// nomic-embed-text-v2-moe: Q, K, V in one matrix with a bias;
			// the odd layers' feed-forward a mixture of GELU experts
			// without a gate, the even ones' bert's.
			specs = append(specs,
				mat(p+"attn_qkv.weight", d.Dim, qDim+2*kvDim, 2*inv(d.Dim)), vec(p+"attn_qkv.bias", qDim+2*kvDim, false, 0.1),
				mat(p+"attn_output.weight", qDim, d.Dim, inv(qDim)), vec(p+"attn_output.bias", d.Dim, false, 0.1))
			if l%2 == 1 {
				exps := func(name string, cols, rows int, std float32) tensorSpec {
					s := mat(name, cols, rows, std)
					s.dims = append(s.dims, uint64(d.Experts))
					return s
				}
				specs = append(specs, f32(p+"ffn_gate_inp.weight", d.Dim, d.Experts, 2*inv(d.Dim)),
					exps(p+"ffn_up_exps.weight", d.Dim, d.FFN, inv(d.Dim)), exps(p+"ffn_down_exps.weight", d.FFN, d.Dim, inv(d.FFN)))
			} else {
				specs = append(specs,
					mat(p+"ffn_up.weight", d.Dim, d.FFN, inv(d.Dim)), vec(p+"ffn_up.bias", d.FFN, false, 0.1),
					mat(p+"ffn_down.weight", d.FFN, d.Dim, inv(d.FFN)), vec(p+"ffn_down.bias", d.Dim, false, 0.1))
			}
		} else {
			specs = append(specs,
				mat(p+"attn_qkv.weight", d.Dim, qDim+2*kvDim, 2*inv(d.Dim)),
				mat(p+"attn_output.weight", qDim, d.Dim, inv(qDim)),
				mat(p+"ffn_gate.weight", d.Dim, d.FFN, inv(d.Dim)),
				mat(p+"ffn_up.weight", d.Dim, d.FFN, inv(d.Dim)),
				mat(p+"ffn_down.weight", d.FFN, d.Dim, inv(d.FFN)))
		}
		specs = append(specs,
			vec(p+"attn_output_norm.weight", d.Dim, true, 0), vec(p+"attn_output_norm.bias", d.Dim, false, 0.1),
			vec(p+"layer_output_norm.weight", d.Dim, true, 0), vec(p+"layer_output_norm.bias", d.Dim, false, 0.1))
	}
	return specs
}

// modernBERTSpecs are ModernBERT's tensors: norms without biases (none
// before layer 0's attention), fused QKV, fused gate and up, a final norm;
// no biases, token types nor positions.
func modernBERTSpecs(d Dims, mat func(string, int, int, float32) tensorSpec, vec func(string, int, bool, float32) tensorSpec) []tensorSpec {
	qDim, kvDim := d.Heads*d.HeadDim, d.KVHeads*d.HeadDim
	inv := func(n int) float32 { return float32(1 / math.Sqrt(float64(n))) }
	specs := []tensorSpec{
		mat("token_embd.weight", d.Dim, d.Vocab, 1),
		vec("token_embd_norm.weight", d.Dim, true, 0),
		vec("output_norm.weight", d.Dim, true, 0),
	}
	for l := 0; l < d.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		if l > 0 {
			specs = append(specs, vec(p+"attn_norm.weight", d.Dim, true, 0))
		}
		specs = append(specs,
			mat(p+"attn_qkv.weight", d.Dim, qDim+2*kvDim, 2*inv(d.Dim)),
			mat(p+"attn_output.weight", qDim, d.Dim, inv(qDim)),
			vec(p+"ffn_norm.weight", d.Dim, true, 0),
			mat(p+"ffn_up.weight", d.Dim, 2*d.FFN, inv(d.Dim)),
			mat(p+"ffn_down.weight", d.FFN, d.Dim, inv(d.FFN)))
	}
	return specs
}

// encoderExtras sizes an encoder's token_types (Options.TokenTypes).
func encoderExtras(specs []tensorSpec, o Options) []tensorSpec {
	if o.TokenTypes > 0 {
		for i := range specs {
			if specs[i].name == "token_types.weight" {
				specs[i].dims[1] = uint64(o.TokenTypes)
			}
		}
	}
	return specs
}

// rankHead adds a reranker's classification head (Options.Rerank), in
// F32 as llama.cpp's converter leaves small tensors.
func rankHead(specs []tensorSpec, arch string, d Dims) []tensorSpec {
	inv := float32(1 / math.Sqrt(float64(d.Dim)))
	f32 := func(name string, dims []uint64, std float32) tensorSpec {
		return tensorSpec{name: name, typ: ggml.TypeF32, dims: dims, std: std}
	}
	dim := uint64(d.Dim)
	switch arch {
	case "qwen3": // the output projection's rows of "yes" and "no"
		return append(specs, f32("cls.output.weight", []uint64{dim, 2}, 4*inv))
	case "jina-bert-v2": // one row, no output layer (jina-reranker-v1)
		return append(specs, f32("cls.weight", []uint64{dim, 1}, 2*inv), f32("cls.bias", []uint64{1}, 0.1))
	case "modern-bert":
		return append(specs, f32("cls.weight", []uint64{dim, dim}, 2*inv),
			tensorSpec{name: "cls.norm.weight", typ: ggml.TypeF32, dims: []uint64{dim}, ones: true, noise: 0.1},
			f32("cls.output.weight", []uint64{dim, 1}, 2*inv), f32("cls.output.bias", []uint64{1}, 0.1))
	}
	return append(specs,
		f32("cls.weight", []uint64{dim, dim}, 2*inv), f32("cls.bias", []uint64{dim}, 0.1),
		f32("cls.output.weight", []uint64{dim, 1}, 2*inv), f32("cls.output.bias", []uint64{1}, 0.1))
}

// Qwen3RerankTemplate is Qwen3-Reranker's prompt as its model card writes
// it (system line, instruction, query, document, an empty thinking block),
// with the card's default instruction, in the form llama.cpp's converter
// stores as tokenizer.chat_template.rerank.
const Qwen3RerankTemplate = "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. " +
	"Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n" +
	"<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: {document}" +
	"<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"

// RerankChatTokens are the special tokens Qwen3RerankTemplate names; a
// synthetic vocabulary for a qwen3 reranker gets them as control tokens.
var RerankChatTokens = []string{"<|im_start|>", "<|im_end|>", "<think>", "</think>"}

func (s tensorSpec) generate(seed uint64) ([]byte, error) {
	n := 1
	for _, v := range s.dims {
		n *= int(v)
	}
	r := newRNG(seed ^ hashName(s.name))
	cols := int(s.dims[0])
	rb, err := s.typ.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("synth: tensor %s: %w", s.name, err)
	}
	rows := n / cols
	out := make([]byte, rb*rows)
	// The values are drawn and encoded about a million at a time (whole
	// rows), so a tensor's float32 values never all exist at once (a
	// gpt-oss-20b expert tensor has 800 M).
	step := max(1, (1<<20)/cols)
	vals := make([]float32, min(step, rows)*cols)
	for r0 := 0; r0 < rows; r0 += step {
		nr := min(step, rows-r0)
		v := vals[:nr*cols]
		for i := range v {
			if s.ones {
				v[i] = 1 + s.noise*r.normal()
				if s.mul > 0 {
					v[i] *= s.mul
				}
			} else {
				v[i] = s.std * r.normal()
			}
		}
		if err := cpu.Quantize(s.typ, v, out[r0*rb:(r0+nr)*rb]); err != nil {
			return nil, fmt.Errorf("synth: tensor %s: %w", s.name, err)
		}
	}
	return out, nil
}

// writeVocab writes the tokenizer metadata and returns the vocabulary size.
func writeVocab(w *gguf.Writer, o Options, d Dims) (int, error) {
	if o.Vocab != nil {
		n := 0
		for _, k := range o.Vocab.Keys() {
			if !strings.HasPrefix(k, "tokenizer.") {
				continue
			}
			v, _ := o.Vocab.Value(k)
			if err := w.Set(k, v); err != nil {
				return 0, err
			}
		}
		toks, ok := o.Vocab.Strings("tokenizer.ggml.tokens")
		if !ok || len(toks) == 0 {
			return 0, fmt.Errorf("%w: --vocab file has no tokenizer.ggml.tokens", ErrOptions)
		}
		n = len(toks)
		return n, nil
	}
	v := SyntheticVocab(d.Vocab, o.Seed)
	if o.Rerank && o.Arch == "qwen3" {
		for _, t := range RerankChatTokens {
			v.Tokens = append(v.Tokens, t)
			v.Types = append(v.Types, 3) // control
		}
	}
	w.SetString("tokenizer.ggml.model", v.Model)
	w.SetString("tokenizer.ggml.pre", v.Pre)
	w.SetStrings("tokenizer.ggml.tokens", v.Tokens)
	w.SetInt32s("tokenizer.ggml.token_type", v.Types)
	w.SetStrings("tokenizer.ggml.merges", v.Merges)
	w.SetUint32("tokenizer.ggml.bos_token_id", uint32(v.BOS))
	w.SetUint32("tokenizer.ggml.eos_token_id", uint32(v.EOS))
	w.SetBool("tokenizer.ggml.add_bos_token", v.AddBOS)
	// ModernBERT's tokenizer closes a text with [SEP] (here EOS), as
	// Hugging Face's template [CLS] a [SEP]; the decoders' add nothing.
	w.SetBool("tokenizer.ggml.add_eos_token", o.Arch == "modern-bert")
	return len(v.Tokens), nil
}

// SyntheticVocab returns a byte-level BPE vocabulary of size n (at least
// the 256 byte tokens and two control tokens): the byte tokens, then
// deterministic merges of letters into word-like tokens.
func SyntheticVocab(n int, seed uint64) *tokenizer.Vocab {
	base := tokenizer.ByteLevelVocab(nil)
	v := *base
	v.Tokens = append([]string(nil), base.Tokens...)
	v.Types = append([]int32(nil), base.Types...)
	v.Merges = append([]string(nil), base.Merges...)
	have := make(map[string]bool, n)
	for _, t := range v.Tokens {
		have[t] = true
	}
	// Word pieces are built from lowercase letters and the byte-level space
	// (U+0120), one character at a time, so each merge joins two tokens that
	// already exist.
	letters := []string{"Ġ"}
	for c := 'a'; c <= 'z'; c++ {
		letters = append(letters, string(c))
	}
	pieces := append([]string(nil), letters...)
	r := newRNG(seed ^ 0x5eed)
	for tries := 0; len(v.Tokens) < n && tries < 50*n; tries++ {
		a := pieces[int(r.next()%uint64(len(pieces)))]
		b := letters[1+int(r.next()%uint64(len(letters)-1))]
		if len([]rune(a)) >= 8 {
			continue
		}
		t := a + b
		if have[t] {
			continue
		}
		have[t] = true
		v.Tokens = append(v.Tokens, t)
		v.Types = append(v.Types, 1)
		v.Merges = append(v.Merges, a+" "+b)
		pieces = append(pieces, t)
	}
	return &v
}
