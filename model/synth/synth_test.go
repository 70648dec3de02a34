package synth

import (
	"bytes"
	"math"
	"testing"

	"oengine/ggml"
	"oengine/model/gguf"
	"oengine/model/llama"
	"oengine/model/tokenizer"
)

func buildTiny(t *testing.T, arch string, typ ggml.Type, seed uint64) *gguf.File {
	t.Helper()
	return buildOpen(t, Options{Arch: arch, Preset: "tiny", Type: typ, Seed: seed})
}

func buildOpen(t *testing.T, o Options) *gguf.File {
	t.Helper()
	data, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestBuildIsDeterministic(t *testing.T) {
	a, err := Build(Options{Arch: "llama", Preset: "tiny", Type: ggml.TypeQ8_0, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Build(Options{Arch: "llama", Preset: "tiny", Type: ggml.TypeQ8_0, Seed: 7})
	c, _ := Build(Options{Arch: "llama", Preset: "tiny", Type: ggml.TypeQ8_0, Seed: 8})
	if !bytes.Equal(a, b) {
		t.Fatal("same seed gave different files")
	}
	if bytes.Equal(a, c) {
		t.Fatal("different seeds gave the same file")
	}
}

// TestProgress checks that Progress counts every byte of tensor data once,
// ending at the total, and never goes backwards.
func TestProgress(t *testing.T) {
	var calls int
	var last, total int64
	o := Options{Arch: "llama", Preset: "tiny", Type: ggml.TypeQ8_0, Seed: 7, Progress: func(done, tot int64) {
		calls++
		if done < last || (total != 0 && tot != total) {
			t.Errorf("progress %d/%d after %d/%d", done, tot, last, total)
		}
		last, total = done, tot
	}}
	w, err := NewWriter(o)
	if err != nil {
		t.Fatal(err)
	}
	data, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, ti := range f.Tensors {
		want += int64(len(ti.Data))
	}
	if calls != len(f.Tensors) || last != want || total != want {
		t.Fatalf("%d calls ending at %d/%d; want %d calls ending at %d/%d", calls, last, total, len(f.Tensors), want, want)
	}
}

// TestModelsLoadAndPredict builds each architecture and weight type, loads
// it with the real loader and tokenizer, and checks the next-token
// distribution is usable: neither uniform nor a single spike.
func TestModelsLoadAndPredict(t *testing.T) {
	cases := []struct {
		arch string
		typ  ggml.Type
	}{
		{"llama", ggml.TypeF16}, {"llama", ggml.TypeQ8_0}, {"llama", ggml.TypeQ4_0},
		{"llama", ggml.TypeBF16}, {"qwen2", ggml.TypeQ8_0}, {"qwen3", ggml.TypeF32},
		{"llama", ggml.TypeQ4_K}, {"qwen2", ggml.TypeIQ4_XS},
	}
	for _, c := range cases {
		t.Run(c.arch+"-"+c.typ.String(), func(t *testing.T) {
			f := buildTiny(t, c.arch, c.typ, 1)
			if a, _ := f.String("general.architecture"); a != c.arch {
				t.Fatalf("architecture %q", a)
			}
			tok, err := tokenizer.FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			text := "hello world, the quick brown fox"
			ids := tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: true})
			if ids[0] != tok.BOS() {
				t.Fatalf("no BOS: %v", ids)
			}
			if got := string(tok.Decode(ids[1:])); got != text {
				t.Fatalf("round trip %q", got)
			}
			m, err := llama.Load(f, llama.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			cfg := m.Config()
			kv, err := m.NewKV(4, 16, llama.KVF16)
			if err != nil {
				t.Fatal(err)
			}
			n := len(ids)
			b := &llama.Batch{Tokens: ids, Pos: make([]int32, n), Seq: make([]int32, n),
				Seqs: [][]int32{{0, 1, 2, 3}}, Logits: []int32{int32(n - 1)}}
			for i := range b.Pos {
				b.Pos[i] = int32(i)
			}
			logits := make([]float32, cfg.Vocab)
			if err := m.Forward(kv, b, logits); err != nil {
				t.Fatal(err)
			}
			h, pmax := entropy(logits)
			uniform := math.Log(float64(cfg.Vocab))
			if h > 0.97*uniform || h < 0.5 || pmax > 0.9 {
				t.Fatalf("next-token distribution not usable: entropy %.2f (uniform %.2f), max p %.3f", h, uniform, pmax)
			}
		})
	}
}

// TestIQ4XSFallback: matrices whose rows are not whole IQ4_XS
// super-blocks are written as IQ4_NL, as llama-quantize does, and the file
// type says IQ4_XS.
func TestIQ4XSFallback(t *testing.T) {
	data, err := Build(Options{Arch: "llama", Dims: Dims{Dim: 384, Layers: 1, Heads: 6, KVHeads: 2, FFN: 1024, Vocab: 300, CtxLen: 64, RopeBase: 10000}, Type: ggml.TypeIQ4_XS, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if ft, _ := f.Uint("general.file_type"); ft != 30 {
		t.Errorf("file type %d, want 30 (IQ4_XS)", ft)
	}
	for name, want := range map[string]ggml.Type{
		"blk.0.attn_q.weight":    ggml.TypeIQ4_NL, // 384 columns
		"blk.0.ffn_down.weight":  ggml.TypeIQ4_XS, // 1024 columns
		"blk.0.attn_norm.weight": ggml.TypeF32,
	} {
		ti, ok := f.Tensor(name)
		if !ok || ti.Type != want {
			t.Errorf("%s: %v, want %s", name, ti, want)
		}
	}
}

func entropy(logits []float32) (h, pmax float64) {
	m := math.Inf(-1)
	for _, l := range logits {
		m = math.Max(m, float64(l))
	}
	var z float64
	for _, l := range logits {
		z += math.Exp(float64(l) - m)
	}
	for _, l := range logits {
		p := math.Exp(float64(l)-m) / z
		if p > 0 {
			h -= p * math.Log(p)
		}
		pmax = math.Max(pmax, p)
	}
	return h, pmax
}

func TestSyntheticVocab(t *testing.T) {
	v := SyntheticVocab(2000, 3)
	if len(v.Tokens) != 2000 || len(v.Types) != 2000 {
		t.Fatalf("size %d/%d", len(v.Tokens), len(v.Types))
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		t.Fatal(err)
	}
	text := "the quick brown fox jumps over the lazy dog"
	ids := tok.Encode(text, tokenizer.EncodeOptions{})
	if len(ids) >= len(text) {
		t.Fatalf("merges never apply: %d tokens for %d bytes", len(ids), len(text))
	}
	if string(tok.Decode(ids)) != text {
		t.Fatal("round trip failed")
	}
}

func TestOptionsErrors(t *testing.T) {
	bad := []Options{
		{Arch: "gpt", Preset: "tiny"},
		{Arch: "llama", Preset: "nope"},
		{Arch: "llama", Dims: Dims{Dim: 100, Layers: 1, Heads: 3, KVHeads: 1, FFN: 10, Vocab: 300, CtxLen: 10}},
		{Arch: "qwen3", Preset: "tiny", Pooling: "max"},
	}
	for i, o := range bad {
		if _, err := Build(o); err == nil {
			t.Errorf("case %d: want an error", i)
		}
	}
}

// TestPoolingType: --pooling writes llama.cpp's pooling_type number.
func TestPoolingType(t *testing.T) {
	for name, want := range map[string]uint64{"mean": 1, "cls": 2, "last": 3} {
		f := buildOpen(t, Options{Arch: "qwen3", Preset: "tiny", Pooling: name})
		if v, ok := f.Uint("qwen3.pooling_type"); !ok || v != want {
			t.Fatalf("pooling %s: pooling_type %d (%v), want %d", name, v, ok, want)
		}
	}
	if _, ok := buildOpen(t, Options{Arch: "qwen3", Preset: "tiny"}).Uint("qwen3.pooling_type"); ok {
		t.Fatal("pooling_type written without --pooling")
	}
}
