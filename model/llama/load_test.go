package llama

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/model/gguf"
	"oengine/model/synth"
)

func TestConfigOfReferenceModels(t *testing.T) {
	cases := []struct {
		name string
		want Config
	}{
		{"tiny-llama-f16", Config{Arch: "llama", Dim: 256, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 768, Vocab: 32000,
			CtxLen: 2048, RopeBase: 10000, RopeDims: 64, RopeFreqScale: 1, NormEps: 1e-5, TiedOut: true, AttnScale: 0.125}},
		{"tiny-llama-q4_k_m", Config{Arch: "llama", Dim: 256, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 768, Vocab: 32000,
			CtxLen: 2048, RopeBase: 10000, RopeDims: 64, RopeFreqScale: 1, NormEps: 1e-5, AttnScale: 0.125}},
		{"tiny-qwen2-q8_0", Config{Arch: "qwen2", Dim: 256, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 768, Vocab: 50257,
			CtxLen: 2048, RopeBase: 1e6, RopeDims: 64, RopeFreqScale: 1, RopeNeoX: true, NormEps: 1e-5, QKVBias: true, TiedOut: true, AttnScale: 0.125}},
		{"tiny-qwen3-q4_k_m", Config{Arch: "qwen3", Dim: 256, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 768, Vocab: 50257,
			CtxLen: 2048, RopeBase: 1e6, RopeDims: 64, RopeFreqScale: 1, RopeNeoX: true, NormEps: 1e-5, QKNorm: true, TiedOut: true, AttnScale: 0.125}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, m := openShared(t, c.name)
			if got := m.Config(); got != c.want {
				t.Fatalf("config\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestLoadRejects(t *testing.T) {
	base := synthFile(t, "qwen2", ggml.TypeQ8_0, 3)
	drop := func(name string) func(ti *gguf.TensorInfo) (ggml.Type, []uint64, []byte) {
		return func(ti *gguf.TensorInfo) (ggml.Type, []uint64, []byte) {
			if ti.Name == name {
				return 0, nil, nil
			}
			return ti.Type, ti.Dims, ti.Data
		}
	}
	cases := []struct {
		name     string
		meta     map[string]gguf.Value
		edit     func(ti *gguf.TensorInfo) (ggml.Type, []uint64, []byte)
		wantErr  string
		sentinel error
	}{
		{name: "unknown_arch", meta: map[string]gguf.Value{"general.architecture": gguf.StringValue("mamba")},
			wantErr: `architecture "mamba"`, sentinel: ErrUnsupported},
		{name: "missing_tensor", edit: drop("blk.1.ffn_up.weight"), wantErr: "missing tensor blk.1.ffn_up.weight"},
		{name: "missing_bias", edit: drop("blk.0.attn_k.bias"), wantErr: "missing tensor blk.0.attn_k.bias"},
		{name: "missing_metadata", meta: map[string]gguf.Value{"qwen2.embedding_length": gguf.StringValue("x")},
			wantErr: "missing metadata qwen2.embedding_length"},
		{name: "zero_heads", meta: map[string]gguf.Value{"qwen2.attention.head_count": gguf.Uint32Value(0)},
			wantErr: "head_count = 0 out of range"},
		{name: "gqa_mismatch", meta: map[string]gguf.Value{"qwen2.attention.head_count_kv": gguf.Uint32Value(3)},
			wantErr: "not a multiple"},
		{name: "dynamic_scaling", meta: map[string]gguf.Value{"qwen2.rope.scaling.type": gguf.StringValue("dynamic")},
			wantErr: `rope scaling type "dynamic"`, sentinel: ErrUnsupported},
		{name: "wrong_shape", edit: func(ti *gguf.TensorInfo) (ggml.Type, []uint64, []byte) {
			if ti.Name == "blk.0.ffn_gate.weight" { // half the rows
				return ti.Type, []uint64{ti.Dims[0], ti.Dims[1] / 2}, ti.Data[:len(ti.Data)/2]
			}
			return ti.Type, ti.Dims, ti.Data
		}, wantErr: "tensor blk.0.ffn_gate.weight has dims"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := rewrite(t, base, c.meta, c.edit)
			m, err := Load(f, Options{Threads: 1})
			if err == nil {
				m.Close()
				t.Fatalf("Load succeeded, want error containing %q", c.wantErr)
			}
			if !strings.Contains(err.Error(), c.wantErr) || !strings.HasPrefix(err.Error(), "llama: ") {
				t.Fatalf("error %q, want it to contain %q", err, c.wantErr)
			}
			if c.sentinel != nil && !errors.Is(err, c.sentinel) {
				t.Fatalf("error %q does not wrap %v", err, c.sentinel)
			}
		})
	}
	// The unedited copy loads.
	m, err := Load(rewrite(t, base, nil, nil), Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

func TestRopeScalingConfig(t *testing.T) {
	base := synthFile(t, "llama", ggml.TypeF32, 5)
	f := rewrite(t, base, map[string]gguf.Value{
		"llama.rope.scaling.type":   gguf.StringValue("linear"),
		"llama.rope.scaling.factor": gguf.Float32Value(4),
	}, nil)
	c, err := ConfigFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeFreqScale != 0.25 {
		t.Fatalf("RopeFreqScale = %g, want 0.25", c.RopeFreqScale)
	}
}

// f32Bytes encodes float32 values little-endian.
func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// TestRopeFreqs checks Llama-3 style scaling: a rope_freqs tensor of ones
// changes nothing, other factors change the logits (beyond position 0).
func TestRopeFreqs(t *testing.T) {
	base := synthFile(t, "llama", ggml.TypeF32, 6)
	c, err := ConfigFromGGUF(base)
	if err != nil {
		t.Fatal(err)
	}
	withFreqs := func(v float32) *Model {
		f := make([]float32, c.RopeDims/2)
		for i := range f {
			f[i] = v
		}
		file := rewriteAdd(t, base, nil, nil, []extraTensor{{"rope_freqs.weight", ggml.TypeF32, []uint64{uint64(len(f))}, f32Bytes(f)}})
		m, err := Load(file, Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		if !m.Config().RopeFreqs {
			t.Fatal("Config.RopeFreqs not set")
		}
		return m
	}
	plain, err := Load(base, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	run := func(m *Model) []float32 {
		kv, _ := m.NewKV(1, 16, KVF32)
		out := make([]float32, 4*c.Vocab)
		if err := m.Forward(kv, seqBatch([]int32{5, 9, 13, 2}, 0, []int32{0}), out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := run(plain)
	if i := firstDiff(run(withFreqs(1)), want); i >= 0 {
		t.Fatalf("rope_freqs of ones changed logit %d", i)
	}
	got := run(withFreqs(4))
	if firstDiff(got[:c.Vocab], want[:c.Vocab]) >= 0 {
		t.Fatal("position 0 changed with rope_freqs (no rotation there)")
	}
	if firstDiff(got[c.Vocab:], want[c.Vocab:]) < 0 {
		t.Fatal("rope_freqs of 4 changed nothing")
	}
}

func TestKVBytesPerPage(t *testing.T) {
	_, m := openShared(t, "tiny-llama-q8_0")
	// 16 tokens x 128 values x 4 layers x (K+V) x 2 bytes.
	if got := m.KVBytesPerPage(16, KVF16); got != 16*128*4*2*2 {
		t.Fatalf("F16: %d", got)
	}
	if got := m.KVBytesPerPage(16, KVF32); got != 16*128*4*2*4 {
		t.Fatalf("F32: %d", got)
	}
	if _, err := m.NewKV(0, 16, KVF16); err == nil {
		t.Fatal("NewKV with 0 pages succeeded")
	}
	if _, err := m.NewKV(1<<40, 1<<20, KVF16); err == nil {
		t.Fatal("NewKV of an absurd size succeeded")
	}
	if _, err := m.NewKV(4, 16, KVType(9)); err == nil {
		t.Fatal("NewKV with an unknown type succeeded")
	}
}

// TestLoadSplitModel: a model split into three files by llama.cpp's
// gguf-split (model/gguf/testdata/split) loads through its first file, as
// the server loads models, and computes exactly the logits of the same
// model in one file.
func TestLoadSplitModel(t *testing.T) {
	load := func(name string) *Model {
		f, err := gguf.OpenCopy(filepath.Join("..", "gguf", "testdata", "split", name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		m, err := Load(f, Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return m
	}
	split, whole := load("tiny-00001-of-00003.gguf"), load("tiny.gguf")
	V := whole.Config().Vocab
	steps := [][]int32{testTokens(9, V, 3), testTokens(1, V, 9), testTokens(3, V, 10)}
	sameLogits(t, runSteps(t, split, steps), runSteps(t, whole, steps))
}

// TestGemma3Config: a gemma3 file's shape (a head width apart from
// dim/heads, the sliding window and its pattern, the local layers' rope
// base, Gemma's eps) is read as llama.cpp reads it: five local layers of
// six, the query scale of the head width (of dim/heads for the 62-layer
// 27B shape), final soft-capping when the file states it, attention
// soft-capping never. A per-layer window pattern and the GGML arithmetic
// mode are refused by name.
func TestGemma3Config(t *testing.T) {
	o := synth.Options{Arch: "gemma3", Dims: synth.Dims{Dim: 64, Layers: 6, Heads: 2, KVHeads: 1, HeadDim: 64, FFN: 192, Vocab: 300, CtxLen: 512, SlidingWindow: 96}, Seed: 1}
	f := synthBuild(t, o)
	c, err := ConfigFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Arch: "gemma3", Dim: 64, Layers: 6, Heads: 2, KVHeads: 1, HeadDim: 64, FFN: 192, Vocab: 300, CtxLen: 512,
		RopeBase: 1e6, RopeDims: 64, RopeFreqScale: 1, RopeNeoX: true, NormEps: 1e-6, QKNorm: true, Gemma: true,
		SWA: 96, SWAPattern: 6, RopeBaseSWA: 10000, RopeScaleSWA: 1, AttnScale: 0.125}
	if c != want {
		t.Fatalf("config\n got %+v\nwant %+v", c, want)
	}
	for l := 0; l < 12; l++ {
		if got := c.Local(l); got != (l%6 != 5) {
			t.Errorf("layer %d local %v", l, got)
		}
	}
	o.Dims.Layers, o.Dims.HeadDim = 62, 64
	if c, err := ConfigFromGGUF(synthBuild(t, o)); err != nil || c.AttnScale != float32(1/math.Sqrt(32)) {
		t.Fatalf("62 layers: scale %g, err %v; want 1/√(dim/heads)", c.AttnScale, err)
	}
	capped := rewrite(t, f, map[string]gguf.Value{"gemma3.final_logit_softcapping": gguf.Float32Value(30),
		"gemma3.attn_logit_softcapping": gguf.Float32Value(50)}, nil)
	if c, err := ConfigFromGGUF(capped); err != nil || c.FinalSoftcap != 30 || c.AttnSoftcap != 0 {
		t.Fatalf("soft-capping keys: final %g, attention %g, err %v", c.FinalSoftcap, c.AttnSoftcap, err)
	}
	for _, bad := range []struct {
		key  string
		v    gguf.Value
		want string
	}{
		{"gemma3.attention.sliding_window_pattern", gguf.Int32sValue([]int32{1, 1, 0}), "sliding_window_pattern"},
	} {
		_, err := ConfigFromGGUF(rewrite(t, f, map[string]gguf.Value{bad.key: bad.v}, nil))
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v", bad.key, err)
		}
	}
	if _, err := Load(f, Options{Threads: 1, GGMLArithmetic: true}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("GGML arithmetic mode: %v", err)
	}
}

// TestGemma2Config: a gemma2 file's window and soft-caps are read (synth
// writes Gemma 2's 4096, 50 and 30 unless told otherwise), with llama.cpp's
// Gemma 2 conventions for what files do not state: every other layer
// local, local layers rotated as global ones; the 46-layer 27B shape
// scales queries by 1/√(dim/heads).
func TestGemma2Config(t *testing.T) {
	o := synth.Options{Arch: "gemma2", Dims: synth.Dims{Dim: 64, Layers: 4, Heads: 2, KVHeads: 1, HeadDim: 64, FFN: 192, Vocab: 300, CtxLen: 512}, Seed: 1}
	f := synthBuild(t, o)
	c, err := ConfigFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Gemma || c.QKNorm || !c.TiedOut || c.SWA != 4096 || c.SWAPattern != 2 || c.RopeBaseSWA != c.RopeBase ||
		c.RopeScaleSWA != c.RopeFreqScale || c.AttnSoftcap != 50 || c.FinalSoftcap != 30 || c.AttnScale != 0.125 {
		t.Fatalf("config %+v", c)
	}
	for l := 0; l < 4; l++ {
		if c.Local(l) != (l%2 == 0) {
			t.Errorf("layer %d local %v", l, c.Local(l))
		}
	}
	o.Dims.SlidingWindow, o.Dims.AttnSoftcap, o.Dims.FinalSoftcap = 80, 2, 3
	if c, err := ConfigFromGGUF(synthBuild(t, o)); err != nil || c.SWA != 80 || c.AttnSoftcap != 2 || c.FinalSoftcap != 3 {
		t.Fatalf("stated values: %+v, %v", c, err)
	}
	o.Dims.Layers, o.Dims.HeadDim = 46, 64
	if c, err := ConfigFromGGUF(synthBuild(t, o)); err != nil || c.AttnScale != float32(1/math.Sqrt(32)) {
		t.Fatalf("46 layers: scale %g, err %v; want 1/√(dim/heads)", c.AttnScale, err)
	}
}

// TestQwen3MoEConfig: a qwen3moe file's experts are read as llama.cpp
// reads them (the expert width from expert_feed_forward_length, else
// feed_forward_length / expert_used_count), and so are a llama file's
// (Mixtral: experts feed_forward_length wide); a count out of range and
// an expert weight scale are refused. (The mixture itself is checked
// against llama.cpp in model/verify's TestArchReferences; a llama file
// with experts runs the same code.)
func TestQwen3MoEConfig(t *testing.T) {
	mix := synthBuild(t, synth.Options{Arch: "llama", Dims: synth.Dims{Dim: 64, Layers: 2, Heads: 2, KVHeads: 1, FFN: 96, Vocab: 300, CtxLen: 512, Experts: 4, ExpertsUsed: 2}, Seed: 1})
	if c, err := ConfigFromGGUF(mix); err != nil || c.Experts != 4 || c.ExpertsUsed != 2 || c.ExpertFFN != 96 || c.RopeNeoX {
		t.Fatalf("llama with experts: %+v, %v", c, err)
	}
	if m, err := Load(mix, Options{Threads: 1}); err != nil {
		t.Fatalf("llama with experts: %v", err)
	} else {
		m.Close()
	}
	// A dense llama file that states expert_count = 0 stays dense.
	dense := rewrite(t, synthFile(t, "llama", ggml.TypeF32, 1), map[string]gguf.Value{"llama.expert_count": gguf.Uint32Value(0)}, nil)
	if c, err := ConfigFromGGUF(dense); err != nil || c.Experts != 0 {
		t.Fatalf("expert_count 0: %+v, %v", c, err)
	}
	o := synth.Options{Arch: "qwen3moe", Dims: synth.Dims{Dim: 64, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 64, FFN: 128, Vocab: 300, CtxLen: 512, Experts: 8, ExpertsUsed: 2, ExpertFFN: 32}, Seed: 1}
	f := synthBuild(t, o)
	c, err := ConfigFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.Experts != 8 || c.ExpertsUsed != 2 || c.ExpertFFN != 32 || !c.QKNorm || !c.RopeNeoX {
		t.Fatalf("config %+v", c)
	}
	for _, bad := range []struct {
		meta map[string]gguf.Value
		want string
		is   error
	}{
		{map[string]gguf.Value{"qwen3moe.expert_used_count": gguf.Uint32Value(9)}, "want 1 ≤ used ≤ count", nil},
		{map[string]gguf.Value{"qwen3moe.expert_weights_scale": gguf.Float32Value(2.5)}, "expert_weights_scale", ErrUnsupported},
	} {
		_, err := ConfigFromGGUF(rewrite(t, f, bad.meta, nil))
		if err == nil || !strings.Contains(err.Error(), bad.want) || bad.is != nil && !errors.Is(err, bad.is) {
			t.Errorf("%v: %v", bad.meta, err)
		}
	}
}

// TestMoEDecodeLayout: a qwen3moe model loaded as the server loads it
// (each expert's matrix in its decode layout) computes exactly the logits
// of the same file loaded row-major, for a prefill and decode steps, and a
// token's logits do not depend on the tokens beside it (each expert runs
// on the rows of the tokens that chose it).
func TestMoEDecodeLayout(t *testing.T) {
	o := synth.Options{Arch: "qwen3moe", Dims: synth.Dims{Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FFN: 256, Vocab: 520, CtxLen: 256, Experts: 8, ExpertsUsed: 3, ExpertFFN: 64}, Type: ggml.TypeQ4_0, Seed: 5}
	packed := synthLoadServed(t, o)
	defer packed.Close()
	ref := synthLoad(t, o)
	defer ref.Close()
	if cpu.Q4_0DecodeLayout(ggml.TypeQ4_0) && packed.DecodeLayout() < 2*3*8 {
		t.Fatalf("%d matrices in the decode layout", packed.DecodeLayout())
	}
	V := packed.Config().Vocab
	steps := layoutSteps(V)
	sameLogits(t, runSteps(t, packed, steps), runSteps(t, ref, steps))
	// Token by token: the same logits as the prefill of all 19.
	var one [][]int32
	for _, tok := range steps[0] {
		one = append(one, []int32{tok})
	}
	whole, single := runSteps(t, ref, steps[:1])[0], runSteps(t, ref, one)
	for i := range single {
		sameLogits(t, [][]float32{single[i]}, [][]float32{whole[i*V : (i+1)*V]})
	}
}

// TestPoolingConfig: `<arch>.pooling_type` is read as llama.cpp numbers it;
// absent is PoolUnset, and a number past rank is refused.
func TestPoolingConfig(t *testing.T) {
	base := synthFile(t, "qwen3", ggml.TypeF32, 5)
	if c, err := ConfigFromGGUF(base); err != nil || c.Pooling != PoolUnset {
		t.Fatalf("no pooling_type: %v, %v", c.Pooling, err)
	}
	for v, want := range []Pooling{PoolNone, PoolMean, PoolCLS, PoolLast, PoolRank} {
		f := rewrite(t, base, map[string]gguf.Value{"qwen3.pooling_type": gguf.Uint32Value(uint32(v))}, nil)
		if c, err := ConfigFromGGUF(f); err != nil || c.Pooling != want {
			t.Fatalf("pooling_type %d: %v, %v; want %v", v, c.Pooling, err, want)
		}
	}
	f := rewrite(t, base, map[string]gguf.Value{"qwen3.pooling_type": gguf.Uint32Value(5)}, nil)
	if _, err := ConfigFromGGUF(f); err == nil {
		t.Fatal("pooling_type 5 accepted")
	}
}

// TestPhi3Config: phi3 files read as llama's block with a fused gate/up
// matrix, and LongRoPE picks the long factors only when the context
// exceeds the original one.
func TestPhi3Config(t *testing.T) {
	for _, tc := range []struct {
		orig   int
		tensor string
		attn   float32
	}{{0, "", 0}, {512, "rope_factors_long.weight", 1.1055}, {4096, "rope_factors_short.weight", 1}} {
		f := synthBuild(t, synth.Options{Arch: "phi3", Dims: synth.Dims{Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300, CtxLen: 2048}, LongRope: tc.orig})
		c, err := ConfigFromGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		if !c.FusedUp || !c.RopeNeoX || c.RopeFactorsTensor() != tc.tensor || math.Abs(float64(c.RopeAttnFactor-tc.attn)) > 1e-4 {
			t.Fatalf("original context %d: fused up %v, neox %v, factors %q, attention factor %g", tc.orig, c.FusedUp, c.RopeNeoX, c.RopeFactorsTensor(), c.RopeAttnFactor)
		}
		if _, err := Load(f, Options{Threads: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestYarnConfig: rope.scaling.type yarn sets the interpolation scale and
// llama.cpp's YaRN constants (betas 32 and 1 over the original context,
// cos and sin grown by 1 + 0.1·ln factor); a yarn type without a factor is
// refused.
func TestYarnConfig(t *testing.T) {
	f := synthBuild(t, synth.Options{Arch: "qwen3", Dims: synth.Dims{Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300, CtxLen: 2048},
		YarnFactor: 4, YarnOrigCtx: 256})
	c, err := ConfigFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	y := c.YaRN()
	// 16·ln(256/(32·2π))/(2·ln 10000) = 0.21 → 0; 16·ln(256/2π)/(2·ln 10000) = 3.22 → 4.
	if !c.Yarn || c.RopeFreqScale != 0.25 || c.RopeOrigCtx != 256 || y.CorrLow != 0 || y.CorrHigh != 4 ||
		math.Abs(float64(y.MScale)-(1+0.1*math.Log(4))) > 1e-6 {
		t.Fatalf("yarn %v, freq scale %g, original context %d, rope %+v", c.Yarn, c.RopeFreqScale, c.RopeOrigCtx, y)
	}
	bad := rewrite(t, f, map[string]gguf.Value{"qwen3.rope.scaling.factor": gguf.Float32Value(0)}, nil)
	if _, err := ConfigFromGGUF(bad); err == nil {
		t.Fatal("yarn with factor 0 accepted")
	}
}

// TestMistral3Config: mistral3 reads YaRN's betas and log multiplier and
// the query temperature (1 within the original context, then growing by
// ln(⌊pos/orig⌋+1)·scale), and refuses biases it would not apply.
func TestMistral3Config(t *testing.T) {
	f := synthBuild(t, synth.Options{Arch: "mistral3", Dims: synth.Dims{Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300, CtxLen: 2048},
		YarnFactor: 4, YarnOrigCtx: 256, YarnLogMul: 1, YarnBetaFast: 4, YarnBetaSlow: 2, AttnTempScale: 0.1})
	c, err := ConfigFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Yarn || c.YarnBetaFast != 4 || c.YarnBetaSlow != 2 || c.YarnLogMul != 1 || c.AttnTempScale != 0.1 {
		t.Fatalf("config %+v", c)
	}
	if y := c.YaRN(); y.CorrLow != 2 || y.CorrHigh != 3 || math.Abs(float64(y.MScale)-1) > 1e-6 {
		t.Fatalf("yarn %+v (log multiplier 1: no growth)", y)
	}
	for _, tc := range []struct {
		pos  int32
		want float64
	}{{0, 1}, {255, 1}, {256, 1 + 0.1*math.Log(2)}, {1391, 1 + 0.1*math.Log(6)}} {
		if got := c.AttnTemp(tc.pos); math.Abs(float64(got)-tc.want) > 1e-6 {
			t.Fatalf("AttnTemp(%d) = %g, want %g", tc.pos, got, tc.want)
		}
	}
	biased := rewriteAdd(t, f, nil, nil, []extraTensor{{name: "blk.0.attn_output.bias", typ: ggml.TypeF32, data: f32Bytes(make([]float32, 64)), dims: []uint64{64}}})
	if _, err := ConfigFromGGUF(biased); err == nil {
		t.Fatal("a mistral3 bias accepted")
	}
}
