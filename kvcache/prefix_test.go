package kvcache

import (
	"slices"
	"testing"
)

// run computes a whole prompt the way the engine would: Match (keeping one
// token to compute), extend by the rest, Commit everything. Returns the
// table and the cached token count.
func (s *sim) run(prompt []int32, ns Namespace) (*Table, int) {
	s.tb.Helper()
	t, cached := s.c.Match(prompt, ns, len(prompt)-1)
	s.verify(t, prompt[:cached])
	if err := s.extend(t, prompt[cached:]); err != nil {
		s.tb.Fatalf("extend: %v", err)
	}
	if err := s.c.Commit(t, prompt); err != nil {
		s.tb.Fatalf("Commit: %v", err)
	}
	s.verify(t, prompt)
	return t, cached
}

func TestPrefixMatchCommit(t *testing.T) {
	base := seq(1000, 40) // 10 pages of 4
	nsA := Namespace{}
	tests := []struct {
		name   string
		first  []int32 // computed, committed and released first
		second []int32
		ns2    Namespace
		limit  int // Match limit for the second (-2: len-1)
		want   int // cached tokens for the second
	}{
		{"identical prompt keeps one token", base[:16], base[:16], nsA, -2, 12},
		{"identical, no limit", base[:16], base[:16], nsA, -1, 16},
		{"longer second", base[:16], base[:30], nsA, -2, 16},
		{"shorter second", base[:30], base[:10], nsA, -2, 8},
		{"partial page not stored", base[:15], base[:20], nsA, -2, 12},
		{"diverge mid page", base[:16], append(seq(1000, 9), seq(5, 10)...), nsA, -2, 8},
		{"diverge first token", base[:16], append([]int32{7}, base[1:16]...), nsA, -2, 0},
		{"limit zero", base[:16], base[:16], nsA, 0, 0},
		{"limit inside page", base[:16], base[:16], nsA, 7, 4},
		{"other salt", base[:16], base[:16], Namespace{Salt: "tenant-b"}, -1, 0},
		{"other adapter", base[:16], base[:16], Namespace{Adapter: 3}, -1, 0},
		{"short prompt", base[:16], base[:3], nsA, -1, 0},
		{"empty prompt", base[:16], nil, nsA, -1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, Config{NumPages: 32, PageSize: 4})
			a, _ := s.run(tc.first, nsA)
			s.c.Release(a)
			s.check()
			stored := len(tc.first) / 4
			if st := s.c.Stats(); st.Cached != stored || st.Indexed != stored {
				t.Fatalf("after first: cached %d indexed %d, want %d", st.Cached, st.Indexed, stored)
			}
			limit := tc.limit
			if limit == -2 {
				limit = len(tc.second) - 1
			}
			b, cached := s.c.Match(tc.second, tc.ns2, limit)
			if cached != tc.want || b.Len() != tc.want {
				t.Fatalf("cached %d (Len %d), want %d", cached, b.Len(), tc.want)
			}
			s.verify(b, tc.second[:cached])
			if b.HashedPages() != cached/4 {
				t.Fatalf("hashed pages %d, want %d", b.HashedPages(), cached/4)
			}
			wantLedger(t, s.c, 32-stored, stored-cached/4, cached/4, 0)
			s.check()
			if err := s.extend(b, tc.second[cached:]); err != nil {
				t.Fatal(err)
			}
			if err := s.c.Commit(b, tc.second); err != nil {
				t.Fatal(err)
			}
			s.verify(b, tc.second)
			s.check()
			s.c.Release(b)
			s.check()
			if st := s.c.Stats(); st.InUse != 0 || st.Free+st.Cached != 32 {
				t.Fatalf("after release: %+v", st)
			}
		})
	}
}

func TestCommitRules(t *testing.T) {
	s := newSim(t, Config{NumPages: 16, PageSize: 4})
	p := seq(1, 10)
	a := s.c.NewTable(Namespace{})
	if err := s.extend(a, p[:6]); err != nil {
		t.Fatal(err)
	}
	mustErr(t, s.c.Commit(a, p[:7]), ErrBadArgument) // beyond reserved slots
	if err := s.c.Commit(a, p[:3]); err != nil {     // no full page: no-op
		t.Fatal(err)
	}
	if st := s.c.Stats(); st.Indexed != 0 {
		t.Fatalf("indexed %d after partial commit", st.Indexed)
	}
	if err := s.c.Commit(a, p[:6]); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Commit(a, p[:6]); err != nil { // again: nothing new
		t.Fatal(err)
	}
	if st := s.c.Stats(); st.Indexed != 1 || st.Stored != 1 || st.LastSeq != 1 {
		t.Fatalf("after commit: %+v", st)
	}
	s.check()
}

func TestCommitDedupe(t *testing.T) {
	// Two requests compute the same prompt at once: the second's pages
	// are duplicates, not stored, and freed (not cached) on release.
	s := newSim(t, Config{NumPages: 16, PageSize: 4})
	p := seq(1, 12)
	a, _ := s.c.Match(p, Namespace{}, len(p)-1)
	b, _ := s.c.Match(p, Namespace{}, len(p)-1)
	for _, tb := range []*Table{a, b} {
		if err := s.extend(tb, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.c.Commit(a, p); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Commit(b, p); err != nil {
		t.Fatal(err)
	}
	if st := s.c.Stats(); st.Indexed != 3 || st.LastSeq != 1 {
		t.Fatalf("indexed %d, last seq %d; want 3 and one batch", st.Indexed, st.LastSeq)
	}
	// b continues: its next full page chains on the shared hashes.
	if err := s.extend(b, seq(50, 4)); err != nil {
		t.Fatal(err)
	}
	full := append(slices.Clone(p), seq(50, 4)...)
	if err := s.c.Commit(b, full); err != nil {
		t.Fatal(err)
	}
	s.check()
	s.c.Release(b)
	wantLedger(t, s.c, 16-4, 1, 3, 0) // b's 3 duplicates freed, its 4th page cached
	s.c.Release(a)
	wantLedger(t, s.c, 12, 4, 0, 0)
	c, cached := s.c.Match(full, Namespace{}, -1)
	if cached != 16 {
		t.Fatalf("cached %d, want 16 (chain across a deduplicated page)", cached)
	}
	s.verify(c, full)
	s.c.Release(c)
	s.check()
}

func TestLRUEvictionOrder(t *testing.T) {
	// Pool of 6 pages of 2 tokens. Prompts X (pages x0 x1) then Y (y0 y1),
	// released in that order; then X is touched again. Allocation must
	// evict Y's tail first, then Y's head, then X's tail, X's head.
	s := newSim(t, Config{NumPages: 6, PageSize: 2})
	X, Y := seq(10, 4), seq(20, 4)
	x, _ := s.run(X, Namespace{})
	y, _ := s.run(Y, Namespace{})
	s.c.Release(x)
	s.c.Release(y)
	x2, cached := s.c.Match(X, Namespace{}, -1) // touch X
	if cached != 4 {
		t.Fatalf("X cached %d", cached)
	}
	s.c.Release(x2)
	wantLedger(t, s.c, 2, 4, 0, 0)
	h := func(toks []int32, parent uint64, hasParent bool) uint64 {
		return BlockHash(Namespace{}, parent, hasParent, toks)
	}
	x0 := h(X[:2], 0, false)
	x1 := h(X[2:], x0, true)
	y0 := h(Y[:2], 0, false)
	y1 := h(Y[2:], y0, true)
	sub, err := s.c.Subscribe(0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	want := []uint64{y1, y0, x1, x0}
	z := s.c.NewTable(Namespace{})
	for i := range 6 {
		if err := s.extend(z, seq(100+2*i, 2)); err != nil {
			t.Fatal(err)
		}
	}
	var got []uint64
	for len(sub.C()) > 0 {
		b := <-sub.C()
		for _, e := range b.Events {
			if e.Kind != BlockRemoved {
				t.Fatalf("unexpected event %v", e.Kind)
			}
			got = append(got, e.Hashes...)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("eviction order %x, want %x", got, want)
	}
	if st := s.c.Stats(); st.Evictions != 4 || st.Indexed != 0 {
		t.Fatalf("stats %+v", st)
	}
	_, err = s.c.PrepareAppend(z, 1)
	mustErr(t, err, ErrNoPages)
	s.check()
}

func TestClear(t *testing.T) {
	s := newSim(t, Config{NumPages: 8, PageSize: 2})
	a, _ := s.run(seq(1, 4), Namespace{})
	b, _ := s.run(seq(11, 4), Namespace{})
	s.c.Release(a)
	s.c.Clear()
	s.check()
	wantLedger(t, s.c, 6, 0, 2, 0)
	if _, cached := s.c.Match(seq(11, 4), Namespace{}, -1); cached != 0 {
		t.Fatalf("cached %d after Clear", cached)
	}
	s.c.Release(b) // its pages are no longer indexed: free
	s.check()
	wantLedger(t, s.c, 8, 0, 0, 0)
	if st := s.c.Stats(); st.Indexed != 0 || st.LastSeq != 3 {
		t.Fatalf("after Clear: %+v (want no index, 2 stores + 1 clear)", st)
	}
}

func TestCollisionIsAMiss(t *testing.T) {
	// Corrupt a stored page's token row to simulate a different block
	// under the same hash: Match must verify and miss.
	s := newSim(t, Config{NumPages: 8, PageSize: 4})
	p := seq(1, 8)
	a, _ := s.run(p, Namespace{})
	s.c.Release(a)
	s.c.mu.Lock()
	s.c.pageTokens(s.c.index[BlockHash(Namespace{}, 0, false, p[:4])])[0] = 999
	s.c.mu.Unlock()
	if _, cached := s.c.Match(p, Namespace{}, -1); cached != 0 {
		t.Fatalf("cached %d from a colliding block", cached)
	}
	s.check()
}

func TestBlockHashStable(t *testing.T) {
	// Fixed values: block hashes go on the wire and must not change
	// between processes or releases. Update only with a deliberate format
	// change.
	toks := seq(1, 16)
	root := BlockHash(Namespace{}, 0, false, toks)
	cases := []struct {
		name string
		got  uint64
		want uint64
	}{
		{"root", root, 0x996f099014d9fe98},
		{"child", BlockHash(Namespace{}, root, true, toks), 0xaa4de994a025cb84},
		{"salted", BlockHash(Namespace{Salt: "s"}, 0, false, toks), 0xe84f81c75caa6abc},
		{"adapter", BlockHash(Namespace{Adapter: 1}, 0, false, toks), 0x27025cb921460f26},
		{"odd length", BlockHash(Namespace{}, 0, false, toks[:3]), 0x5ba6617c6114398},
	}
	seen := map[uint64]string{}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, tc.got, tc.want)
		}
		if prev, dup := seen[tc.got]; dup {
			t.Errorf("%s and %s hash alike", tc.name, prev)
		}
		seen[tc.got] = tc.name
	}
	// Order and content sensitivity.
	swapped := slices.Clone(toks)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	if BlockHash(Namespace{}, 0, false, swapped) == root {
		t.Error("swapping two tokens kept the hash")
	}
	if BlockHash(Namespace{}, 0, true, toks) == root {
		t.Error("parent 0 hashes like no parent")
	}
}
