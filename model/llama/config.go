// Package llama holds the weights and the forward pass of the llama family of
// decoder-only transformers as GGUF files describe them: architectures
// "llama" (Llama 2/3, TinyLlama, Mistral, SmolLM), "qwen2" (biases on Q, K
// and V), "qwen3" (RMSNorm on each Q and K head), "qwen3moe" (qwen3 with a
// mixture-of-experts feed-forward, Config.Experts), "gemma2" (Gemma's
// block, Config.Gemma, sliding-window attention on every other layer,
// Config.SWA, and soft-capped attention and output logits), "gemma3"
// (Gemma 3's text decoder: qwen3's head norms plus Gemma's block and
// sliding-window attention on most layers), "phi3" (Phi-3 and Phi-4:
// llama's block with its Q, K and V in one matrix and its gate and up
// projections in another, and LongRoPE frequency factors), "mistral3"
// (Ministral 3 and Mistral's newer files: llama's block with YaRN and a
// query temperature over long contexts) and "gpt-oss" (OpenAI's gpt-oss:
// qwen2's biases, attention sinks and a window on every other layer, and
// a mixture of experts with biases, top-k softmax gating and a clamped
// SwiGLU); and encoders, whose final hidden states are text embeddings
// (Config.Encoder): "bert" (BERT and its fine-tunes: bge, all-MiniLM,
// mxbai-embed, snowflake-arctic-embed; XLM-RoBERTa's: bge-m3,
// multilingual-e5), "nomic-bert" (nomic-embed-text: BERT's block with RoPE
// and a SwiGLU feed-forward), "nomic-bert-moe" (nomic-embed-text-v2-moe:
// GELU experts on every other layer), "jina-bert-v2" (jina-embeddings-v2:
// ALiBi and GeGLU), "modern-bert" (ModernBERT: gte-modernbert,
// granite-embedding r2) and "gemma-embedding" (EmbeddingGemma: Gemma 3's
// block without the causal mask). A classification head makes a model a
// reranker (rank.go), a qwen3 decoder's too (Qwen3-Reranker).
//
// One forward pass serves prefill and decode: a Batch is a set of tokens,
// each with its sequence and position, and attention reads keys and values
// from a paged store (KV) through each sequence's page table. The arithmetic
// follows llama.cpp's CPU backend closely enough to match its logits within
// the tolerances of the reference data.
package llama

import (
	"errors"
	"fmt"
	"math"

	"oengine/kernels/cpu"
	"oengine/model/gguf"
)

// ErrUnsupported is wrapped by errors about models this package cannot run
// (architecture, rope scaling type, tensor type).
var ErrUnsupported = errors.New("llama: unsupported model")

// Config is the shape of a model, read from GGUF metadata.
type Config struct {
	Arch    string // "llama", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "phi3", "mistral3", "gpt-oss", "bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "modern-bert", "gemma-embedding"
	Dim     int    // embedding width
	Layers  int    // transformer blocks
	Heads   int    // query heads
	KVHeads int    // key/value heads (GQA: Heads is a multiple of KVHeads)
	HeadDim int    // values per head (key_length, or Dim/Heads)
	FFN     int    // feed-forward hidden width
	Vocab   int    // logits per token
	CtxLen  int    // training context length (informational)

	RopeBase      float32 // rope.freq_base
	RopeDims      int     // rotated values per head (rope.dimension_count, else HeadDim)
	RopeFreqScale float32 // 1/factor for linear rope scaling, else 1
	RopeNeoX      bool    // half-split pairs (qwen2, qwen3) instead of adjacent pairs (llama)
	RopeFreqs     bool    // a rope_freqs tensor divides each pair's frequency (Llama-3 scaling)
	// LongRoPE (phi3): rope_factors_short / rope_factors_long tensors
	// divide each pair's frequency like rope_freqs; the long ones apply
	// when the context (CtxLen) exceeds RopeOrigCtx
	// (rope.scaling.original_context_length; 0: CtxLen), as llama.cpp
	// chooses them for a context of that size. RopeAttnFactor
	// (rope.scaling.attn_factor; 0: none, as 1) scales the rotated values.
	RopeFactors    bool
	RopeOrigCtx    int
	RopeAttnFactor float32
	// Yarn: rope.scaling.type yarn (Qwen2.5 and Qwen3 past 32k, ...):
	// RopeFreqScale is 1/factor for the low-frequency pairs, the
	// high-frequency ones keep their angles, a ramp between
	// (cpu.RopeCacheYaRN with llama.cpp's defaults: betas 32 and 1 over
	// RopeOrigCtx), and cos and sin grow by 1 + 0.1·ln(factor).
	Yarn bool
	// YarnBetaFast, YarnBetaSlow and YarnLogMul are YaRN's settings where
	// the file gives them (mistral3: rope.scaling.yarn_*; 0: llama.cpp's
	// defaults 32, 1 and none).
	YarnBetaFast, YarnBetaSlow, YarnLogMul float32
	// AttnTempScale (mistral3's attention.temperature_scale; 0: none)
	// scales each query by AttnTemp(pos) after the rotation, as llama.cpp
	// does for Llama 4 and Ministral 3 over long contexts.
	AttnTempScale float32

	NormEps float32 // RMSNorm epsilon
	QKVBias bool    // attn_q/k/v carry a .bias (qwen2)
	QKNorm  bool    // attn_q_norm / attn_k_norm per head (qwen3, gemma3)
	TiedOut bool    // no output.weight: the output projection is token_embd
	FusedUp bool    // ffn_up is [2*FFN][Dim]: the gate's rows, then up's (phi3)

	// Gemma: Gemma 2's and 3's block. The token embedding is scaled by √Dim; the
	// attention and feed-forward outputs are RMS-normed again
	// (post_attention_norm, post_ffw_norm) before their residual adds; the
	// feed-forward gate is GELU (tanh form) instead of SiLU.
	Gemma bool
	// SWA is the sliding window of the local layers: a token attends to
	// the SWA positions up to and including its own. 0: every layer is
	// global. With SWA, layer l is global when l%SWAPattern ==
	// SWAPattern-1 (Local; SWAPattern 0: every layer is local), and local
	// layers rotate with RopeBaseSWA and scale RopeScaleSWA (llama.cpp's
	// conventions: Gemma 3's 10000 and 1, Gemma 2's the global ones).
	SWA, SWAPattern           int
	RopeBaseSWA, RopeScaleSWA float32
	// AttnSoftcap > 0 caps each scaled attention score s as
	// AttnSoftcap·tanh(s/AttnSoftcap) (Gemma 2); FinalSoftcap > 0 caps the
	// logits the same way.
	AttnSoftcap, FinalSoftcap float32
	// AttnScale multiplies the query·key scores: 1/√HeadDim, except Gemma
	// 3's 27B shape (62 layers), 1/√(Dim/Heads).
	AttnScale float32

	// Experts (qwen3moe; llama files with experts, e.g. Mixtral): each
	// layer's feed-forward is a mixture of Experts SwiGLU networks
	// ExpertFFN wide (ffn_{gate,up,down}_exps); a router (ffn_gate_inp)
	// gives each token a softmax over them, the ExpertsUsed most probable
	// run, and their outputs are summed weighted by those probabilities
	// renormalized to sum 1 (moe.go). 0: a dense FFN.
	Experts, ExpertsUsed, ExpertFFN int
	// nomic-bert-moe (nomic-embed-text-v2-moe): layer l has the mixture
	// when l%MoEEvery == 1, a dense FFN otherwise (MoEEvery 0: every
	// layer has it); its experts are GELU networks without a gate
	// (ffn_{up,down}_exps; ExpertGELU), weighted by their probabilities
	// as they are, not renormalized (MoEKeepProbs).
	MoEEvery                 int
	ExpertGELU, MoEKeepProbs bool

	// gpt-oss. AttnSinks: each layer has a learned logit per query head
	// (attn_sinks) that joins the head's softmax as a position without a
	// value (cpu.AttnOpts.Sinks). OutBias: attn_output carries a .bias.
	// The mixture of experts differs from qwen3moe's: the router and each
	// expert projection carry biases (ExpertBias); the ExpertsUsed largest
	// router logits choose the experts and their weights are the softmax
	// over those alone (TopKSoftmax, llama.cpp's SOFTMAX_WEIGHT gating);
	// the activation is SwiGLUOAI: with g = min(gate, 7) and
	// u = clamp(up, −7, 7), g·σ(1.702·g)·(u + 1). The feed-forward norm is
	// the file's post_attention_norm, and the local layers rotate as the
	// global ones (YaRN included).
	AttnSinks, OutBias, ExpertBias, TopKSoftmax, SwiGLUOAI bool

	// Encoder: a BERT-style encoder (encoder.go; the package comment
	// lists them; below, "bert" and "nomic-bert").
	// Every token attends to every position of its sequence (no causal
	// mask), so a sequence is computed whole in one Forward. The
	// embedding adds the first token-type row (token_types, when present)
	// and, for "bert" (AbsPos), a learned row per position (position_embd)
	// instead of RoPE, then is LayerNorm-ed (token_embd_norm). Each block
	// is post-norm with LayerNorm (weight and bias, epsilon NormEps):
	// x = LN(x + attn(x)), then x = LN(x + ffn(x)); Q, K, V and the
	// output projection may carry biases. The feed-forward is
	// GELU(x·Wupᵀ + b)·Wdownᵀ + b ("bert") or SwiGLU without biases
	// ("nomic-bert"). There is no output norm nor projection: the final
	// states are the embeddings, and Forward computes no logits.
	Encoder, AbsPos bool
	// PreNorm: ModernBERT's encoder block ("modern-bert"): x = x +
	// attn(LN(x)) (no norm before layer 0's attention), x = x +
	// ffn(LN(x)), a final LN; LayerNorms without biases, no biases at all,
	// Q, K and V in one matrix and RoPE, the feed-forward's gate and up in
	// one (GeGLU, or SwiGLU where the file's hidden_activation says silu:
	// EncoderSiLU). Its local layers (SWA, dense first: layer l is global
	// when l%SWAPattern == 0, SWADenseFirst) see the positions within
	// SWA/2 either side of their own, and rotate with RopeBaseSWA.
	PreNorm, EncoderSiLU, SWADenseFirst bool
	// ALiBi: jina-bert-v2's positions, no RoPE nor learned rows: each
	// head's scaled score of key p for query i gets −slope·|i − p|
	// (slopes from max bias 8, llama.cpp's), and its feed-forward is
	// GeGLU over ffn_up's two halves (gate first) with a bias on down.
	ALiBi bool
	// TokenTypes is the rows of an encoder's token_types table (BERT's
	// segments; 0 without one): Batch.Types picks a row per token.
	TokenTypes int
	// RankOutputs is the width of a classification head (a reranker's
	// cls.output, else cls; 0: none, Rank refuses; rank.go); RankPooling
	// the pooled state it reads (PoolCLS, PoolMean or PoolLast);
	// RankLogOdds: the head's two outputs are a softmax's (Qwen3-Reranker's
	// "yes" and "no"), and Rank returns one score, their difference.
	RankOutputs int
	RankPooling Pooling
	RankLogOdds bool

	// Pooling is how the file says its hidden states become one embedding
	// (`<arch>.pooling_type`); PoolUnset when it does not say.
	Pooling Pooling
}

// Pooling is a GGUF pooling_type.
type Pooling int

// The pooling types. A file stores llama.cpp's numbers, PoolNone (0) to
// PoolRank (4): one less than these, whose zero value is PoolUnset.
const (
	PoolUnset Pooling = iota
	PoolNone
	PoolMean
	PoolCLS
	PoolLast
	PoolRank
)

var poolNames = [...]string{"unset", "none", "mean", "cls", "last", "rank"}

func (p Pooling) String() string {
	if p >= 0 && int(p) < len(poolNames) {
		return poolNames[p]
	}
	return fmt.Sprintf("Pooling(%d)", int(p))
}

// Local reports whether layer l attends through the sliding window.
func (c Config) Local(l int) bool {
	if c.SWADenseFirst {
		return c.SWA > 0 && (c.SWAPattern == 0 || l%c.SWAPattern != 0)
	}
	return c.SWA > 0 && (c.SWAPattern == 0 || l%c.SWAPattern < c.SWAPattern-1)
}

// MoELayer reports whether layer l's feed-forward is the mixture of
// experts.
func (c Config) MoELayer(l int) bool {
	return c.Experts > 0 && (c.MoEEvery == 0 || l%c.MoEEvery == 1)
}

// QDim is Heads*HeadDim, the width of the query projection.
func (c Config) QDim() int { return c.Heads * c.HeadDim }

// KVDim is KVHeads*HeadDim, the width of one token's K (or V) row.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim }

// archTraits are the per-architecture differences.
type archTraits struct {
	neox, qkvBias, qkNorm, gemma, moe bool
	// fusedUp: ffn_up holds the gate's rows then the up projection's
	// ([2*FFN][Dim], no ffn_gate; phi3).
	fusedUp bool
	gptOSS  bool // Config.AttnSinks and the rest of gpt-oss's block
	// ffnNorm names the feed-forward norm's tensor ("": ffn_norm).
	ffnNorm string
	// encoder: Config.Encoder; absPos: Config.AbsPos; preNorm:
	// Config.PreNorm.
	encoder, absPos, preNorm bool
	alibi                    bool // Config.ALiBi
}

// ffnNormTensor is the suffix of a layer's feed-forward norm tensor.
func (c Config) ffnNormTensor() string {
	if n := archs[c.Arch].ffnNorm; n != "" {
		return n + ".weight"
	}
	return "ffn_norm.weight"
}

var archs = map[string]archTraits{
	"llama":    {},
	"qwen2":    {neox: true, qkvBias: true},
	"qwen3":    {neox: true, qkNorm: true},
	"qwen3moe": {neox: true, qkNorm: true, moe: true},
	"gemma2":   {neox: true, gemma: true},
	"gemma3":   {neox: true, qkNorm: true, gemma: true},
	"phi3":     {neox: true, fusedUp: true},
	"mistral3": {},
	"gpt-oss":  {neox: true, qkvBias: true, moe: true, gptOSS: true, ffnNorm: "post_attention_norm"},
	// The encoders' biases are optional tensors (readEncoder).
	"bert":        {encoder: true, absPos: true},
	"nomic-bert":  {neox: true, encoder: true},
	"modern-bert": {neox: true, encoder: true, preNorm: true},
	// jina-embeddings-v2: bert without positions, ALiBi instead.
	"jina-bert-v2": {encoder: true, alibi: true},
	// nomic-embed-text-v2-moe: nomic-bert with experts on every other layer.
	"nomic-bert-moe": {neox: true, encoder: true, moe: true},
	// EmbeddingGemma: Gemma 3's block without the causal mask (encoder.go).
	"gemma-embedding": {neox: true, qkNorm: true, gemma: true, encoder: true},
}

// maxDim bounds every metadata size so that products of them cannot
// overflow an int and hostile files fail cleanly.
const maxDim = 1 << 24

// ConfigFromGGUF reads the model shape from f's metadata. Tensor shapes are
// checked later, by Load.
func ConfigFromGGUF(f *gguf.File) (Config, error) {
	arch, ok := f.String("general.architecture")
	if !ok {
		return Config{}, errors.New("llama: missing general.architecture")
	}
	tr, ok := archs[arch]
	if !ok {
		return Config{}, fmt.Errorf("%w: architecture %q (want llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3, mistral3, gpt-oss, bert, nomic-bert, nomic-bert-moe, jina-bert-v2, modern-bert or gemma-embedding)", ErrUnsupported, arch)
	}
	c := Config{Arch: arch, RopeNeoX: tr.neox, QKVBias: tr.qkvBias, QKNorm: tr.qkNorm, Gemma: tr.gemma, FusedUp: tr.fusedUp,
		Encoder: tr.encoder, AbsPos: tr.absPos, PreNorm: tr.preNorm, ALiBi: tr.alibi}
	get := func(key string, dst *int, required bool) error {
		v, ok := f.Uint(arch + "." + key)
		if !ok {
			if required {
				return fmt.Errorf("llama: missing metadata %s.%s", arch, key)
			}
			return nil
		}
		if v == 0 || v > maxDim {
			return fmt.Errorf("llama: metadata %s.%s = %d out of range", arch, key, v)
		}
		*dst = int(v)
		return nil
	}
	for _, k := range []struct {
		key      string
		dst      *int
		required bool
	}{
		{"embedding_length", &c.Dim, true},
		{"block_count", &c.Layers, true},
		{"attention.head_count", &c.Heads, true},
		{"attention.head_count_kv", &c.KVHeads, false},
		{"attention.key_length", &c.HeadDim, false},
		{"feed_forward_length", &c.FFN, !tr.gptOSS}, // gpt-oss: the experts' width
		{"context_length", &c.CtxLen, false},
		{"rope.dimension_count", &c.RopeDims, false},
		{"vocab_size", &c.Vocab, false},
	} {
		if err := get(k.key, k.dst, k.required); err != nil {
			return Config{}, err
		}
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim == 0 {
		if c.Dim%c.Heads != 0 {
			return Config{}, fmt.Errorf("llama: embedding_length %d not divisible by head_count %d", c.Dim, c.Heads)
		}
		c.HeadDim = c.Dim / c.Heads
	}
	if vl, ok := f.Uint(arch + ".attention.value_length"); ok && int(vl) != c.HeadDim {
		return Config{}, fmt.Errorf("%w: value_length %d != key_length %d", ErrUnsupported, vl, c.HeadDim)
	}
	if c.Heads%c.KVHeads != 0 {
		return Config{}, fmt.Errorf("llama: head_count %d not a multiple of head_count_kv %d", c.Heads, c.KVHeads)
	}
	if c.RopeDims == 0 {
		c.RopeDims = c.HeadDim
	}
	if c.RopeDims > c.HeadDim || c.RopeDims%2 != 0 {
		return Config{}, fmt.Errorf("llama: rope.dimension_count %d invalid for head dim %d", c.RopeDims, c.HeadDim)
	}
	if c.Vocab == 0 {
		if toks, ok := f.Strings("tokenizer.ggml.tokens"); ok && len(toks) > 0 {
			c.Vocab = len(toks)
		} else if t, ok := f.Tensor("token_embd.weight"); ok && len(t.Dims) == 2 && t.Dims[1] <= maxDim {
			c.Vocab = int(t.Dims[1])
		} else {
			return Config{}, errors.New("llama: cannot determine vocabulary size")
		}
	}
	if c.CtxLen == 0 {
		c.CtxLen = 2048
	}

	c.RopeBase = 10000
	if v, ok := f.Float(arch + ".rope.freq_base"); ok {
		c.RopeBase = float32(v)
	}
	epsKey := arch + ".attention.layer_norm_rms_epsilon"
	if c.Encoder && !c.Gemma {
		epsKey = arch + ".attention.layer_norm_epsilon" // LayerNorm's
	}
	eps, ok := f.Float(epsKey)
	if !ok {
		return Config{}, fmt.Errorf("llama: missing metadata %s", epsKey)
	}
	c.NormEps = float32(eps)
	if !(c.RopeBase > 0) || math.IsInf(float64(c.RopeBase), 0) || !(c.NormEps >= 0) || c.NormEps > 1 {
		return Config{}, fmt.Errorf("llama: rope.freq_base %g or rms epsilon %g out of range", c.RopeBase, c.NormEps)
	}
	if err := c.readRopeScaling(f); err != nil {
		return Config{}, err
	}
	if v, ok := f.Uint(arch + ".pooling_type"); ok {
		if v >= uint64(PoolRank) {
			return Config{}, fmt.Errorf("llama: metadata %s.pooling_type = %d out of range", arch, v)
		}
		c.Pooling = Pooling(v + 1)
	}
	_, c.RopeFreqs = f.Tensor("rope_freqs.weight")
	if err := c.readLongRope(f); err != nil {
		return Config{}, err
	}
	_, hasOut := f.Tensor("output.weight")
	c.TiedOut = !hasOut
	c.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	if c.Gemma {
		if err := c.readGemma(f); err != nil {
			return Config{}, err
		}
	}
	if arch == "mistral3" {
		if err := c.readMistral3(f); err != nil {
			return Config{}, err
		}
	}
	if tr.gptOSS {
		if err := c.readGPTOSS(f); err != nil {
			return Config{}, err
		}
	}
	if c.Encoder {
		if err := c.readEncoder(f); err != nil {
			return Config{}, err
		}
	}
	if err := c.readRankHead(f); err != nil {
		return Config{}, err
	}
	if n, _ := f.Uint(arch + ".expert_count"); tr.moe || n > 0 && (arch == "llama" || arch == "mistral3") {
		if err := c.readExperts(f); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// readExperts reads the mixture of experts of a qwen3moe file, or of a
// llama file that has one (Mixtral), whose experts are FFN wide.
func (c *Config) readExperts(f *gguf.File) error {
	key := func(k string) string { return c.Arch + "." + k }
	n, ok1 := f.Uint(key("expert_count"))
	used, ok2 := f.Uint(key("expert_used_count"))
	if !ok1 || !ok2 || n == 0 || used == 0 || used > n || n > 1<<12 {
		return fmt.Errorf("llama: %s = %d and %s = %d: want 1 ≤ used ≤ count ≤ 4096", key("expert_count"), n, key("expert_used_count"), used)
	}
	c.Experts, c.ExpertsUsed = int(n), int(used)
	c.ExpertFFN = c.FFN / c.ExpertsUsed
	if c.Arch == "llama" {
		c.ExpertFFN = c.FFN
	}
	if c.Arch == "nomic-bert-moe" {
		c.ExpertFFN, c.ExpertGELU, c.MoEKeepProbs = c.FFN, true, true
		every, ok := f.Uint(key("moe_every_n_layers"))
		if !ok || every > maxDim {
			return fmt.Errorf("llama: %s missing or out of range", key("moe_every_n_layers"))
		}
		c.MoEEvery = int(every)
	}
	if v, ok := f.Uint(key("expert_feed_forward_length")); ok {
		if v == 0 || v > maxDim {
			return fmt.Errorf("llama: %s = %d out of range", key("expert_feed_forward_length"), v)
		}
		c.ExpertFFN = int(v)
	}
	if c.ExpertFFN == 0 {
		return fmt.Errorf("llama: %s missing", key("expert_feed_forward_length"))
	}
	if c.FFN == 0 {
		c.FFN = c.ExpertFFN
	}
	if v, ok := f.Float(key("expert_weights_scale")); ok && v != 0 && v != 1 {
		return fmt.Errorf("%w: %s %g", ErrUnsupported, key("expert_weights_scale"), v)
	}
	return nil
}

// readGPTOSS reads gpt-oss's sliding window (required, as llama.cpp
// reads it) and its pattern (default 2: layers 0, 2, 4, ... local), and
// sets the rest of its block (Config.AttnSinks). Its local layers rotate
// with rope.freq_base_swa (default: the global base) and the global scale.
func (c *Config) readGPTOSS(f *gguf.File) error {
	key := func(k string) string { return c.Arch + "." + k }
	c.AttnSinks, c.OutBias, c.ExpertBias, c.TopKSoftmax, c.SwiGLUOAI = true, true, true, true, true
	w, ok := f.Uint(key("attention.sliding_window"))
	if !ok || w == 0 || w > maxDim {
		return fmt.Errorf("llama: %s missing or out of range", key("attention.sliding_window"))
	}
	c.SWA, c.SWAPattern = int(w), 2
	c.RopeBaseSWA, c.RopeScaleSWA = c.RopeBase, c.RopeFreqScale
	return c.readWindowKeys(f)
}

// readWindowKeys reads what a file may say of its sliding-window layers
// over the architecture's defaults: attention.sliding_window_pattern (a
// single number; a per-layer list is unsupported) and rope.freq_base_swa.
func (c *Config) readWindowKeys(f *gguf.File) error {
	key := func(k string) string { return c.Arch + "." + k }
	if v, ok := f.Value(key("attention.sliding_window_pattern")); ok {
		p, ok := v.AsUint()
		if !ok {
			return fmt.Errorf("%w: %s = %v (a per-layer pattern)", ErrUnsupported, key("attention.sliding_window_pattern"), v)
		}
		if p > maxDim {
			return fmt.Errorf("llama: %s = %d out of range", key("attention.sliding_window_pattern"), p)
		}
		c.SWAPattern = int(p)
	}
	if v, ok := f.Float(key("rope.freq_base_swa")); ok {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("llama: %s = %g out of range", key("rope.freq_base_swa"), v)
		}
		c.RopeBaseSWA = float32(v)
	}
	return nil
}

// readGemma reads Gemma 2's and Gemma 3's sliding window, soft-capping
// and attention scale, with llama.cpp's defaults: Gemma 2 windows every
// other layer (4096), caps attention logits at 50 and final logits at 30,
// and rotates local layers as global ones; Gemma 3 windows five layers of
// six when the file gives a window, caps nothing unless the file says so,
// and rotates local layers with base 10000 and no scaling.
func (c *Config) readGemma(f *gguf.File) error {
	key := func(k string) string { return c.Arch + "." + k }
	gemma2 := c.Arch == "gemma2"
	if c.RopeFreqs {
		return fmt.Errorf("%w: rope_freqs tensor in a %s model", ErrUnsupported, c.Arch)
	}
	if gemma2 {
		c.AttnSoftcap, c.FinalSoftcap = 50, 30
	}
	for _, cap := range []struct {
		key string
		dst *float32
	}{{"attn_logit_softcapping", &c.AttnSoftcap}, {"final_logit_softcapping", &c.FinalSoftcap}} {
		if v, ok := f.Float(key(cap.key)); ok {
			if !(v >= 0) || math.IsInf(v, 0) {
				return fmt.Errorf("llama: %s = %g out of range", key(cap.key), v)
			}
			*cap.dst = float32(v)
		}
	}
	if !gemma2 {
		c.AttnSoftcap = 0 // llama.cpp caps Gemma 3's attention never
	}
	if gemma2 && c.Layers == 46 || !gemma2 && c.Layers == 62 { // the 27B shapes
		c.AttnScale = float32(1 / math.Sqrt(float64(c.Dim/c.Heads)))
	}
	if gemma2 {
		c.SWA = 4096
	}
	if v, ok := f.Value(key("attention.sliding_window")); ok {
		w, ok := v.AsUint()
		if !ok || w > maxDim {
			return fmt.Errorf("llama: %s = %v out of range", key("attention.sliding_window"), v)
		}
		c.SWA = int(w)
	}
	if c.SWA == 0 {
		return nil
	}
	c.SWAPattern, c.RopeBaseSWA, c.RopeScaleSWA = 6, 10000, 1
	if gemma2 {
		c.SWAPattern, c.RopeBaseSWA, c.RopeScaleSWA = 2, c.RopeBase, c.RopeFreqScale
	}
	return c.readWindowKeys(f)
}

// readLongRope reads LongRoPE's factors and attention factor (any
// architecture, as llama.cpp reads them; phi3 files have them).
func (c *Config) readLongRope(f *gguf.File) error {
	_, long := f.Tensor("rope_factors_long.weight")
	_, short := f.Tensor("rope_factors_short.weight")
	c.RopeFactors = long || short
	if c.RopeFactors && c.RopeFreqs {
		return fmt.Errorf("%w: both rope_freqs and rope_factors tensors", ErrUnsupported)
	}
	if v, ok := f.Uint(c.Arch + ".rope.scaling.original_context_length"); ok {
		if v == 0 || v > maxDim {
			return fmt.Errorf("llama: %s.rope.scaling.original_context_length = %d out of range", c.Arch, v)
		}
		c.RopeOrigCtx = int(v)
	}
	if v, ok := f.Float(c.Arch + ".rope.scaling.attn_factor"); ok {
		if !(v > 0) || v > 100 {
			return fmt.Errorf("llama: %s.rope.scaling.attn_factor = %g out of range", c.Arch, v)
		}
		c.RopeAttnFactor = float32(v)
	}
	return nil
}

// YaRN is the YaRN rope of a Yarn configuration, as llama.cpp sets it up
// for a file that gives no YaRN betas or multipliers (its llama, qwen2,
// qwen3 and gemma loaders read none): ext_factor 1, betas 32 and 1, the
// attention factor divided by the mscale the rope multiplies back.
func (c Config) YaRN() cpu.YaRN { return c.yarnFor(c.RopeBase, c.RopeFreqScale) }

// yarnFor is YaRN for layers that rotate with base and scale (the local
// layers' RopeBaseSWA and RopeScaleSWA): the correction dimensions are
// the base's, the attention factor the model's, and the rope multiplies
// it by 1 + 0.1·ln(1/scale) (1 for an unscaled layer), as ggml's rope does.
func (c Config) yarnFor(base, scale float32) cpu.YaRN {
	orig := c.RopeOrigCtx
	if orig == 0 {
		orig = c.CtxLen
	}
	fast, slow := c.YarnBetaFast, c.YarnBetaSlow
	if fast == 0 {
		fast = 32
	}
	if slow == 0 {
		slow = 1
	}
	lo, hi := cpu.YaRNCorrDims(c.RopeDims, orig, base, fast, slow)
	factor := 1 / c.RopeFreqScale
	mscale := func(m float32) float32 {
		if factor <= 1 {
			return 1
		}
		return 0.1*m*float32(math.Log(float64(factor))) + 1
	}
	attn := mscale(1)
	if c.YarnLogMul != 0 {
		attn = mscale(1) / mscale(c.YarnLogMul)
	}
	attn *= 1 / (1 + 0.1*float32(math.Log(float64(factor))))
	if c.RopeAttnFactor != 0 {
		attn *= c.RopeAttnFactor
	}
	return cpu.YaRN{CorrLow: lo, CorrHigh: hi, MScale: attn * (1 + 0.1*float32(math.Log(float64(1/scale))))}
}

// readMistral3 reads what mistral3 adds to llama's block: YaRN's betas
// and log multiplier, the query temperature, and refuses the optional
// biases this package does not apply.
func (c *Config) readMistral3(f *gguf.File) error {
	for _, k := range []struct {
		key string
		dst *float32
	}{{"rope.scaling.yarn_beta_fast", &c.YarnBetaFast}, {"rope.scaling.yarn_beta_slow", &c.YarnBetaSlow},
		{"rope.scaling.yarn_log_multiplier", &c.YarnLogMul}, {"attention.temperature_scale", &c.AttnTempScale}} {
		if v, ok := f.Float(c.Arch + "." + k.key); ok {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1e4 {
				return fmt.Errorf("llama: %s.%s = %g out of range", c.Arch, k.key, v)
			}
			*k.dst = float32(v)
		}
	}
	for _, b := range []string{"attn_output.bias", "ffn_up.bias", "ffn_gate.bias", "ffn_down.bias", "attn_q.bias"} {
		if _, ok := f.Tensor("blk.0." + b); ok {
			return fmt.Errorf("%w: %s in a mistral3 model", ErrUnsupported, b)
		}
	}
	return nil
}

// AttnTemp is the query scale at pos under AttnTempScale:
// ln(⌊pos/orig⌋ + 1)·AttnTempScale + 1, orig the original context
// (RopeOrigCtx, else CtxLen), as llama.cpp computes it.
func (c Config) AttnTemp(pos int32) float32 {
	orig := c.RopeOrigCtx
	if orig == 0 {
		orig = c.CtxLen
	}
	return float32(math.Log(math.Floor(float64(float32(pos)/float32(orig)))+1)*float64(c.AttnTempScale) + 1)
}

// RopeFactorsTensor names the LongRoPE factors this configuration uses
// ("" without them).
func (c Config) RopeFactorsTensor() string {
	switch {
	case !c.RopeFactors:
		return ""
	case c.RopeOrigCtx > 0 && c.CtxLen > c.RopeOrigCtx:
		return "rope_factors_long.weight"
	}
	return "rope_factors_short.weight"
}

// readRopeScaling handles rope.scaling.type / rope.scaling.factor (and the
// older rope.scale_linear). Linear scaling divides every angle by the factor;
// Llama-3 scaling comes as a rope_freqs tensor and needs nothing here.
func (c *Config) readRopeScaling(f *gguf.File) error {
	c.RopeFreqScale = 1
	typ, _ := f.String(c.Arch + ".rope.scaling.type")
	factor, hasFactor := f.Float(c.Arch + ".rope.scaling.factor")
	if !hasFactor {
		factor, hasFactor = f.Float(c.Arch + ".rope.scale_linear")
		if hasFactor && typ == "" {
			typ = "linear"
		}
	}
	switch typ {
	case "", "none", "llama3", "longrope": // their factors come as tensors (readLongRope)
		return nil
	case "yarn":
		if !hasFactor || !(factor > 0) || math.IsInf(factor, 0) {
			return fmt.Errorf("llama: yarn rope scaling needs a positive factor, got %g", factor)
		}
		c.RopeFreqScale, c.Yarn = float32(1/factor), true
		return nil
	case "linear":
		if !hasFactor || factor == 0 || factor == 1 {
			return nil
		}
		if !(factor > 0) || math.IsInf(factor, 0) {
			return fmt.Errorf("llama: rope scaling factor %g out of range", factor)
		}
		c.RopeFreqScale = float32(1 / factor)
		return nil
	default:
		return fmt.Errorf("%w: rope scaling type %q", ErrUnsupported, typ)
	}
}
