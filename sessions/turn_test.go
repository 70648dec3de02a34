package sessions

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"oengine/engine"
)

func reqIDs(ids ...int32) engine.Request { return engine.Request{TokenIDs: ids, MaxTokens: 3} }

func testingGoroutines() int { return runtime.NumGoroutine() }

func ip(n int) *int { return &n }

func TestOpenInitialInput(t *testing.T) {
	f := newFixture(t, nil)
	in, err := f.m.Open(context.Background(), OpenRequest{ID: "p", Model: "toy", Prompt: "hi you"})
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{28, 8, 9, 27, 25, 15, 21} // BOS rule: the initial prompt starts the sequence
	got := f.get("p")
	if !slices.Equal(got.Tokens, want) || in.RetainedTokens != len(want) || got.Turns != 0 {
		t.Fatalf("retained %v (%d turns), want %v", got.Tokens, got.Turns, want)
	}
	if got.PinnedPages != 2 || got.ResidentTokens != len(want) {
		t.Fatalf("pins %d resident %d", got.PinnedPages, got.ResidentTokens)
	}
	// An initial input beyond the context fails and leaves no session.
	_, err = f.m.Open(context.Background(), OpenRequest{ID: "big", Model: "toy", TokenIDs: seq(0, 300)})
	if engine.CodeOf(err) != engine.CodeContextLengthExceeded && CodeOf(err) != CodeBudget {
		t.Fatalf("oversized initial input: %v", err)
	}
	if _, err := f.m.Get(ref("big"), false); CodeOf(err) != CodeNotFound {
		t.Fatalf("failed open left a session: %v", err)
	}
}

func TestModes(t *testing.T) {
	f := newFixture(t, nil)
	sys := seq(0, 10)
	f.open("s", sys...)

	// APPEND: sees retained + input, retains input and output; only the
	// new part is computed, and the output equals a from-scratch run.
	in1 := seq(3, 5)
	r := f.turn(Continuation{Ref: ref("s")}, reqIDs(in1...))
	full := append(slices.Clone(sys), in1...)
	if want := f.unary(full, 3); !slices.Equal(r.out, want) {
		t.Fatalf("append output %v, from scratch %v", r.out, want)
	}
	if r.usage.PromptTokens != 15 || r.usage.CachedPromptTokens != 10 {
		t.Fatalf("usage %+v, want 15 prompt tokens with the 10 retained cached", r.usage)
	}
	hist := append(full, r.out...)
	s := f.get("s")
	if !slices.Equal(s.Tokens, hist) || !slices.Equal(s.TurnOffsets, []int{10}) || s.Turns != 1 {
		t.Fatalf("after append: %v offsets %v", s.Tokens, s.TurnOffsets)
	}
	if s.PinnedPages != 5 || s.ResidentTokens != 17 {
		t.Fatalf("after append: pinned %d resident %d", s.PinnedPages, s.ResidentTokens)
	}

	// DROP_OUTPUT: output returned, not retained.
	in2 := seq(7, 3)
	r = f.turn(Continuation{Ref: ref("s"), Mode: ModeDropOutput}, reqIDs(in2...))
	if len(r.out) != 3 {
		t.Fatalf("drop output produced %v", r.out)
	}
	hist = append(hist, in2...)
	s = f.get("s")
	if !slices.Equal(s.Tokens, hist) || !slices.Equal(s.TurnOffsets, []int{10, 18}) {
		t.Fatalf("after drop: %v offsets %v", s.Tokens, s.TurnOffsets)
	}

	// BRANCH: sees retained[:from] + input, the session is unchanged; n > 1 allowed.
	r = f.turn(Continuation{Ref: ref("s"), Mode: ModeBranch, FromToken: ip(10)}, engine.Request{TokenIDs: in2, MaxTokens: 3, N: 2})
	if len(r.out) != 6 || r.usage.PromptTokens != 13 {
		t.Fatalf("branch prompt tokens %d", r.usage.PromptTokens)
	}
	if s2 := f.get("s"); !slices.Equal(s2.Tokens, s.Tokens) || s2.Turns != s.Turns || s2.PinnedPages != s.PinnedPages {
		t.Fatalf("branch changed the session: %+v", s2)
	}

	// REPLACE from the second turn: retained[:18] + input + output.
	in3 := seq(11, 2)
	r = f.turn(Continuation{Ref: ref("s"), Mode: ModeReplace, FromToken: ip(18)}, reqIDs(in3...))
	want := append(append(slices.Clone(hist[:18]), in3...), r.out...)
	s = f.get("s")
	if !slices.Equal(s.Tokens, want) || !slices.Equal(s.TurnOffsets, []int{10, 18}) {
		t.Fatalf("after replace: %v offsets %v, want %v", s.Tokens, s.TurnOffsets, want)
	}
	// REPLACE from the first turn drops later turn offsets.
	r = f.turn(Continuation{Ref: ref("s"), Mode: ModeReplace, FromToken: ip(10)}, reqIDs(1))
	if s = f.get("s"); len(s.Tokens) != 14 || !slices.Equal(s.TurnOffsets, []int{10}) {
		t.Fatalf("after replace at 10: %d tokens offsets %v", len(s.Tokens), s.TurnOffsets)
	}
	if want := f.unary(append(slices.Clone(sys), 1), 3); !slices.Equal(r.out, want) {
		t.Fatalf("replace output %v, from scratch %v", r.out, want)
	}
	if err := f.eng.Cache().CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}

func TestPromptContinuationHasNoBOS(t *testing.T) {
	f := newFixture(t, nil)
	f.open("s", 5, 6)
	f.turn(Continuation{Ref: ref("s")}, engine.Request{Prompt: "ab", MaxTokens: 1})
	if got := f.get("s").Tokens[:4]; !slices.Equal(got, []int32{5, 6, 1, 2}) {
		t.Fatalf("continuation tokens %v", got)
	}
	f.open("empty")
	f.turn(Continuation{Ref: ref("empty")}, engine.Request{Prompt: "ab", MaxTokens: 1})
	if got := f.get("empty").Tokens[:3]; !slices.Equal(got, []int32{28, 1, 2}) {
		t.Fatalf("first turn of an empty session %v, want the BOS rule", got)
	}
}

func TestContinuationValidation(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Modes = []Mode{ModeAppend, ModeBranch} })
	f.open("s", 1, 2, 3)
	cases := []struct {
		name string
		c    Continuation
		r    engine.Request
		code Code
	}{
		{"model mismatch", Continuation{Ref: ref("s"), Model: "other"}, reqIDs(1), CodeInvalid},
		{"lora mismatch", Continuation{Ref: ref("s"), Model: "toy", LoRA: "x"}, reqIDs(1), CodeInvalid},
		{"mode not offered", Continuation{Ref: ref("s"), Model: "toy", Mode: ModeReplace}, reqIDs(1), CodeUnsupported},
		{"unknown mode", Continuation{Ref: ref("s"), Model: "toy", Mode: 9}, reqIDs(1), CodeInvalid},
		{"n > 1 in append", Continuation{Ref: ref("s"), Model: "toy"}, engine.Request{TokenIDs: []int32{1}, N: 2}, CodeInvalid},
		{"from_token in append", Continuation{Ref: ref("s"), Model: "toy", FromToken: ip(1)}, reqIDs(1), CodeInvalid},
		{"from_token past the end", Continuation{Ref: ref("s"), Model: "toy", Mode: ModeBranch, FromToken: ip(4)}, reqIDs(1), CodeInvalid},
		{"cache salt", Continuation{Ref: ref("s"), Model: "toy"}, engine.Request{TokenIDs: []int32{1}, CacheSalt: "x"}, CodeInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.m.Begin(context.Background(), c.c, c.r)
			codeIs(t, err, c.code)
		})
	}
	if s := f.get("s"); s.State != StateIdle || len(s.Tokens) != 3 {
		t.Fatalf("refused turns changed the session: %+v", s)
	}
}

// startGated begins a turn whose model steps are held until the gate opens.
func startGated(t *testing.T, f *fixture, c Continuation, r engine.Request) (*Turn, chan struct{}) {
	t.Helper()
	g := make(chan struct{})
	f.model.setGate(g)
	if c.Model == "" {
		c.Model = "toy"
	}
	tr, err := f.m.Begin(context.Background(), c, r)
	if err != nil {
		t.Fatal(err)
	}
	g <- struct{}{} // at least one step is in the model
	return tr, g
}

func openGate(f *fixture, g chan struct{}) {
	f.model.setGate(nil)
	close(g)
}

func TestBusyRule(t *testing.T) {
	f := newFixture(t, nil)
	f.open("s", 1, 2, 3)
	tr, g := startGated(t, f, Continuation{Ref: ref("s")}, reqIDs(4, 5))
	if st := f.get("s").State; st != StateRunning {
		t.Fatalf("state %v while running", st)
	}
	for _, md := range []Mode{ModeAppend, ModeDropOutput, ModeReplace} {
		_, err := f.m.Begin(context.Background(), Continuation{Ref: ref("s"), Model: "toy", Mode: md}, reqIDs(1))
		codeIs(t, err, CodeBusy)
	}
	br, err := f.m.Begin(context.Background(), Continuation{Ref: ref("s"), Model: "toy", Mode: ModeBranch}, reqIDs(6))
	if err != nil {
		t.Fatalf("branch while a turn runs: %v", err)
	}
	// A running session does not expire.
	f.clock.Advance(2 * DefaultLease)
	f.m.Reap()
	openGate(f, g)
	if r := drain(t, tr); r.err != nil {
		t.Fatal(r.err)
	}
	if r := drain(t, br); r.err != nil {
		t.Fatal(r.err)
	}
	in := f.get("s")
	if in.State != StateIdle || len(in.Tokens) != 8 {
		t.Fatalf("after the turn: %v %v", in.State, in.Tokens)
	}
	if !in.ExpiresAt.Equal(f.clock.Now().Add(DefaultLease)) {
		t.Fatalf("lease not counted from the end of the turn: %v", in.ExpiresAt)
	}
}

func TestCancelLeavesSessionUnchanged(t *testing.T) {
	for _, md := range []Mode{ModeAppend, ModeDropOutput, ModeReplace} {
		t.Run(md.String(), func(t *testing.T) {
			f := newFixture(t, nil)
			f.open("s", seq(0, 9)...)
			f.turn(Continuation{Ref: ref("s")}, reqIDs(1, 2))
			before := f.get("s")
			stats := f.eng.Cache().PinnedPages("session:s")

			c := Continuation{Ref: ref("s"), Mode: md}
			if md == ModeReplace {
				c.FromToken = ip(4)
			}
			tr, g := startGated(t, f, c, engine.Request{TokenIDs: seq(5, 6), MaxTokens: 50})
			tr.Cancel()
			openGate(f, g)
			if r := drain(t, tr); r.err == nil || r.err.Code != engine.CodeCancelled {
				t.Fatalf("cancelled turn ended with %v", r.err)
			}
			after := f.get("s")
			if !slices.Equal(after.Tokens, before.Tokens) || !slices.Equal(after.TurnOffsets, before.TurnOffsets) ||
				after.PinnedPages != before.PinnedPages || after.ResidentTokens != before.ResidentTokens ||
				f.eng.Cache().PinnedPages("session:s") != stats || after.State != StateIdle {
				t.Fatalf("session changed:\n before %+v\n after  %+v", before, after)
			}
			// Still usable.
			r := f.turn(Continuation{Ref: ref("s")}, reqIDs(3))
			if want := f.unary(append(slices.Clone(before.Tokens), 3), 3); !slices.Equal(r.out, want) {
				t.Fatalf("turn after cancel %v, from scratch %v", r.out, want)
			}
		})
	}
}

func TestCloseWhileRunning(t *testing.T) {
	f := newFixture(t, nil)
	f.open("s", seq(0, 9)...)
	tr, g := startGated(t, f, Continuation{Ref: ref("s")}, engine.Request{TokenIDs: seq(1, 4), MaxTokens: 50})
	st, in, err := f.m.CloseSession(ref("s"))
	if err != nil || st != CloseClosed || in.State != StateClosed {
		t.Fatalf("close: %v %v %v", st, in.State, err)
	}
	openGate(f, g)
	if r := drain(t, tr); r.err == nil || r.err.Code != engine.CodeCancelled {
		t.Fatalf("turn of a closed session ended with %v", r.err)
	}
	if p := f.eng.Cache().PinnedPages("session:s"); p != 0 {
		t.Fatalf("%d pages pinned", p)
	}
}

func TestTurnCloseAbandons(t *testing.T) {
	f := newFixture(t, nil)
	f.open("s", 1, 2)
	tr, g := startGated(t, f, Continuation{Ref: ref("s")}, engine.Request{TokenIDs: []int32{3}, MaxTokens: 50})
	// Cancel while the model is held at the gate, so the turn cannot
	// finish its 50 tokens before Close takes effect (the toy model is fast).
	tr.stream.Cancel()
	openGate(f, g)
	tr.Close()
	tr.Close()
	if in := f.get("s"); in.State != StateIdle || len(in.Tokens) != 2 {
		t.Fatalf("abandoned turn: %+v", in)
	}
}

func TestBudgets(t *testing.T) {
	t.Run("per session", func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.MaxPinnedPagesPerSession = 4 }) // 16 tokens
		_, err := f.m.Open(context.Background(), OpenRequest{ID: "big", Model: "toy", TokenIDs: seq(0, 17)})
		codeIs(t, err, CodeBudget)
		f.open("s", seq(0, 10)...)
		_, err = f.m.Begin(context.Background(), Continuation{Ref: ref("s"), Model: "toy"}, engine.Request{TokenIDs: seq(0, 4), MaxTokens: 3})
		codeIs(t, err, CodeBudget)
		// Absent max_tokens stops where the session is full.
		r := f.turn(Continuation{Ref: ref("s")}, engine.Request{TokenIDs: seq(0, 2)})
		if len(r.out) != 4 || len(f.get("s").Tokens) != 16 {
			t.Fatalf("default output %d tokens, session %d", len(r.out), len(f.get("s").Tokens))
		}
		caps, _ := f.m.Capabilities("toy")
		if caps.MaxRetainedTokens != 16 {
			t.Fatalf("advertised %d retained tokens", caps.MaxRetainedTokens)
		}
	})
	t.Run("global", func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.MaxPinnedPages = 6 })
		f.open("a", seq(0, 12)...) // 3 pages
		f.open("b", seq(0, 8)...)  // 2 pages
		_, err := f.m.Open(context.Background(), OpenRequest{ID: "c", Model: "toy", TokenIDs: seq(0, 8)})
		codeIs(t, err, CodeBudget)
		if _, err := f.m.Get(ref("c"), false); CodeOf(err) != CodeNotFound {
			t.Fatalf("refused open left a session: %v", err)
		}
		_, err = f.m.Begin(context.Background(), Continuation{Ref: ref("b"), Model: "toy"}, engine.Request{TokenIDs: seq(0, 4), MaxTokens: 2})
		codeIs(t, err, CodeBudget)
		f.turn(Continuation{Ref: ref("b"), Mode: ModeBranch}, reqIDs(1)) // branches pin nothing
		// Without max_tokens the output stops where the global budget ends.
		r := f.turn(Continuation{Ref: ref("b")}, engine.Request{TokenIDs: []int32{1}})
		if b := f.get("b"); len(r.out) != 3 || len(b.Tokens) != 12 || b.PinnedPages != 3 {
			t.Fatalf("default output %d tokens, session %d tokens in %d pages", len(r.out), len(b.Tokens), b.PinnedPages)
		}
	})
	t.Run("streamed input grows the reservation", func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.MaxPinnedPages = 6 })
		f.open("a", seq(0, 12)...) // 3 pages
		f.open("s")
		tr, err := f.m.Begin(context.Background(), Continuation{Ref: ref("s"), Model: "toy"},
			engine.Request{OpenInput: true, TokenIDs: []int32{}, MaxTokens: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.AppendInput(seq(0, 8)); err != nil { // 9 tokens with the output: 3 pages
			t.Fatal(err)
		}
		codeIs(t, tr.AppendInput(seq(0, 4)), CodeBudget)
		if err := tr.CloseInput(); err != nil {
			t.Fatal(err)
		}
		if res := drain(t, tr); res.err != nil {
			t.Fatal(res.err)
		}
		if got := f.get("s"); len(got.Tokens) != 9 || got.PinnedPages != 2 { // the last token has no K/V yet
			t.Fatalf("after the streamed turn: %d tokens, %d pages", len(got.Tokens), got.PinnedPages)
		}
	})
	t.Run("evict idle", func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.MaxPinnedPages = 6; c.EvictIdle = true })
		f.open("a", seq(0, 12)...)
		f.clock.Advance(time.Second)
		f.open("b", seq(0, 8)...)
		f.open("c", seq(2, 8)...) // evicts a (least recently used)
		a := f.get("a")
		if a.State != StateEvicted || len(a.Tokens) != 12 || a.PinnedPages != 0 || f.eng.Cache().PinnedPages("session:a") != 0 {
			t.Fatalf("a after pressure: %+v", a)
		}
		// The evicted session is usable; its turn recomputes and re-pins.
		r := f.turn(Continuation{Ref: ref("a")}, engine.Request{TokenIDs: []int32{1}, MaxTokens: 1})
		if want := f.unary(append(seq(0, 12), 1), 1); !slices.Equal(r.out, want) {
			t.Fatalf("evicted turn %v want %v", r.out, want)
		}
		if a = f.get("a"); a.State != StateIdle || a.PinnedPages == 0 {
			t.Fatalf("a after its turn: %+v", a)
		}
		if b, c := f.get("b"), f.get("c"); b.State != StateEvicted && c.State != StateEvicted {
			t.Fatalf("no idle session evicted for a's turn: %v %v", b.State, c.State)
		}
		if st := f.eng.Cache().Stats(); st.Pinned > 6 {
			t.Fatalf("%d pages pinned, budget 6", st.Pinned)
		}
	})
}

func TestConcurrentBranches(t *testing.T) {
	f := newFixture(t, nil)
	f.open("s", seq(0, 20)...)
	want := f.unary(append(seq(0, 20), 9), 4)
	done := make(chan []int32, 4)
	for i := 0; i < 4; i++ {
		go func() {
			tr, err := f.m.Begin(context.Background(), Continuation{Ref: ref("s"), Model: "toy", Mode: ModeBranch}, engine.Request{TokenIDs: []int32{9}, MaxTokens: 4})
			if err != nil {
				t.Error(err)
				done <- nil
				return
			}
			done <- drain(t, tr).out
		}()
	}
	for i := 0; i < 4; i++ {
		if got := <-done; !slices.Equal(got, want) {
			t.Fatalf("branch %v want %v", got, want)
		}
	}
}

func TestCleanup(t *testing.T) {
	base := runtime.NumGoroutine()
	f := newFixture(t, nil)
	for _, id := range []string{"a", "b", "c"} {
		f.open(id, seq(0, 9)...)
		f.turn(Continuation{Ref: ref(id)}, reqIDs(1, 2))
	}
	tr, g := startGated(t, f, Continuation{Ref: ref("a")}, engine.Request{TokenIDs: []int32{1}, MaxTokens: 50})
	f.m.Close()
	openGate(f, g)
	drain(t, tr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.eng.Cache().Stats(); st.Pinned != 0 || st.PinOwners != 0 || st.InUse != 0 {
		t.Fatalf("after close: %+v", st)
	}
	if err := f.eng.Cache().CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Open(context.Background(), OpenRequest{Model: "toy"}); err == nil {
		t.Fatal("open after close succeeded")
	}
	f.eng.Close()
	waitGoroutines(t, base)
}

func TestStreamedTurn(t *testing.T) {
	for _, md := range []Mode{ModeAppend, ModeDropOutput} {
		t.Run(md.String(), func(t *testing.T) {
			f := newFixture(t, nil)
			f.open("s", seq(0, 6)...)
			tr, err := f.m.Begin(context.Background(), Continuation{Ref: ref("s"), Model: "toy", Mode: md},
				engine.Request{OpenInput: true, TokenIDs: []int32{}, MaxTokens: 3})
			if err != nil {
				t.Fatal(err)
			}
			if tr.BaseLen() != 6 {
				t.Fatalf("base %d", tr.BaseLen())
			}
			for _, chunk := range [][]int32{seq(1, 5), seq(2, 5), seq(3, 2)} {
				if err := tr.AppendInput(chunk); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for tr.Prefilled() < 11 { // early prefill: all but the held-back last token
				if time.Now().After(deadline) {
					t.Fatalf("prefilled %d of 12 before end of input", tr.Prefilled())
				}
				time.Sleep(time.Millisecond)
			}
			if err := tr.CloseInput(); err != nil {
				t.Fatal(err)
			}
			r := drain(t, tr)
			if r.err != nil {
				t.Fatal(r.err)
			}
			want := append(append(append(seq(0, 6), seq(1, 5)...), seq(2, 5)...), seq(3, 2)...)
			if out := f.unary(want, 3); !slices.Equal(out, r.out) {
				t.Fatalf("streamed output %v, unary %v", r.out, out)
			}
			if md == ModeAppend {
				want = append(want, r.out...)
			}
			if got := f.get("s"); !slices.Equal(got.Tokens, want) || !slices.Equal(got.TurnOffsets, []int{6}) {
				t.Fatalf("retained %v offsets %v, want %v", got.Tokens, got.TurnOffsets, want)
			}
		})
	}
}

func TestStreamedTurnBudget(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxPinnedPagesPerSession = 3 }) // 12 tokens
	f.open("s", seq(0, 6)...)
	tr, err := f.m.Begin(context.Background(), Continuation{Ref: ref("s"), Model: "toy"},
		engine.Request{OpenInput: true, TokenIDs: []int32{}, MaxTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.AppendInput(seq(0, 4)); err != nil {
		t.Fatal(err)
	}
	codeIs(t, tr.AppendInput(seq(0, 3)), CodeBudget)
	tr.Close()
	if got := f.get("s"); len(got.Tokens) != 6 || got.State != StateIdle {
		t.Fatalf("after refused input: %+v", got)
	}
}
