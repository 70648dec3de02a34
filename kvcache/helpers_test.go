package kvcache

import (
	"errors"
	"slices"
	"testing"
)

// sim couples a cache with a shadow of the runner's K/V memory: one token
// id per slot (-1 = never written). It performs the copies PrepareAppend
// asks for and writes token ids where the runner would write K/V, so tests
// can check that a table's pages really hold its tokens (copy-on-write and
// prefix reuse correctness).
type sim struct {
	tb  testing.TB
	c   *Cache
	mem [][]int32 // [NumPages][PageSize]
}

func newSim(tb testing.TB, cfg Config) *sim {
	tb.Helper()
	c, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	s := &sim{tb: tb, c: c, mem: make([][]int32, c.NumPages())}
	for i := range s.mem {
		s.mem[i] = slices.Repeat([]int32{-1}, c.PageSize())
	}
	return s
}

// extend reserves len(toks) slots in t (which holds all[:t.Len()]),
// performs the copies and writes toks at the new positions.
func (s *sim) extend(t *Table, toks []int32) error {
	s.tb.Helper()
	start := t.Len()
	copies, err := s.c.PrepareAppend(t, len(toks))
	if err != nil {
		return err
	}
	for _, cp := range copies {
		copy(s.mem[cp.Dst], s.mem[cp.Src])
	}
	pages := t.Pages()
	ps := s.c.PageSize()
	for i, tok := range toks {
		p := start + i
		s.mem[pages[p/ps]][p%ps] = tok
	}
	return nil
}

// verify checks that t's pages hold want in their first len(want) slots.
func (s *sim) verify(t *Table, want []int32) {
	s.tb.Helper()
	if t.Len() < len(want) {
		s.tb.Fatalf("table has %d tokens, want at least %d", t.Len(), len(want))
	}
	pages := t.Pages()
	ps := s.c.PageSize()
	for p, tok := range want {
		if got := s.mem[pages[p/ps]][p%ps]; got != tok {
			s.tb.Fatalf("position %d (page %d): memory holds %d, want %d", p, pages[p/ps], got, tok)
		}
	}
}

// check fails the test when the ledger is inconsistent.
func (s *sim) check() {
	s.tb.Helper()
	if err := s.c.CheckIntegrity(); err != nil {
		s.tb.Fatalf("CheckIntegrity: %v", err)
	}
}

// seq returns n token ids start, start+1, ...
func seq(start, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(start + i)
	}
	return out
}

// mustStats compares selected ledger figures.
func wantLedger(tb testing.TB, c *Cache, free, cached, inUse, pinned int) {
	tb.Helper()
	st := c.Stats()
	if st.Free != free || st.Cached != cached || st.InUse != inUse || st.Pinned != pinned {
		tb.Fatalf("ledger free/cached/in_use/pinned = %d/%d/%d/%d, want %d/%d/%d/%d",
			st.Free, st.Cached, st.InUse, st.Pinned, free, cached, inUse, pinned)
	}
	if st.Free+st.Cached+st.InUse+st.Pinned != st.Total {
		tb.Fatalf("ledger states sum to %d, pool has %d", st.Free+st.Cached+st.InUse+st.Pinned, st.Total)
	}
}

func mustErr(tb testing.TB, err, target error) {
	tb.Helper()
	if !errors.Is(err, target) {
		tb.Fatalf("error %v, want %v", err, target)
	}
}
