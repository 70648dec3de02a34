package llama

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"testing"

	"oengine/ggml"
	"oengine/model/synth"
)

// runChunks feeds tokens to one sequence in chunks of the given sizes (used
// in turn) and returns all logits [len(tokens)][Vocab].
func runChunks(t *testing.T, m *Model, kv *KV, table []int32, tokens []int32, chunks []int) []float32 {
	t.Helper()
	V := m.Config().Vocab
	out := make([]float32, len(tokens)*V)
	for pos, k := 0, 0; pos < len(tokens); k++ {
		n := min(chunks[k%len(chunks)], len(tokens)-pos)
		if err := m.Forward(kv, seqBatch(tokens[pos:pos+n], pos, table), out[pos*V:(pos+n)*V]); err != nil {
			t.Fatal(err)
		}
		pos += n
	}
	return out
}

// TestBatchInvariance checks that a token's logits are bitwise the same
// whether the sequence runs in one prefill, in odd chunks, token by token,
// or interleaved with another sequence in the same batches, for every
// architecture and KV type. The gemma3 cases run 100 tokens (prefill
// tiles start at f16AttnPositions) with windows of 24 (every local tile
// past 64 is cut: token by token; the global layer tiles) and 90 (local
// tiles before the window binds, cut ones after); gemma2's soft-capped
// attention runs every token through cpu.AttendWindow.
func TestBatchInvariance(t *testing.T) {
	gemma := func(window int) *synth.Options {
		return &synth.Options{Arch: "gemma3", Type: ggml.TypeQ8_0, Seed: 7,
			Dims: synth.Dims{Dim: 128, Layers: 6, Heads: 4, KVHeads: 2, FFN: 384, Vocab: 512, CtxLen: 2048, SlidingWindow: window}}
	}
	gemma2 := &synth.Options{Arch: "gemma2", Type: ggml.TypeQ8_0, Seed: 7,
		Dims: synth.Dims{Dim: 128, Layers: 2, Heads: 4, KVHeads: 2, FFN: 384, Vocab: 512, CtxLen: 2048, SlidingWindow: 24, AttnSoftcap: 2, FinalSoftcap: 3}}
	cases := []struct {
		arch string
		typ  ggml.Type
		kv   KVType
		o    *synth.Options // nil: synthModel's
		n    int            // tokens; 0: 40
	}{
		{"llama", ggml.TypeQ8_0, KVF16, nil, 0},
		{"llama", ggml.TypeF32, KVF32, nil, 0},
		{"qwen2", ggml.TypeQ4_0, KVF16, nil, 0},
		{"qwen3", ggml.TypeQ4_K, KVF16, nil, 0},
		{"qwen3moe", ggml.TypeQ8_0, KVF16, nil, 0},
		{"gemma3_w24", ggml.TypeQ8_0, KVF16, gemma(24), 100},
		{"gemma3_w90", ggml.TypeQ8_0, KVF16, gemma(90), 100},
		{"gemma2_w24_capped", ggml.TypeQ8_0, KVF16, gemma2, 100},
	}
	for _, c := range cases {
		t.Run(c.arch+"_"+c.typ.String()+"_"+c.kv.String(), func(t *testing.T) {
			var m *Model
			if c.o != nil {
				m = synthLoad(t, *c.o)
				defer m.Close()
			} else {
				m = synthModel(t, c.arch, c.typ)
			}
			V := m.Config().Vocab
			n := cmp.Or(c.n, 40)
			a := testTokens(n, V, 1)
			other := testTokens(n, V, 2)

			kv, err := m.NewKV(32, 8, c.kv)
			if err != nil {
				t.Fatal(err)
			}
			tableA := []int32{3, 0, 7, 5, 11, 12, 13, 14, 15, 16, 17, 18, 19}
			want := runChunks(t, m, kv, tableA, a, []int{n})
			for _, chunks := range [][]int{{1}, {3, 17, 1, 5}, {8}} {
				got := runChunks(t, m, kv, tableA, a, chunks)
				if i := firstDiff(got, want); i >= 0 {
					t.Fatalf("chunks %v: logits differ at %d (token %d): %g vs %g", chunks, i, i/V, got[i], want[i])
				}
			}

			// Interleave: each batch holds a chunk of A and a chunk of B (B in
			// other pages), logits asked in a shuffled order.
			tableB := []int32{1, 2, 4, 6, 8, 9, 10, 20, 21, 22, 23, 24, 25}
			got := make([]float32, n*V)
			out := make([]float32, 2*9*V)
			for pos, k := 0, 0; pos < n; k++ {
				na := min(1+k%9, n-pos)
				b := &Batch{Seqs: [][]int32{tableB, tableA}}
				for i := 0; i < na; i++ {
					b.Tokens = append(b.Tokens, other[pos+i], a[pos+i])
					b.Pos = append(b.Pos, int32(pos+i), int32(pos+i))
					b.Seq = append(b.Seq, 0, 1)
				}
				for i := na - 1; i >= 0; i-- {
					b.Logits = append(b.Logits, int32(2*i+1), int32(2*i))
				}
				if err := m.Forward(kv, b, out); err != nil {
					t.Fatal(err)
				}
				for j := 0; j < na; j++ {
					i := na - 1 - j // Logits[2j] is A's token i
					copy(got[(pos+i)*V:(pos+i+1)*V], out[2*j*V:(2*j+1)*V])
				}
				pos += na
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("interleaved: logits differ at %d (token %d): %g vs %g", i, i/V, got[i], want[i])
			}
		})
	}
}

func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestKVTypesAgree checks that F32 and F16 K/V stores give close logits (the
// F16 rounding is the only difference) and that they are not identical (the
// rounding really happens).
func TestKVTypesAgree(t *testing.T) {
	m := synthModel(t, "llama", ggml.TypeF32)
	V := m.Config().Vocab
	toks := testTokens(30, V, 3)
	kv16, _ := m.NewKV(4, 16, KVF16)
	kv32, _ := m.NewKV(4, 16, KVF32)
	a := runChunks(t, m, kv16, []int32{2, 1}, toks, []int{30})
	b := runChunks(t, m, kv32, []int32{0, 3}, toks, []int{30})
	var maxErr float64
	for i := range a {
		maxErr = math.Max(maxErr, math.Abs(float64(a[i]-b[i])))
	}
	if maxErr == 0 || maxErr > 0.05 {
		t.Fatalf("max |f16 - f32| logit difference %g, want in (0, 0.05]", maxErr)
	}
}

// TestCopyPage forks a sequence: a copy of its partly filled last page lets
// a second sequence continue from the same prefix with the same logits.
func TestCopyPage(t *testing.T) {
	m := synthModel(t, "qwen3", ggml.TypeQ8_0)
	V := m.Config().Vocab
	toks := testTokens(20, V, 4)
	kv, _ := m.NewKV(6, 8, KVF16)
	// Prefix of 12 tokens in pages 0 (full) and 1 (half).
	runChunks(t, m, kv, []int32{0, 1}, toks[:12], []int{12})
	kv.CopyPage(4, 1)
	// Continue both from position 12 with the same tokens.
	la := make([]float32, 8*V)
	lb := make([]float32, 8*V)
	if err := m.Forward(kv, seqBatch(toks[12:20], 12, []int32{0, 1, 2}), la); err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(kv, seqBatch(toks[12:20], 12, []int32{0, 4, 5}), lb); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(la, lb); i >= 0 {
		t.Fatalf("forked sequence differs at %d", i)
	}
	// Without the copy, the fork reads an empty page and differs.
	kv2, _ := m.NewKV(6, 8, KVF16)
	runChunks(t, m, kv2, []int32{0, 1}, toks[:12], []int{12})
	if err := m.Forward(kv2, seqBatch(toks[12:20], 12, []int32{0, 4, 5}), lb); err != nil {
		t.Fatal(err)
	}
	if firstDiff(la, lb) < 0 {
		t.Fatal("fork without CopyPage gave the same logits: the test proves nothing")
	}
}

func TestForwardRejectsBadBatches(t *testing.T) {
	m := synthModel(t, "llama", ggml.TypeQ8_0)
	V := m.Config().Vocab
	kv, _ := m.NewKV(4, 8, KVF16)
	other := synthModel(t, "qwen3", ggml.TypeQ8_0)
	otherKV, _ := other.NewKV(4, 8, KVF16)
	ok := func() *Batch { return seqBatch([]int32{1, 2, 3}, 0, []int32{0, 1}) }
	logits := make([]float32, 3*V)
	cases := []struct {
		name   string
		kv     *KV
		edit   func(b *Batch)
		logits []float32
	}{
		{"token_out_of_vocab", kv, func(b *Batch) { b.Tokens[1] = int32(V) }, logits},
		{"negative_token", kv, func(b *Batch) { b.Tokens[0] = -1 }, logits},
		{"length_mismatch", kv, func(b *Batch) { b.Pos = b.Pos[:2] }, logits},
		{"bad_seq_index", kv, func(b *Batch) { b.Seq[2] = 1 }, logits},
		{"negative_pos", kv, func(b *Batch) { b.Pos[0] = -1 }, logits},
		{"pos_past_table", kv, func(b *Batch) { b.Pos[2] = 16 }, logits},
		{"page_out_of_range", kv, func(b *Batch) { b.Seqs[0][1] = 4 }, logits},
		{"negative_page", kv, func(b *Batch) { b.Seqs[0][0] = -2 }, logits},
		{"logits_index", kv, func(b *Batch) { b.Logits[0] = 3 }, logits},
		{"logits_short", kv, func(b *Batch) {}, logits[:3*V-1]},
		{"kv_of_other_model", otherKV, func(b *Batch) {}, logits},
		{"nil_kv", nil, func(b *Batch) {}, logits},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := ok()
			c.edit(b)
			err := m.Forward(c.kv, b, c.logits)
			if !errors.Is(err, ErrBadBatch) {
				t.Fatalf("err = %v, want ErrBadBatch", err)
			}
		})
	}
	if err := m.Forward(kv, ok(), logits); err != nil {
		t.Fatalf("valid batch: %v", err)
	}
	if err := m.Forward(kv, &Batch{}, nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
}

// TestForwardNoAllocs checks that decode steps allocate nothing once the
// scratch arena has grown, on both attention paths (positions below and
// above f16AttnPositions), for qwen2, gemma3 (a window of 64: position
// 100 attends through it) and qwen3moe (the mixture of experts).
func TestForwardNoAllocs(t *testing.T) {
	for _, m := range []*Model{
		synthModel(t, "qwen2", ggml.TypeQ8_0),
		synthLoad(t, synth.Options{Arch: "gemma3", Type: ggml.TypeQ8_0, Seed: 7,
			Dims: synth.Dims{Dim: 128, Layers: 2, Heads: 4, KVHeads: 2, FFN: 384, Vocab: 512, CtxLen: 2048, SlidingWindow: 64}}),
		synthModel(t, "qwen3moe", ggml.TypeQ8_0),
	} {
		c := m.Config()
		if c.Gemma {
			defer m.Close() // synthLoad leaves it to the caller
		}
		t.Run(c.Arch, func(t *testing.T) {
			V := c.Vocab
			kv, _ := m.NewKV(10, 16, KVF16)
			table := []int32{0, 1, 2, 3, 4, 5, 6, 7}
			runChunks(t, m, kv, table, testTokens(100, V, 5), []int{100})
			logits := make([]float32, 2*V)
			b := &Batch{Tokens: []int32{7, 9}, Pos: []int32{100, 10}, Seq: []int32{0, 1},
				Seqs: [][]int32{table, {8}}, Logits: []int32{0, 1}}
			allocs := testing.AllocsPerRun(20, func() {
				if err := m.Forward(kv, b, logits); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("decode step allocates %v times", allocs)
			}
		})
	}
}

// TestLogitsSubset checks that asking for a subset of logits returns the
// same rows as asking for all.
func TestLogitsSubset(t *testing.T) {
	m := synthModel(t, "llama", ggml.TypeQ4_K)
	V := m.Config().Vocab
	toks := testTokens(10, V, 6)
	kv, _ := m.NewKV(2, 16, KVF16)
	all := runChunks(t, m, kv, []int32{1}, toks, []int{10})
	b := seqBatch(toks, 0, []int32{1})
	b.Logits = []int32{9, 4}
	out := make([]float32, 2*V)
	if err := m.Forward(kv, b, out); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out[:V], all[9*V:10*V]) || !slices.Equal(out[V:], all[4*V:5*V]) {
		t.Fatal("subset logits differ from the full run")
	}
}

// TestConcurrentForward runs two sequences from two goroutines on one model
// (Forward serializes them) and checks each gets the logits of a solo run.
func TestConcurrentForward(t *testing.T) {
	m := synthModel(t, "qwen3", ggml.TypeQ8_0)
	V := m.Config().Vocab
	toks := [2][]int32{testTokens(24, V, 11), testTokens(24, V, 12)}
	var want [2][]float32
	for i := range toks {
		kv, _ := m.NewKV(2, 16, KVF16)
		want[i] = runChunks(t, m, kv, []int32{0, 1}, toks[i], []int{5})
	}
	kvs := [2]*KV{}
	for i := range kvs {
		kvs[i], _ = m.NewKV(2, 16, KVF16)
	}
	var got [2][]float32
	errs := make(chan error, 2)
	for i := range toks {
		go func() {
			out := make([]float32, 24*V)
			for pos := 0; pos < 24; pos += 3 {
				if err := m.Forward(kvs[i], seqBatch(toks[i][pos:pos+3], pos, []int32{1, 0}), out[pos*V:(pos+3)*V]); err != nil {
					errs <- err
					return
				}
			}
			got[i] = out
			errs <- nil
		}()
	}
	for range toks {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range toks {
		if j := firstDiff(got[i], want[i]); j >= 0 {
			t.Fatalf("sequence %d: logits differ at %d", i, j)
		}
	}
}
