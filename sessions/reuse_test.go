package sessions

import (
	"context"
	"slices"
	"testing"

	"oengine/engine"
)

// scratch runs ids from scratch in its own cache namespace (nothing is
// reused, and nothing it stores is matched by the session's turns).
func (f *fixture) scratch(ids []int32, maxTokens int) []int32 {
	f.t.Helper()
	st, err := f.eng.Submit(context.Background(), engine.Request{TokenIDs: ids, MaxTokens: maxTokens,
		BypassPrefixCache: true, CacheSalt: "scratch"})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []int32
	for {
		ev, err := st.Next(context.Background())
		if err != nil {
			return out
		}
		switch ev.Kind {
		case engine.EventTokens:
			for _, tk := range ev.Tokens {
				out = append(out, tk.ID)
			}
		case engine.EventError:
			f.t.Fatal(ev.Err)
		}
	}
}

// TestContinuationReusesRetainedKV (issue 17 point 12): a continuation
// reuses every retained token whose K/V the session holds, the partly
// filled last page included: cached_prompt_tokens = retained tokens, or
// retained - 1 after a turn that sampled (the last sampled token has no
// K/V yet). A branch or replace cut inside the partial page reuses up to
// the cut and never changes the session's page (copy-on-write): later
// turns still match a run from scratch. The page ledger is sound after
// every turn. Page size 4.
func TestContinuationReusesRetainedKV(t *testing.T) {
	f := newFixture(t, nil)
	check := func() {
		t.Helper()
		if err := f.eng.Cache().CheckIntegrity(); err != nil {
			t.Fatal(err)
		}
	}
	turn := func(id string, c Continuation, in []int32, wantCached int) []int32 {
		t.Helper()
		c.Ref = ref(id)
		base := f.get(id).Tokens
		if c.FromToken != nil {
			base = base[:*c.FromToken]
		}
		r := f.turn(c, engine.Request{TokenIDs: in, MaxTokens: 3})
		prompt := append(slices.Clone(base), in...)
		if r.usage.PromptTokens != len(prompt) || r.usage.CachedPromptTokens != wantCached {
			t.Fatalf("%s turn on %d retained: usage %+v, want %d prompt tokens with %d cached",
				c.Mode, len(base), *r.usage, len(prompt), wantCached)
		}
		if want := f.scratch(prompt, 3); !slices.Equal(r.out, want) {
			t.Fatalf("%s output %v, from scratch %v", c.Mode, r.out, want)
		}
		check()
		return r.out
	}

	// Less than a page retained: before, nothing was reused.
	f.open("small", seq(0, 3)...)
	turn("small", Continuation{}, seq(5, 2), 3)
	if in := f.get("small"); len(in.Tokens) != 8 || in.ResidentTokens != 7 {
		t.Fatalf("after append: %d retained, %d resident", len(in.Tokens), in.ResidentTokens)
	}
	turn("small", Continuation{}, seq(9, 1), 7) // retained - 1: the sampled token's K/V

	// A page and a part: before, only the whole page was reused.
	f.open("s", seq(0, 13)...) // resident 13 (the open computes its input)
	turn("s", Continuation{}, seq(3, 3), 13)
	// 19 retained, 18 resident.
	turn("s", Continuation{Mode: ModeDropOutput}, seq(4, 2), 18)
	// DROP_OUTPUT retains its input, all of it resident: 21.
	if in := f.get("s"); len(in.Tokens) != 21 || in.ResidentTokens != 21 {
		t.Fatalf("after drop: %d retained, %d resident", len(in.Tokens), in.ResidentTokens)
	}
	// BRANCH cut inside the partial last page (positions 20..23 hold 20),
	// several times, and concurrently with nothing else: the session's page
	// stays intact.
	turn("s", Continuation{Mode: ModeBranch, FromToken: ip(18)}, seq(7, 2), 18)
	turn("s", Continuation{Mode: ModeBranch, FromToken: ip(21)}, seq(8, 2), 21)
	turn("s", Continuation{Mode: ModeBranch, FromToken: ip(21)}, nil, 20) // nothing new: the last token is computed
	turn("s", Continuation{}, seq(9, 2), 21)
	// REPLACE cut inside a page.
	turn("s", Continuation{Mode: ModeReplace, FromToken: ip(22)}, seq(10, 2), 22)
	got := f.get("s")
	turn("s", Continuation{}, seq(11, 1), got.ResidentTokens)
	if got.ResidentTokens != len(got.Tokens)-1 {
		t.Fatalf("after replace: %d retained, %d resident", len(got.Tokens), got.ResidentTokens)
	}

	// A streamed turn reuses the retained K/V too: all of it, or all but
	// the last retained token when it is admitted before any input came.
	got = f.get("s")
	tr, err := f.m.Begin(context.Background(), Continuation{Ref: ref("s"), Model: "toy"},
		engine.Request{OpenInput: true, TokenIDs: []int32{}, MaxTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.AppendInput(seq(12, 3)); err != nil {
		t.Fatal(err)
	}
	if err := tr.CloseInput(); err != nil {
		t.Fatal(err)
	}
	r := drain(t, tr)
	if r.err != nil || r.usage.CachedPromptTokens < min(got.ResidentTokens, len(got.Tokens)-1) {
		t.Fatalf("streamed turn on %d retained (%d resident): %+v %v", len(got.Tokens), got.ResidentTokens, r.usage, r.err)
	}
	check()

	// Evicted: nothing pinned, the next turn reuses what the prefix cache
	// still holds (whole pages) and recomputes the rest.
	f.m.cfg.EvictIdle = true
	if n := f.m.EvictIdle("toy", 1000); n == 0 {
		t.Fatal("nothing evicted")
	}
	got = f.get("s")
	r = f.turn(Continuation{Ref: ref("s")}, engine.Request{TokenIDs: seq(13, 1), MaxTokens: 3})
	if r.usage.CachedPromptTokens%4 != 0 || r.usage.CachedPromptTokens > len(got.Tokens) {
		t.Fatalf("after eviction: cached %d of %d", r.usage.CachedPromptTokens, len(got.Tokens)+1)
	}
	check()
}

// TestBranchDuringAppendKeepsPartialPage: a BRANCH and an APPEND run at
// once from the same partly filled page; each copies it before writing, so
// both match runs from scratch and the session retains the APPEND's turn.
func TestBranchDuringAppendKeepsPartialPage(t *testing.T) {
	f := newFixture(t, nil)
	hist := seq(0, 10)
	f.open("s", hist...)
	app, g := startGated(t, f, Continuation{Ref: ref("s")}, engine.Request{TokenIDs: seq(1, 3), MaxTokens: 4})
	br, err := f.m.Begin(context.Background(), Continuation{Ref: ref("s"), Model: "toy", Mode: ModeBranch, FromToken: ip(9)},
		engine.Request{TokenIDs: seq(2, 3), MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	openGate(f, g)
	ra, rb := drain(t, app), drain(t, br)
	if ra.err != nil || rb.err != nil || ra.usage.CachedPromptTokens != 10 || rb.usage.CachedPromptTokens != 9 {
		t.Fatalf("append %+v %v, branch %+v %v", ra.usage, ra.err, rb.usage, rb.err)
	}
	if want := f.scratch(append(slices.Clone(hist), seq(1, 3)...), 4); !slices.Equal(ra.out, want) {
		t.Fatalf("append %v, from scratch %v", ra.out, want)
	}
	if want := f.scratch(append(slices.Clone(hist[:9]), seq(2, 3)...), 4); !slices.Equal(rb.out, want) {
		t.Fatalf("branch %v, from scratch %v", rb.out, want)
	}
	next := f.turn(Continuation{Ref: ref("s")}, engine.Request{TokenIDs: seq(3, 1), MaxTokens: 3})
	all := append(append(append(slices.Clone(hist), seq(1, 3)...), ra.out...), seq(3, 1)...)
	if want := f.scratch(all, 3); !slices.Equal(next.out, want) {
		t.Fatalf("turn after both %v, from scratch %v", next.out, want)
	}
	if err := f.eng.Cache().CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}
