package scheduler

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func seqTokens(n int, base int32) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = base + int32(i)
	}
	return t
}

func mustNew(t *testing.T, cfg Config, a Allocator) *Scheduler {
	t.Helper()
	sc, err := New(cfg, a)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func mustAdd(t *testing.T, sc *Scheduler, o SeqOptions) *Seq {
	t.Helper()
	s, err := sc.Add(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// step plans, runs on fake memory and advances; sampled sequences get the
// token next(seq) appended.
func step(t *testing.T, sc *Scheduler, a *fakeAlloc) Plan {
	t.Helper()
	p := sc.Plan()
	if err := a.run(&p); err != nil {
		t.Fatal(err)
	}
	sc.Advance(&p)
	for _, it := range p.Items {
		if it.Sample {
			if err := sc.Append(it.Seq, int32(1000+it.Seq.Known())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.check(); err != nil {
		t.Fatal(err)
	}
	return p
}

type span struct{ start, end int }

func spans(p Plan) map[SeqID]span {
	m := map[SeqID]span{}
	for _, it := range p.Items {
		m[it.Seq.ID()] = span{it.Start, it.End}
	}
	return m
}

func TestChunkedPrefill(t *testing.T) {
	a := newFakeAlloc(64, 16)
	sc := mustNew(t, Config{MaxBatchedTokens: 32, MaxRunning: 4}, a)
	s := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(100, 1)})
	want := []span{{0, 32}, {32, 64}, {64, 96}, {96, 100}, {100, 101}}
	for i, w := range want {
		p := step(t, sc, a)
		if len(p.Items) != 1 {
			t.Fatalf("step %d: %d items", i, len(p.Items))
		}
		it := p.Items[0]
		if (span{it.Start, it.End}) != w {
			t.Fatalf("step %d: span %d-%d, want %v", i, it.Start, it.End, w)
		}
		if it.Sample != (it.End == 100 || it.End == 101) {
			t.Fatalf("step %d: sample=%v", i, it.Sample)
		}
		if it.Sample && it.Logits() != 1 {
			t.Fatalf("step %d: %d logits rows", i, it.Logits())
		}
	}
	if s.Known() != 102 || s.Computed() != 101 {
		t.Fatalf("known %d computed %d", s.Known(), s.Computed())
	}
}

func TestDecodeFirst(t *testing.T) {
	a := newFakeAlloc(64, 16)
	sc := mustNew(t, Config{MaxBatchedTokens: 20, MaxRunning: 8}, a)
	d1 := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(5, 1)})
	d2 := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(6, 1)})
	step(t, sc, a) // both prefill in one step: 11 tokens
	long := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(50, 1)})
	p := step(t, sc, a)
	got := spans(p)
	if got[d1.ID()] != (span{5, 6}) || got[d2.ID()] != (span{6, 7}) {
		t.Fatalf("decode spans %v", got)
	}
	if got[long.ID()] != (span{0, 18}) {
		t.Fatalf("prefill chunk %v, want 0-18 (budget minus 2 decode tokens)", got[long.ID()])
	}
	if p.Items[0].Seq == long {
		t.Fatal("prefill scheduled before decode")
	}
}

func TestAdmissionOrder(t *testing.T) {
	a := newFakeAlloc(64, 16)
	sc := mustNew(t, Config{MaxBatchedTokens: 100, MaxRunning: 1}, a)
	low := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(4, 1), Priority: 0})
	hi1 := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(4, 1), Priority: 5})
	hi2 := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(4, 1), Priority: 5})
	var order []*Seq
	for len(order) < 3 {
		p := step(t, sc, a)
		for _, it := range p.Items {
			if it.Start == 0 {
				order = append(order, it.Seq)
			}
			sc.Finish(it.Seq)
		}
	}
	if order[0] != hi1 || order[1] != hi2 || order[2] != low {
		t.Fatalf("admission order %d %d %d", order[0].ID(), order[1].ID(), order[2].ID())
	}
}

func TestNeverFits(t *testing.T) {
	a := newFakeAlloc(4, 16)
	sc := mustNew(t, Config{}, a)
	if sc.Fits(65) || !sc.Fits(64) {
		t.Fatal("Fits boundary wrong")
	}
	if _, err := sc.Add(SeqOptions{Tokens: seqTokens(65, 1)}); !errors.Is(err, ErrNeverFits) {
		t.Fatalf("err %v", err)
	}
}

func TestPausedNotScheduled(t *testing.T) {
	a := newFakeAlloc(16, 16)
	sc := mustNew(t, Config{}, a)
	s := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(3, 1)})
	step(t, sc, a)
	sc.SetPaused(s, true)
	if p := step(t, sc, a); !p.Empty() {
		t.Fatal("paused sequence scheduled")
	}
	if l := sc.Load(); l.Paused != 1 || l.Running != 1 {
		t.Fatalf("load %+v", l)
	}
	sc.SetPaused(s, false)
	if p := step(t, sc, a); len(p.Items) != 1 {
		t.Fatal("resumed sequence not scheduled")
	}
}

func TestOpenInput(t *testing.T) {
	a := newFakeAlloc(16, 16)
	sc := mustNew(t, Config{}, a)
	s := mustAdd(t, sc, SeqOptions{Open: true})
	if p := step(t, sc, a); !p.Empty() {
		t.Fatal("empty open sequence scheduled")
	}
	sc.Append(s, seqTokens(10, 1)...)
	p := step(t, sc, a)
	// The last known token is held back while input is open.
	if len(p.Items) != 1 || p.Items[0].Sample || p.Items[0].End != 9 || p.Items[0].Logits() != 0 {
		t.Fatalf("open chunk %+v", p.Items)
	}
	sc.Append(s, 50, 51)
	p = step(t, sc, a)
	if p.Items[0].Start != 9 || p.Items[0].End != 11 || p.Items[0].Sample {
		t.Fatalf("appended chunk %+v", p.Items[0])
	}
	if p := step(t, sc, a); !p.Empty() {
		t.Fatal("open sequence scheduled its held-back token")
	}
	sc.CloseInput(s)
	p = step(t, sc, a)
	if len(p.Items) != 1 || !p.Items[0].Sample || p.Items[0].Start != 11 || p.Items[0].End != 12 {
		t.Fatalf("closed chunk %+v", p.Items)
	}
}

func TestPromptLogitsRows(t *testing.T) {
	a := newFakeAlloc(16, 16)
	sc := mustNew(t, Config{MaxBatchedTokens: 8}, a)
	s := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(12, 1), PromptLogits: true})
	p := step(t, sc, a)
	if it := p.Items[0]; it.LogitsStart != 0 || it.Logits() != 8 || it.Sample {
		t.Fatalf("first chunk %+v", it)
	}
	s.LogitsFrom = 8
	p = step(t, sc, a)
	if it := p.Items[0]; it.LogitsStart != 8 || it.Logits() != 4 || !it.Sample {
		t.Fatalf("second chunk %+v", it)
	}
}

func TestPrefixReuse(t *testing.T) {
	a := newFakeAlloc(32, 4)
	sc := mustNew(t, Config{}, a)
	prompt := seqTokens(10, 1)
	s1 := mustAdd(t, sc, SeqOptions{Tokens: prompt})
	step(t, sc, a)
	sc.Finish(s1)
	tests := []struct {
		name   string
		tokens []int32
		salt   string
		bypass bool
		cached int
	}{
		{"same prompt reuses full pages", prompt, "", false, 8},
		{"exact page multiple leaves one token", prompt[:8], "", false, 4},
		{"longer prompt", append(seqTokens(10, 1), 7, 7, 7), "", false, 8},
		{"other salt", prompt, "x", false, 0},
		{"bypass", prompt, "", true, 0},
		{"diverging second page", append(seqTokens(5, 1), 99, 99, 99, 99, 99), "", false, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustAdd(t, sc, SeqOptions{Tokens: tc.tokens, Salt: tc.salt, Bypass: tc.bypass})
			p := step(t, sc, a)
			if s.Cached() != tc.cached || p.Items[0].Start != tc.cached {
				t.Fatalf("cached %d start %d, want %d", s.Cached(), p.Items[0].Start, tc.cached)
			}
			sc.Finish(s)
			if err := a.check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestForkCopyOnWrite(t *testing.T) {
	a := newFakeAlloc(32, 4)
	sc := mustNew(t, Config{}, a)
	s := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(6, 1), Width: 3})
	p := sc.Plan()
	if err := a.run(&p); err != nil {
		t.Fatal(err)
	}
	sc.Advance(&p)
	c1, err := sc.Fork(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := sc.Fork(s, nil)
	sc.Append(s, 100)
	sc.Append(c1, 200)
	sc.Append(c2, 300)
	p = step(t, sc, a)
	if len(p.Items) != 3 {
		t.Fatalf("%d items", len(p.Items))
	}
	// The last page (positions 4..7) was shared by three tables: two of them
	// copy it before writing.
	if len(p.Copies) != 2 {
		t.Fatalf("%d copies, want 2", len(p.Copies))
	}
	for i := 0; i < 5; i++ {
		step(t, sc, a)
	}
	for _, x := range []*Seq{s, c1, c2} {
		sc.Finish(x)
		sc.Finish(x) // twice is safe
	}
	if err := a.check(); err != nil {
		t.Fatal(err)
	}
	if len(a.free)+len(a.lru) != 32 {
		t.Fatalf("pages leaked: %d free %d cached", len(a.free), len(a.lru))
	}
}

func TestPreemption(t *testing.T) {
	// 6 pages of 4 tokens: three sequences of 5 tokens take 2 pages each;
	// growing past 8 tokens needs a third page, so someone is preempted:
	// the lowest priority, most recent.
	a := newFakeAlloc(6, 4)
	sc := mustNew(t, Config{}, a)
	old := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(5, 1), Priority: 1})
	mid := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(5, 100), Priority: 1})
	young := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(5, 200), Priority: 1})
	var preempted []*Seq
	for i := 0; i < 5; i++ {
		p := step(t, sc, a)
		preempted = append(preempted, p.Preempted...)
	}
	if len(preempted) == 0 || preempted[0] != young {
		t.Fatalf("preempted %v, want the youngest first", preempted)
	}
	if young.State() != Waiting || young.Computed() != 0 || young.Known() <= 5 {
		t.Fatalf("preempted seq state %v computed %d known %d", young.State(), young.Computed(), young.Known())
	}
	if sc.Stats().Preemptions == 0 || young.Preemptions() == 0 {
		t.Fatal("preemption not counted")
	}
	sc.Finish(old)
	sc.Finish(mid)
	// young comes back and recomputes all its tokens so far.
	known := young.Known()
	p := step(t, sc, a)
	if len(p.Items) != 1 || p.Items[0].Seq != young || p.Items[0].End != known || !p.Items[0].Sample {
		t.Fatalf("readmission %+v", p.Items)
	}
}

// TestRandomWalk drives many sequences with random lengths, priorities,
// pauses, forks and finishes through a small pool; the fake memory proves
// every step attends to exactly each sequence's own tokens, and the ledger
// stays consistent.
func TestRandomWalk(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		a := newFakeAlloc(8+r.IntN(24), 1+r.IntN(8))
		sc := mustNew(t, Config{MaxBatchedTokens: 1 + r.IntN(40), MaxRunning: 1 + r.IntN(6)}, a)
		var live []*Seq
		for stepN := 0; stepN < 300; stepN++ {
			if r.IntN(3) == 0 {
				n := 1 + r.IntN(a.TotalPages()*a.ps/2)
				salt := ""
				if r.IntN(4) == 0 {
					salt = "s"
				}
				s, err := sc.Add(SeqOptions{Tokens: seqTokens(n, int32(r.IntN(3))), Priority: int32(r.IntN(3)), Salt: salt, Width: 1 + r.IntN(2)})
				if err == nil {
					live = append(live, s)
				}
			}
			p := step(t, sc, a)
			for _, it := range p.Items {
				if it.Sample && it.Seq.width > 1 && r.IntN(2) == 0 {
					if c, err := sc.Fork(it.Seq, nil); err == nil {
						live = append(live, c)
					}
				}
			}
			for i := 0; i < len(live); i++ {
				s := live[i]
				switch x := r.IntN(20); {
				case x == 0 || s.Known() >= a.TotalPages()*a.ps-1:
					sc.Finish(s)
					live = append(live[:i], live[i+1:]...)
					i--
				case x == 1:
					sc.SetPaused(s, !s.Paused())
				}
			}
		}
		for _, s := range live {
			sc.Finish(s)
		}
		if err := a.check(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		t.Logf("seed %d: %+v", seed, sc.Stats())
		if len(a.free)+len(a.lru) != a.TotalPages() || !sc.Idle() {
			t.Fatalf("seed %d: pages leaked", seed)
		}
	}
}

func TestPreemptionPrefersLowPriority(t *testing.T) {
	a := newFakeAlloc(6, 4)
	sc := mustNew(t, Config{}, a)
	low := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(5, 1), Priority: 0})
	hi1 := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(5, 100), Priority: 2})
	hi2 := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(5, 200), Priority: 2})
	var preempted []*Seq
	for i := 0; i < 10 && len(preempted) == 0; i++ {
		p := step(t, sc, a)
		preempted = append(preempted, p.Preempted...)
	}
	if len(preempted) == 0 || preempted[0] != low {
		t.Fatalf("preempted %v, want the low-priority sequence although it arrived first", preempted)
	}
	if hi1.State() != Running || hi2.State() != Running {
		t.Fatal("high-priority sequences not running")
	}
}

// TestSeqPrefix: a sequence that brings its own prefix (a session's pages)
// reuses all of it, a partly filled last page included, capped so one
// token is computed; the shared page is copied before it is written, so
// the prefix's holder keeps its K/V; reuse survives preemption; an open
// sequence with nothing left to compute is admitted without an item;
// Finish releases the prefix, and a failed Add too.
func TestSeqPrefix(t *testing.T) {
	a := newFakeAlloc(32, 4)
	sc := mustNew(t, Config{}, a)
	hist := seqTokens(6, 1)
	s0 := mustAdd(t, sc, SeqOptions{Tokens: hist, Bypass: true})
	step(t, sc, a)
	keeper, _ := a.Fork(s0.Table()) // stands for the session's pins
	sc.Finish(s0)
	kept := func() [][]int32 {
		var m [][]int32
		for _, p := range keeper.Pages() {
			m = append(m, slices.Clone(a.mem[p]))
		}
		return m
	}
	before := kept()
	prefix := func() Table { f, _ := a.Fork(keeper); return f }

	tests := []struct {
		name      string
		tokens    []int32
		prefixLen int
		cached    int
	}{
		{"append reuses the partial page", append(slices.Clone(hist), 50, 51, 52), 6, 6},
		{"nothing new: the last token is recomputed", slices.Clone(hist), 6, 5},
		{"branch inside the partial page", append(slices.Clone(hist[:5]), 60, 61), 5, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustAdd(t, sc, SeqOptions{Tokens: tc.tokens, Prefix: prefix(), PrefixLen: tc.prefixLen})
			defer sc.Finish(s)
			for round := 0; round < 2; round++ { // the second after a preemption
				want := min(tc.prefixLen, s.Known()-1)
				p := step(t, sc, a)
				if s.Cached() != want || p.Items[0].Start != want || len(p.Copies) != 1 {
					t.Fatalf("round %d: cached %d start %d copies %v, want %d and one copy", round, s.Cached(), p.Items[0].Start, p.Copies, want)
				}
				if round == 0 && want != tc.cached {
					t.Fatalf("first admission reused %d, want %d", want, tc.cached)
				}
				if got := kept(); !slices.EqualFunc(got, before, slices.Equal) {
					t.Fatalf("round %d: the prefix's pages changed: %v, were %v", round, got, before)
				}
				if round == 0 {
					sc.preempt(s)
				}
			}
			sc.Finish(s)
			if err := a.check(); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("open, all reused", func(t *testing.T) {
		s := mustAdd(t, sc, SeqOptions{Tokens: slices.Clone(hist), Open: true, Prefix: prefix(), PrefixLen: 6})
		defer sc.Finish(s)
		if p := step(t, sc, a); len(p.Items) != 0 || s.State() != Running || s.Cached() != 5 {
			t.Fatalf("plan %+v state %v cached %d: want admitted with 5 reused and nothing to compute", p.Items, s.State(), s.Cached())
		}
		sc.Append(s, 70)
		sc.CloseInput(s)
		if p := step(t, sc, a); len(p.Items) != 1 || p.Items[0].Start != 5 || !p.Items[0].Sample {
			t.Fatalf("after input: %+v", p.Items)
		}
		sc.Finish(s)
	})
	t.Run("failed add releases the prefix", func(t *testing.T) {
		if _, err := sc.Add(SeqOptions{Tokens: hist, Prefix: prefix(), PrefixLen: 7}); err == nil {
			t.Fatal("a prefix longer than the tokens was accepted")
		}
	})
	if len(a.tables) != 1 {
		t.Fatalf("%d tables live, want only the keeper", len(a.tables))
	}
	a.Release(keeper)
	if err := a.check(); err != nil {
		t.Fatal(err)
	}
	if len(a.free)+len(a.lru) != 32 {
		t.Fatalf("pages leaked: %d free %d cached", len(a.free), len(a.lru))
	}
}

// TestPrefillLimit: with decode tokens planned, the policy gets their
// Work and sizes each further chunk from its start position; a prompt with
// no decoding neighbour prefills with the whole budget.
func TestPrefillLimit(t *testing.T) {
	a := newFakeAlloc(64, 16)
	var asked []StepLoad
	var starts []int
	cfg := Config{MaxBatchedTokens: 64, MaxRunning: 8, PrefillLimit: func(l StepLoad) func(start, n int) int {
		asked = append(asked, l)
		left := 4 * l.Decode.Tokens // tokens for the step's chunks together
		return func(start, n int) int {
			starts = append(starts, start)
			n = min(n, left)
			left -= n
			return n
		}
	}}
	sc := mustNew(t, cfg, a)
	alone := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(100, 1)})
	if got := spans(step(t, sc, a))[alone.ID()]; got != (span{0, 64}) {
		t.Fatalf("alone: chunk %v, want the whole budget 0-64", got)
	}
	if len(asked) != 0 {
		t.Fatalf("policy asked %v without decode tokens", asked)
	}
	step(t, sc, a) // 64-100: the rest of the prompt and its first token
	d2 := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(3, 1)})
	step(t, sc, a) // d2's prompt (3 tokens <= 4 x 1 decode token)
	long := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(200, 1)})
	for i := 0; i < 3; i++ {
		asked, starts = asked[:0], starts[:0]
		got := spans(step(t, sc, a))
		// alone decodes at position 101+i (its 100 and d2's prompt ran together), d2 at 3+i.
		want := StepLoad{Decode: ChunkWork(101+i, 1).Add(ChunkWork(3+i, 1)), Decoding: 2, Prompts: 1}
		if len(asked) != 1 || asked[0] != want {
			t.Fatalf("step %d: policy asked %v, want [%v] (two decoding sequences)", i, asked, want)
		}
		if got[alone.ID()].end-got[alone.ID()].start != 1 || got[d2.ID()].end-got[d2.ID()].start != 1 {
			t.Fatalf("step %d: decode spans %v", i, got)
		}
		if c := got[long.ID()]; c.end-c.start != 8 || len(starts) != 1 || starts[0] != 96+8*i { // 96: the prefix it shares with alone
			t.Fatalf("step %d: prefill chunk %v (asked at %v), want 8 tokens (4 x 2 decode tokens) from %d", i, c, starts, 96+8*i)
		}
	}
	// An allowance spent by one chunk leaves the next waiting prompt out
	// of the step (not preempted, not admitted with zero tokens).
	late := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(50, 1)})
	asked = asked[:0]
	got := spans(step(t, sc, a))
	if len(asked) != 1 || asked[0].Prompts != 2 || asked[0].Decoding != 2 {
		t.Fatalf("policy asked %v, want 2 prompts (long running, late waiting) for 2 decoding", asked)
	}
	if _, in := got[late.ID()]; in || late.State() != Waiting || late.table != nil {
		t.Fatalf("late prompt in a step with no allowance left: %v, state %v, holds a table %v", got, late.State(), late.table != nil)
	}
}

// TestPrefillLimitOverAsk: a policy that answers more tokens than a
// chunk asked for gets what was asked (an engine policy once returned its
// minimum chunk for a prompt with fewer tokens left, and the step read
// past the sequence's tokens).
func TestPrefillLimitOverAsk(t *testing.T) {
	a := newFakeAlloc(64, 16)
	cfg := Config{MaxBatchedTokens: 64, MaxRunning: 8, PrefillLimit: func(StepLoad) func(start, n int) int {
		return func(int, int) int { return 1000 }
	}}
	sc := mustNew(t, cfg, a)
	first := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(5, 1)})
	step(t, sc, a) // first's prompt and first token
	short := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(3, 1)})
	got := spans(step(t, sc, a))
	if got[first.ID()] != (span{5, 6}) || got[short.ID()] != (span{0, 3}) {
		t.Fatalf("spans %v, want first decoding 5-6 and short's whole prompt 0-3", got)
	}
}

// TestChunkWork: a chunk's key count is the positions each of its tokens
// attends to.
func TestChunkWork(t *testing.T) {
	for _, c := range []struct{ start, n int }{{0, 1}, {0, 5}, {7, 1}, {100, 33}} {
		keys := 0
		for p := c.start; p < c.start+c.n; p++ {
			keys += p + 1
		}
		if w := ChunkWork(c.start, c.n); w != (Work{c.n, keys}) {
			t.Fatalf("ChunkWork(%d, %d) = %v, want {%d %d}", c.start, c.n, w, c.n, keys)
		}
	}
}

// TestWholeSequences: a whole sequence (an encoder's input) is computed in
// one item or waits, whatever the chunk allowance; it neither reuses nor
// publishes prefix-cache pages; Add refuses one that cannot fit a step.
func TestWholeSequences(t *testing.T) {
	a := newFakeAlloc(16, 4)
	sc := mustNew(t, Config{MaxBatchedTokens: 24, MaxRunning: 4,
		PrefillLimit: func(StepLoad) func(start, n int) int { return func(int, int) int { return 2 } }}, a)
	prompt := seqTokens(10, 1)
	plain := mustAdd(t, sc, SeqOptions{Tokens: prompt})
	for plain.Computed() < len(prompt) {
		step(t, sc, a)
	}
	sc.Finish(plain) // its full pages are in the prefix cache now

	// A decoding neighbour makes the allowance (2 tokens) apply to chunks.
	dec := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(3, 500)})
	for dec.Computed() < 3 {
		step(t, sc, a)
	}
	w1 := mustAdd(t, sc, SeqOptions{Tokens: prompt, Whole: true})
	p := step(t, sc, a)
	if got := spans(p)[w1.ID()]; got != (span{0, 10}) || w1.Cached() != 0 {
		t.Fatalf("whole sequence: item %v, cached %d; want [0, 10) from no cached page", got, w1.Cached())
	}
	sc.Finish(w1)
	// Nothing a whole sequence computes is published: a plain sequence
	// with its prompt finds no cached page.
	prompt2 := seqTokens(10, 100)
	w1 = mustAdd(t, sc, SeqOptions{Tokens: prompt2, Whole: true})
	step(t, sc, a)
	sc.Finish(w1)
	again := mustAdd(t, sc, SeqOptions{Tokens: append(slices.Clone(prompt2), 7, 7, 7, 7, 7, 7)})
	step(t, sc, a)
	if again.Cached() != 0 {
		t.Fatalf("cached %d tokens of a whole sequence's pages", again.Cached())
	}
	sc.Finish(again)

	// The budget left after the decode token (24-1) cannot take 24
	// tokens: the whole sequence waits rather than starting a chunk.
	w2 := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(24, 300), Whole: true})
	p = step(t, sc, a)
	if _, ok := spans(p)[w2.ID()]; ok || w2.State() != Waiting {
		t.Fatalf("a whole sequence over the step's budget got an item %v (state %v)", spans(p), w2.State())
	}
	sc.Finish(dec)
	p = step(t, sc, a)
	if got := spans(p)[w2.ID()]; got != (span{0, 24}) {
		t.Fatalf("alone: item %v, want [0, 24)", got)
	}
	sc.Finish(w2)

	for _, o := range []SeqOptions{
		{Tokens: seqTokens(25, 1), Whole: true},
		{Tokens: seqTokens(4, 1), Whole: true, Open: true},
		{Tokens: seqTokens(4, 1), Whole: true, Width: 2},
	} {
		if _, err := sc.Add(o); err == nil {
			t.Fatalf("Add(%d tokens, open %v, width %d) accepted a whole sequence", len(o.Tokens), o.Open, o.Width)
		}
	}
	if err := a.check(); err != nil {
		t.Fatal(err)
	}
}
