package engine

import (
	"context"
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

func TestApplyMask(t *testing.T) {
	row := make([]float32, 150)
	for i := range row {
		row[i] = float32(i)
	}
	m := grammar.NewMask(150)
	for i := range 64 {
		m.Set(int32(64 + i)) // a full word
	}
	m.Set(3)
	m.Set(149)
	var dst []float32
	if !applyMask(&dst, row, m) {
		t.Fatal("no token allowed")
	}
	for i, v := range dst {
		if allowed := m.Has(int32(i)); allowed != (v == row[i]) || (!allowed && v > -1e30) {
			t.Fatalf("token %d: %v (allowed %v)", i, v, allowed)
		}
	}
	if applyMask(&dst, row, grammar.NewMask(150)) {
		t.Fatal("empty mask reported as allowing a token")
	}
}

// TestConstrainedGBNF: a context-free constraint (balanced brackets over
// the fake vocabulary's letters) through the engine: every seeded output
// at temperature 1 is balanced, checked by a counter.
func TestConstrainedGBNF(t *testing.T) {
	e := newFakeEngine(t, Config{}, &fakeModel{vocab: 64, ctx: 512})
	pieces := make([][]byte, 64)
	for id := range pieces {
		pieces[id] = []byte(fakeTok{}.piece(int32(id)))
	}
	// The fake vocabulary has letters and a space: "a" opens, "b" closes.
	c, err := grammar.CompileGBNF(`root ::= "a" inner "b"
inner ::= ("a" inner "b")* " "?`, grammar.NewVocab(pieces, []int32{0}))
	if err != nil {
		t.Fatal(err)
	}
	for seed := range 20 {
		s := uint64(seed)
		got := run(t, e, Request{Prompt: "x", MaxTokens: 200, Sampling: sampling.Options{Temperature: ptr(1.0), Seed: &s}, Constraint: c})
		if got.err != nil || got.finish[0].Reason != FinishStop {
			t.Fatalf("seed %d: %q %+v %v", seed, got.text[0], got.finish[0], got.err)
		}
		depth := 0
		for i, ch := range got.text[0] {
			switch ch {
			case 'a':
				depth++
			case 'b':
				depth--
			}
			if depth < 0 || (depth == 0 && i != len(got.text[0])-1) {
				t.Fatalf("seed %d: %q is not one balanced group", seed, got.text[0])
			}
		}
		if depth != 0 {
			t.Fatalf("seed %d: %q is unbalanced", seed, got.text[0])
		}
	}
	checkLedger(t, e)
}
