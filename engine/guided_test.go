package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"regexp"
	"testing"

	"oengine/grammar"
	"oengine/sampling"
)

// fakeConstraint compiles a regex over the fake vocabulary (id 0 is the
// end-of-generation token).
func fakeConstraint(t *testing.T, vocab int, pattern string) *grammar.Index {
	t.Helper()
	d, err := grammar.CompileRegex(pattern)
	if err != nil {
		t.Fatal(err)
	}
	pieces := make([][]byte, vocab)
	for id := range pieces {
		pieces[id] = []byte(fakeTok{}.piece(int32(id)))
	}
	return grammar.NewIndex(d, grammar.NewVocab(pieces, []int32{0}))
}

// TestConstrained: seeded generations at temperature 1 under a regex all
// match it and finish with reason stop (grammar or EOS); free requests in
// the same batches produce exactly what they produce alone.
func TestConstrained(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 512}
	e := newFakeEngine(t, Config{}, m)
	const pattern = `(ab|cd)[a-f]{2,6}( x)?`
	full := regexp.MustCompile(`^(?:` + pattern + `)$`)
	c := fakeConstraint(t, 64, pattern)
	free := Request{Prompt: "the free one", MaxTokens: 12, Sampling: greedy(), Stop: StopParams{IgnoreEOS: true}}
	alone := run(t, e, free)
	lengths := map[int]bool{}
	for seed := range 20 {
		s := uint64(seed)
		cons, err := e.Submit(context.Background(), Request{Prompt: "hello", MaxTokens: 40, N: 2,
			Sampling: sampling.Options{Temperature: ptr(1.0), Seed: &s}, Constraint: c})
		if err != nil {
			t.Fatal(err)
		}
		fr, err := e.Submit(context.Background(), free)
		if err != nil {
			t.Fatal(err)
		}
		got := collect(t, cons, 2)
		if got.err != nil {
			t.Fatalf("seed %d: %v", seed, got.err)
		}
		for k := range 2 {
			if !full.MatchString(got.text[k]) {
				t.Fatalf("seed %d output %d: %q does not match %s", seed, k, got.text[k], pattern)
			}
			if f := got.finish[k]; f.Reason != FinishStop || (f.Kind != StopGrammar && f.Kind != StopEOS) {
				t.Fatalf("seed %d output %d finished %v/%v", seed, k, f.Reason, f.Kind)
			}
			lengths[len(got.text[k])] = true
		}
		if f := collect(t, fr, 1); !equalTokens(f.tokens[0], alone.tokens[0]) {
			t.Fatalf("free request beside a constrained one: %v, alone %v", f.tokens[0], alone.tokens[0])
		}
	}
	if len(lengths) < 3 {
		t.Fatalf("output lengths %v: sampling at temperature 1 should vary inside the constraint", lengths)
	}
	checkLedger(t, e)
}

// TestConstrainedMinTokensAndIgnoreEOS: the constraint ends the output even
// when min_tokens or ignore_eos would hold back EOS.
func TestConstrainedMinTokensAndIgnoreEOS(t *testing.T) {
	e := newFakeEngine(t, Config{}, &fakeModel{vocab: 64, ctx: 512})
	c := fakeConstraint(t, 64, `abc`)
	for _, r := range []Request{
		{Prompt: "x", MaxTokens: 30, MinTokens: 10, Constraint: c},
		{Prompt: "x", MaxTokens: 30, Stop: StopParams{IgnoreEOS: true}, Constraint: c},
	} {
		got := run(t, e, r)
		if got.err != nil || got.text[0] != "abc" || got.finish[0].Reason != FinishStop {
			t.Fatalf("%q %+v %v", got.text[0], got.finish[0], got.err)
		}
	}
	checkLedger(t, e)
}

// TestConstraintRefused: a constraint for another vocabulary is refused
// before acceptance; one the vocabulary cannot spell fails the request
// with one terminal error and no leak.
func TestConstraintRefused(t *testing.T) {
	e := newFakeEngine(t, Config{}, &fakeModel{vocab: 64, ctx: 512})
	if _, err := e.Submit(context.Background(), Request{Prompt: "x", Constraint: fakeConstraint(t, 60, `a`)}); err == nil || err.(*Error).Code != CodeInvalidArgument {
		t.Fatalf("other vocabulary: %v", err)
	}
	got := run(t, e, Request{Prompt: "x", MaxTokens: 5, Constraint: fakeConstraint(t, 64, `ab9`)})
	if got.err == nil || got.err.Code != CodeInternal || got.text[0] != "ab" {
		t.Fatalf("unspellable: %q %v", got.text[0], got.err)
	}
	checkLedger(t, e)
}

// applyMaskReference is applyMask's plain twin: every token tested.
func applyMaskReference(row []float32, m grammar.Mask) ([]float32, bool) {
	d := make([]float32, len(row))
	allowed := false
	for i := range row {
		if m.Has(int32(i)) {
			d[i], allowed = row[i], true
		} else {
			d[i] = float32(math.Inf(-1))
		}
	}
	return d, allowed
}

// TestApplyMask compares applyMask with its twin on masks of every density
// (empty, sparse, dense and full words), vocabularies that end mid-word,
// and masks with bits set beyond the vocabulary.
func TestApplyMask(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var dst []float32
	for trial := range 300 {
		n := 1 + r.IntN(700)
		row := make([]float32, n)
		for i := range row {
			row[i] = float32(i) - 100
		}
		m := grammar.NewMask(n + 64*r.IntN(2)) // sometimes a word longer than the vocabulary
		density := r.Float64() * r.Float64()
		if trial%5 == 0 {
			density = 1 - density
		}
		for i := 0; i < len(m)*64; i++ {
			if r.Float64() < density {
				m[i>>6] |= 1 << (uint(i) & 63)
			}
		}
		want, wantAny := applyMaskReference(row, m)
		gotAny := applyMask(&dst, row, m)
		if gotAny != wantAny || len(dst) != n {
			t.Fatalf("trial %d: allowed %v (reference %v), length %d of %d", trial, gotAny, wantAny, len(dst), n)
		}
		for i := range want {
			if dst[i] != want[i] {
				t.Fatalf("trial %d (n %d, density %.2f): token %d = %v, reference %v", trial, n, density, i, dst[i], want[i])
			}
		}
	}
	if applyMask(&dst, make([]float32, 150), grammar.NewMask(150)) {
		t.Fatal("empty mask reported as allowing a token")
	}
}
