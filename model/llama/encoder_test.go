package llama

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/model/gguf"
	"oengine/model/synth"
)

// encodeSeqs runs whole sequences through an encoder in one batch
// (pages of 16 positions, in order) and returns every token's hidden
// state, sequence after sequence.
func encodeSeqs(t *testing.T, m *Model, kv *KV, seqs ...[]int32) [][]float32 {
	t.Helper()
	b := &Batch{}
	page := int32(0)
	for s, toks := range seqs {
		var table []int32
		for range (len(toks) + 15) / 16 {
			table = append(table, page)
			page++
		}
		b.Seqs = append(b.Seqs, table)
		for p, tok := range toks {
			b.Hidden = append(b.Hidden, int32(len(b.Tokens)))
			b.Tokens, b.Pos, b.Seq = append(b.Tokens, tok), append(b.Pos, int32(p)), append(b.Seq, int32(s))
		}
	}
	D := m.Config().Dim
	hidden := make([]float32, len(b.Tokens)*D)
	if err := m.ForwardHidden(kv, b, nil, hidden); err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, len(b.Tokens))
	for i := range out {
		out[i] = hidden[i*D : (i+1)*D]
	}
	return out
}

// TestEncoderAttendsBothWays: an encoder's first token depends on the
// tokens after it (no causal mask), a sequence's states do not depend on
// the other sequences of its batch (bit for bit, whatever runs beside it),
// and the output is LayerNorm-ed (each row's mean about the bias's).
// The llama.cpp references are engine's TestEncoderLlamaCppReference.
func TestEncoderAttendsBothWays(t *testing.T) {
	for _, arch := range []string{"bert", "nomic-bert", "modern-bert"} {
		m := synthModel(t, arch, ggml.TypeF16)
		kv, err := m.NewKV(64, 16, KVF16)
		if err != nil {
			t.Fatal(err)
		}
		a := []int32{5, 17, 99, 3, 42, 7, 250, 11}
		b := slices.Clone(a)
		b[len(b)-1] = 300 // only the last token differs
		ha, hb := encodeSeqs(t, m, kv, a), encodeSeqs(t, m, kv, b)
		if slices.Equal(ha[0], hb[0]) {
			t.Fatalf("%s: the first token's state ignores the last token (a causal mask?)", arch)
		}
		long := make([]int32, 40)
		for i := range long {
			long[i] = int32(i*37%500 + 1)
		}
		mixed := encodeSeqs(t, m, kv, long, a, b[:3])
		for i := range a {
			if !slices.Equal(mixed[len(long)+i], ha[i]) {
				t.Fatalf("%s: token %d of a sequence batched with others differs from alone", arch, i)
			}
		}
	}
}

// TestEncoderBadBatches: an encoder refuses a sequence that is not whole
// in the batch (a chunk, a gap, split runs) and any logits.
func TestEncoderBadBatches(t *testing.T) {
	m := synthModel(t, "bert", ggml.TypeF16)
	kv, err := m.NewKV(8, 16, KVF16)
	if err != nil {
		t.Fatal(err)
	}
	D, V := m.Config().Dim, m.Config().Vocab
	for _, tc := range []struct {
		name     string
		pos, seq []int32
		logits   []int32
		want     string
	}{
		{"a later chunk", []int32{3, 4}, []int32{0, 0}, nil, "whole sequences"},
		{"a gap", []int32{0, 2}, []int32{0, 0}, nil, "whole sequences"},
		{"split runs", []int32{0, 0, 1}, []int32{0, 1, 0}, nil, "whole sequences"},
		{"logits", []int32{0, 1}, []int32{0, 0}, []int32{1}, "not logits"},
	} {
		b := &Batch{Tokens: make([]int32, len(tc.pos)), Pos: tc.pos, Seq: tc.seq, Seqs: [][]int32{{0}, {1}}, Logits: tc.logits}
		err := m.ForwardHidden(kv, b, make([]float32, len(tc.logits)*V), make([]float32, len(tc.pos)*D))
		if !errors.Is(err, ErrBadBatch) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrBadBatch about %q", tc.name, err, tc.want)
		}
	}
}

// TestEncoderConfig: the encoders' metadata (LayerNorm epsilon, a causal
// flag) and their refusals.
func TestEncoderConfig(t *testing.T) {
	m := synthModel(t, "bert", ggml.TypeF16)
	c := m.Config()
	if !c.Encoder || !c.AbsPos || c.NormEps != 1e-12 {
		t.Fatalf("bert config %+v", c)
	}
	// A page holds one layer's K/V (the next layer writes over them).
	if got, want := m.KVBytesPerPage(16, KVF16), int64(16*c.KVDim()*2*2); got != want || c.Layers < 2 {
		t.Fatalf("an encoder's page: %d bytes, want %d (one layer of %d)", got, want, c.Layers)
	}
	if c := synthModel(t, "nomic-bert", ggml.TypeF16).Config(); !c.Encoder || c.AbsPos || !c.RopeNeoX {
		t.Fatalf("nomic-bert config %+v", c)
	}
	// ModernBERT: pre-norm, a window on two layers of three, layer 0
	// global (dense first), the local layers' own rope base.
	mc := synthModel(t, "modern-bert", ggml.TypeF16).Config()
	if !mc.Encoder || !mc.PreNorm || mc.SWA != 128 || mc.Local(0) || !mc.Local(1) || !mc.Local(2) || mc.Local(3) ||
		mc.RopeBaseSWA != 10000 || mc.EncoderSiLU {
		t.Fatalf("modern-bert config %+v", mc)
	}
	f := synthBuild(t, synth.Options{Arch: "bert", Preset: "tiny", Type: ggml.TypeF16, Seed: 7})
	causal := rewrite(t, f, map[string]gguf.Value{"bert.attention.causal": gguf.BoolValue(true)}, nil)
	if _, err := ConfigFromGGUF(causal); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a causal bert: %v, want ErrUnsupported", err)
	}
	noPos := rewrite(t, f, nil, func(ti *gguf.TensorInfo) (ggml.Type, []uint64, []byte) {
		if ti.Name == "position_embd.weight" {
			return 0, nil, nil
		}
		return ti.Type, ti.Dims, ti.Data
	})
	if _, err := Load(noPos, Options{Threads: 1}); err == nil || !strings.Contains(err.Error(), "position_embd") {
		t.Fatalf("bert without position_embd: %v", err)
	}
	if _, err := Load(f, Options{Threads: 1, GGMLArithmetic: true}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("GGML arithmetic mode for an encoder: %v", err)
	}
}

// encodeTyped is encodeSeqs for one sequence with token types.
func encodeTyped(t *testing.T, m *Model, toks []int32, types []uint8) ([]float32, error) {
	t.Helper()
	kv, err := m.NewKV(8, 16, KVF16)
	if err != nil {
		t.Fatal(err)
	}
	n := len(toks)
	b := &Batch{Tokens: toks, Pos: make([]int32, n), Seq: make([]int32, n), Seqs: [][]int32{{0, 1, 2, 3}}, Types: types}
	for i := range b.Pos {
		b.Pos[i] = int32(i)
		b.Hidden = append(b.Hidden, int32(i))
	}
	hidden := make([]float32, n*m.Config().Dim)
	return hidden, m.ForwardHidden(kv, b, nil, hidden)
}

// TestEncoderTokenTypes: a token of type 1 adds token_types' second row:
// all tokens of type 1 give the states that type 0 gives once the file's
// first row is replaced by its second; mixed types give others; a type
// the model lacks is refused.
func TestEncoderTokenTypes(t *testing.T) {
	f := synthBuild(t, synth.Options{Arch: "bert", Preset: "tiny", Type: ggml.TypeF16, Seed: 7})
	m, err := Load(f, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Config().TokenTypes != 2 {
		t.Fatalf("%d token types, want 2", m.Config().TokenTypes)
	}
	swapped := rewrite(t, f, nil, func(ti *gguf.TensorInfo) (ggml.Type, []uint64, []byte) {
		if ti.Name != "token_types.weight" {
			return ti.Type, ti.Dims, ti.Data
		}
		row := len(ti.Data) / 2
		data := slices.Concat(ti.Data[row:], ti.Data[row:]) // row 0 := row 1
		return ti.Type, ti.Dims, data
	})
	ms, err := Load(swapped, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	toks := []int32{5, 17, 99, 3, 42}
	ones, err := encodeTyped(t, m, toks, []uint8{1, 1, 1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	want, err := encodeTyped(t, ms, toks, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ones, want) {
		t.Fatal("type 1 is not token_types' second row")
	}
	zeros, _ := encodeTyped(t, m, toks, nil)
	mixed, _ := encodeTyped(t, m, toks, []uint8{0, 0, 0, 1, 1})
	if slices.Equal(mixed, zeros) || slices.Equal(mixed, ones) {
		t.Fatal("mixed token types give the states of one type")
	}
	if _, err := encodeTyped(t, m, toks, []uint8{0, 2, 0, 0, 0}); !errors.Is(err, ErrBadBatch) {
		t.Fatalf("type 2 of 2: %v", err)
	}
	if _, err := encodeTyped(t, m, toks, []uint8{0, 0}); !errors.Is(err, ErrBadBatch) {
		t.Fatalf("2 types for 5 tokens: %v", err)
	}
}

// TestEncoderRank: a classification head is tanh(W·x + b) then W'·h + b'
// (float64 formula over the F32 weights), and a model without one refuses.
func TestEncoderRank(t *testing.T) {
	f := synthBuild(t, synth.Options{Arch: "bert", Preset: "tiny", Type: ggml.TypeF32, Seed: 9, Rerank: true})
	m, err := Load(f, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Config()
	if c.RankOutputs != 1 || c.Pooling != PoolRank {
		t.Fatalf("rank outputs %d, pooling %v", c.RankOutputs, c.Pooling)
	}
	tensor := func(name string) []float32 {
		ti, _ := f.Tensor(name)
		v := make([]float32, ti.Elements())
		if err := cpu.Dequantize(ti.Type, ti.Data, v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	W, b, Wo, bo := tensor("cls.weight"), tensor("cls.bias"), tensor("cls.output.weight"), tensor("cls.output.bias")
	x := make([]float32, c.Dim)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	want := float64(bo[0])
	for r := 0; r < c.Dim; r++ {
		s := float64(b[r])
		for j := 0; j < c.Dim; j++ {
			s += float64(W[r*c.Dim+j]) * float64(x[j])
		}
		want += float64(Wo[r]) * math.Tanh(s)
	}
	got := make([]float32, 1)
	if err := m.Rank(got, x); err != nil {
		t.Fatal(err)
	}
	if math.Abs(float64(got[0])-want) > 1e-4*(1+math.Abs(want)) {
		t.Fatalf("score %g, want %g", got[0], want)
	}
	if err := synthModel(t, "bert", ggml.TypeF16).Rank(got, x); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a model without a head: %v", err)
	}
}
