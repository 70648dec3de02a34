package scheduler

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// decodeReady runs steps until s has sampled its first token (it then has
// exactly its last token to compute).
func decodeReady(t *testing.T, sc *Scheduler, a *fakeAlloc, s *Seq) {
	t.Helper()
	for i := 0; s.Known() == s.Computed() || s.Known()-s.Computed() != 1 || i == 0; i++ {
		step(t, sc, a)
		if i > 100 {
			t.Fatal("sequence never became ready to decode")
		}
	}
}

// noDraftInIndex fails when a prefix-cache key holds a draft token of
// these tests (9001..) beyond the first accepted ones.
func noDraftInIndex(t *testing.T, a *fakeAlloc, accepted int) {
	t.Helper()
	for k := range a.index {
		for _, f := range strings.Fields(strings.Trim(k, "[]")) {
			if len(f) == 4 && f[0] == '9' && f[3]-'0' > byte(accepted) {
				t.Fatalf("prefix cache holds a rejected draft token: %s", k)
			}
		}
	}
}

func TestSpeculativeAcceptRollsBack(t *testing.T) {
	for _, accept := range []int{0, 1, 2, 5} {
		a := newFakeAlloc(32, 4)
		sc := mustNew(t, Config{MaxBatchedTokens: 64, MaxRunning: 4}, a)
		s := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(6, 1)})
		decodeReady(t, sc, a, s)
		L := s.Known() // 7: prompt plus one sampled token
		drafts := []int32{9001, 9002, 9003, 9004, 9005}
		if err := sc.Propose(s, drafts); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Drafts(), drafts) || s.Draft() != 5 {
			t.Fatalf("drafts %v", s.Drafts())
		}
		p := sc.Plan()
		if len(p.Items) != 1 {
			t.Fatalf("%d items", len(p.Items))
		}
		it := p.Items[0]
		if it.Start != L-1 || it.End != L+5 || it.Draft != 5 || it.LogitsStart != L-1 || !it.Sample || it.Logits() != 6 {
			t.Fatalf("item %+v", it)
		}
		if err := a.run(&p); err != nil {
			t.Fatal(err)
		}
		sc.Advance(&p)
		noDraftInIndex(t, a, 0)
		free := a.Available()
		sc.Accept(s, accept)
		k := min(accept, 5)
		if s.Known() != L+k || s.Computed() != L+k || s.Draft() != 0 {
			t.Fatalf("accept %d: known %d computed %d draft %d", accept, s.Known(), s.Computed(), s.Draft())
		}
		if got, want := len(s.Table().Pages()), (L+k+3)/4; got != want {
			t.Fatalf("accept %d: %d pages, want %d", accept, got, want)
		}
		if a.Available() < free {
			t.Fatalf("accept %d: available pages fell from %d to %d", accept, free, a.Available())
		}
		if err := a.check(); err != nil {
			t.Fatal(err)
		}
		noDraftInIndex(t, a, k)
		// Decoding continues on the kept positions; a.run checks every
		// position the next items attend to holds the sequence's token.
		if err := sc.Append(s, 7000); err != nil {
			t.Fatal(err)
		}
		for range 6 {
			step(t, sc, a)
		}
		noDraftInIndex(t, a, k)
		sc.Finish(s)
		if err := a.check(); err != nil {
			t.Fatal(err)
		}
		if a.Available() != 32 {
			t.Fatalf("%d pages available after finish", a.Available())
		}
	}
}

func TestSpeculativeDraftsDropped(t *testing.T) {
	t.Run("budget", func(t *testing.T) {
		a := newFakeAlloc(32, 4)
		sc := mustNew(t, Config{MaxBatchedTokens: 3, MaxRunning: 4}, a)
		s := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(3, 1)})
		decodeReady(t, sc, a, s)
		L := s.Known()
		if err := sc.Propose(s, []int32{9001, 9002, 9003}); err != nil {
			t.Fatal(err)
		}
		p := sc.Plan()
		if it := p.Items[0]; it.Draft != 0 || it.End-it.Start != 1 || s.Known() != L {
			t.Fatalf("item %+v known %d", it, s.Known())
		}
	})
	t.Run("budget shared", func(t *testing.T) {
		a := newFakeAlloc(32, 4)
		sc := mustNew(t, Config{MaxBatchedTokens: 5, MaxRunning: 4}, a)
		s1 := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(2, 1), Priority: 1})
		s2 := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(2, 50)})
		decodeReady(t, sc, a, s1)
		decodeReady(t, sc, a, s2)
		for _, s := range []*Seq{s1, s2} {
			if err := sc.Propose(s, []int32{9001, 9002, 9003}); err != nil {
				t.Fatal(err)
			}
		}
		p := sc.Plan()
		// s1 keeps its drafts with the budget s2's token leaves; s2 decodes plainly.
		if len(p.Items) != 2 || p.Items[0].Seq != s1 || p.Items[0].Draft != 3 || p.Items[1].Draft != 0 || s2.Draft() != 0 {
			t.Fatalf("items %+v, s2 drafts %d", p.Items, s2.Draft())
		}
	})
	t.Run("preempted", func(t *testing.T) {
		a := newFakeAlloc(32, 4)
		sc := mustNew(t, Config{MaxBatchedTokens: 64, MaxRunning: 4}, a)
		s := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(3, 1)})
		decodeReady(t, sc, a, s)
		L := s.Known()
		if err := sc.Propose(s, []int32{9001}); err != nil {
			t.Fatal(err)
		}
		sc.preempt(s)
		if s.Known() != L || s.Draft() != 0 {
			t.Fatalf("known %d draft %d after preemption", s.Known(), s.Draft())
		}
	})
}

func TestProposeRefused(t *testing.T) {
	a := newFakeAlloc(32, 4)
	sc := mustNew(t, Config{}, a)
	waiting := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(3, 1)})
	if err := sc.Propose(waiting, []int32{1}); !errors.Is(err, ErrNoDraft) {
		t.Fatalf("waiting: %v", err)
	}
	open := mustAdd(t, sc, SeqOptions{Tokens: seqTokens(3, 1), Open: true})
	step(t, sc, a)
	if err := sc.Propose(open, []int32{1}); !errors.Is(err, ErrNoDraft) {
		t.Fatalf("open: %v", err)
	}
	decodeReady(t, sc, a, waiting)
	if err := sc.Propose(waiting, nil); !errors.Is(err, ErrNoDraft) {
		t.Fatalf("empty: %v", err)
	}
	if err := sc.Propose(waiting, []int32{1}); err != nil {
		t.Fatal(err)
	}
	if err := sc.Propose(waiting, []int32{1}); !errors.Is(err, ErrNoDraft) {
		t.Fatalf("twice: %v", err)
	}
}

// TestSpeculationDoesNotStarveDecoders: when drafts would take the budget
// that other decoding sequences need, the later sequences' drafts are
// dropped and every decoder still gets its token each step.
func TestSpeculationDoesNotStarveDecoders(t *testing.T) {
	a := newFakeAlloc(64, 4)
	sc := mustNew(t, Config{MaxBatchedTokens: 10, MaxRunning: 4}, a)
	var seqs []*Seq
	for i := range 3 {
		seqs = append(seqs, mustAdd(t, sc, SeqOptions{Tokens: seqTokens(2, int32(10*i+1))}))
	}
	for _, s := range seqs {
		decodeReady(t, sc, a, s)
	}
	for _, s := range seqs {
		if err := sc.Propose(s, []int32{9001, 9002, 9003, 9004}); err != nil {
			t.Fatal(err)
		}
	}
	p := sc.Plan()
	if len(p.Items) != 3 || p.Tokens > 10 {
		t.Fatalf("%d items, %d tokens: every decoder must run within the budget", len(p.Items), p.Tokens)
	}
	if p.Items[0].Draft != 4 || p.Items[1].Draft != 0 || p.Items[2].Draft != 0 {
		t.Fatalf("drafts %d %d %d, want 4 0 0", p.Items[0].Draft, p.Items[1].Draft, p.Items[2].Draft)
	}
}
