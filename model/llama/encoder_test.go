package llama

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"oengine/ggml"
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
	for _, arch := range []string{"bert", "nomic-bert"} {
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
	if c := synthModel(t, "nomic-bert", ggml.TypeF16).Config(); !c.Encoder || c.AbsPos || !c.RopeNeoX {
		t.Fatalf("nomic-bert config %+v", c)
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
