package llama

import (
	"math"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/model/gguf"
	"oengine/model/synth"
)

// TestDecodeLayoutBitwise: a Q4_0, Q8_0 or Q4_K_M model loaded from a
// private copy (gguf.OpenCopy) has its Q4_0 / Q8_0 / Q4_K linear weights rewritten into
// their decode layouts where the CPU has the kernels, and computes exactly
// the logits of the row-major model (mapped file) for a prefill and decode
// steps; a tied output matrix (the token embedding) is packed too and its
// lookups allocate nothing; a second Load of the rewritten file is
// refused; RowMajor keeps the layout; no goroutine outlives the models.
func TestDecodeLayoutBitwise(t *testing.T) {
	for _, c := range []struct {
		file   string
		typ    ggml.Type
		packed int // matrices per layer at least
	}{
		{"tiny-llama-q4_0.gguf", ggml.TypeQ4_0, 7}, {"tiny-llama-q8_0.gguf", ggml.TypeQ8_0, 7}, {"tiny-qwen2-q8_0.gguf", ggml.TypeQ8_0, 7},
		{"tiny-llama-q4_k_m.gguf", ggml.TypeQ4_K, 1}, {"tiny-qwen3-q4_k_m.gguf", ggml.TypeQ4_K, 1},
	} {
		t.Run(c.file, func(t *testing.T) { testDecodeLayoutBitwise(t, c.file, c.typ, c.packed) })
	}
}

func testDecodeLayoutBitwise(t *testing.T, file string, typ ggml.Type, packed int) {
	path := filepath.Join(sharedModels(t), file)
	// Every goroutine the loads start (pools, the rewrite) ends once the
	// models are closed (Cleanup runs after the deferred Closes).
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				t.Fatalf("goroutines: %d after closing, %d before loading", runtime.NumGoroutine(), base)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	ref, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	mRef, err := Load(ref, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer mRef.Close()
	if mRef.DecodeLayout() != 0 {
		t.Fatal("mapped file rewritten")
	}
	cp, err := gguf.OpenCopy(path)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	m, err := Load(cp, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Config()
	if cpu.Q4_0DecodeLayout(ggml.TypeQ4_0) {
		if m.DecodeLayout() < packed*c.Layers {
			t.Fatalf("%d matrices in the decode layout, want at least %d", m.DecodeLayout(), packed*c.Layers)
		}
		t.Logf("%d %s-file matrices in the decode layout", m.DecodeLayout(), typ)
	} else if m.DecodeLayout() != 0 {
		t.Fatal("decode layout without its kernels")
	}
	if _, err := Load(cp, Options{Threads: 1}); err == nil && cp.Claimed() {
		t.Fatal("second Load of a rewritten file accepted")
	}
	cp2, err := gguf.OpenCopy(path)
	if err != nil {
		t.Fatal(err)
	}
	defer cp2.Close()
	mRM, err := Load(cp2, Options{Threads: 1, RowMajor: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mRM.Close()
	if mRM.DecodeLayout() != 0 {
		t.Fatal("RowMajor model rewritten")
	}

	steps := [][]int32{testTokens(21, c.Vocab, 7)}
	for s := 0; s < 5; s++ {
		steps = append(steps, []int32{int32(s * 7 % c.Vocab)})
	}
	sameLogits(t, runSteps(t, m, steps), runSteps(t, mRef, steps))
	if c.TiedOut && m.DecodeLayout() > 0 {
		// A tied output matrix is packed with the rest; the embedding
		// lookup copies its rows out into the forward's scratch.
		if !m.tokEmb.DecodeLayout() {
			t.Fatal("tied token embedding left row-major")
		}
		kv, err := m.NewKV(4, 16, KVF16)
		if err != nil {
			t.Fatal(err)
		}
		logits := make([]float32, 2*c.Vocab)
		b := seqBatch([]int32{3, 5}, 0, []int32{0, 1, 2, 3})
		b.Logits = []int32{0, 1}
		if err := m.Forward(kv, b, logits); err != nil {
			t.Fatal(err)
		}
		if allocs := testing.AllocsPerRun(5, func() { _ = m.Forward(kv, b, logits) }); allocs != 0 {
			t.Fatalf("a step over the packed tied embedding allocates %v times", allocs)
		}
	}
}

// runSteps runs the batches of tokens steps one after the other through a
// fresh four-page cache of m (one sequence, positions continuing) and
// returns each step's logits.
func runSteps(t *testing.T, m *Model, steps [][]int32) [][]float32 {
	t.Helper()
	kv, err := m.NewKV(4, 16, KVF16)
	if err != nil {
		t.Fatal(err)
	}
	table := []int32{0, 1, 2, 3}
	V := m.Config().Vocab
	var out [][]float32
	pos := 0
	for _, toks := range steps {
		l := make([]float32, len(toks)*V)
		if err := m.Forward(kv, seqBatch(toks, pos, table), l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
		pos += len(toks)
	}
	return out
}

// sameLogits fails t unless the decode-layout model's logits got are
// bitwise the row-major model's want, step by step.
func sameLogits(t *testing.T, got, want [][]float32) {
	t.Helper()
	for s := range want {
		for i := range want[s] {
			if math.Float32bits(got[s][i]) != math.Float32bits(want[s][i]) {
				t.Fatalf("step %d logit %d: %g, want %g", s, i, got[s][i], want[s][i])
			}
		}
	}
}

// TestDecodeLayoutTypes: synthetic Q4_0, Q5_0, Q5_1, Q8_0, Q2_K to Q6_K,
// IQ4_NL and BF16 (converted to F16, cpu.PackBF16) models (rows of
// 256 and 768 columns, whole groups of 16 rows and, in the output layer,
// a row-major tail) loaded as the server loads them compute exactly the
// logits of the same file loaded row-major, for a prefill and decode
// steps of one and three tokens.
func TestDecodeLayoutTypes(t *testing.T) {
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ5_0, ggml.TypeQ5_1, ggml.TypeQ8_0, ggml.TypeQ2_K, ggml.TypeQ3_K, ggml.TypeQ4_K, ggml.TypeQ5_K, ggml.TypeQ6_K, ggml.TypeBF16, ggml.TypeIQ4_NL} {
		t.Run(typ.String(), func(t *testing.T) {
			o := synth.Options{Dims: synth.Dims{Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FFN: 768, Vocab: 520, CtxLen: 256, RopeBase: 10000}, Type: typ, Seed: 5}
			packed := synthLoadServed(t, o)
			defer packed.Close()
			ref := synthLoad(t, o)
			defer ref.Close()
			if cpu.Q4_0DecodeLayout(ggml.TypeQ4_0) && packed.DecodeLayout() < 7*2 {
				t.Fatalf("%d matrices in the decode layout", packed.DecodeLayout())
			}
			if ref.DecodeLayout() != 0 {
				t.Fatal("parsed file rewritten")
			}
			steps := layoutSteps(packed.Config().Vocab)
			sameLogits(t, runSteps(t, packed, steps), runSteps(t, ref, steps))
		})
	}
}

// layoutSteps are the steps the decode-layout tests run: a prefill of 19
// tokens, then steps of one, three and one.
func layoutSteps(vocab int) [][]int32 {
	steps := [][]int32{testTokens(19, vocab, 3)}
	pos := 19
	for _, n := range []int{1, 3, 1} {
		steps = append(steps, testTokens(n, vocab, uint32(pos)))
		pos += n
	}
	return steps
}
