package kvcache

import (
	"slices"
	"testing"
)

func TestPinnedNeverEvicted(t *testing.T) {
	s := newSim(t, Config{NumPages: 6, PageSize: 2})
	P := seq(1, 4) // 2 pages
	a, _ := s.run(P, Namespace{})
	if err := s.c.Pin("session-1", a); err != nil {
		t.Fatal(err)
	}
	s.c.Release(a) // pins outlive the table
	wantLedger(t, s.c, 4, 0, 0, 2)
	s.check()
	// Fill the pool: only the 4 free pages can be taken.
	z := s.c.NewTable(Namespace{})
	if err := s.extend(z, seq(100, 8)); err != nil {
		t.Fatal(err)
	}
	_, err := s.c.PrepareAppend(z, 1)
	mustErr(t, err, ErrNoPages)
	s.check()
	// The pinned prefix is still matchable and intact.
	b, cached := s.c.Match(P, Namespace{}, -1)
	if cached != 4 {
		t.Fatalf("pinned prefix cached %d, want 4", cached)
	}
	s.verify(b, P)
	s.c.Release(b)
	s.c.Release(z)
	s.check()
}

func TestUnpinBecomesCached(t *testing.T) {
	tests := []struct {
		name       string
		prompt     int // tokens (page size 4)
		commit     bool
		keepTable  bool
		wantCached int
		wantFree   int
		wantInUse  int
	}{
		{"indexed pages become cached", 8, true, false, 2, 6, 0},
		{"partial page becomes free", 10, true, false, 2, 6, 0},
		{"uncommitted pages become free", 8, false, false, 0, 8, 0},
		{"held by a table stay in use", 10, true, true, 0, 5, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, Config{NumPages: 8, PageSize: 4})
			p := seq(1, tc.prompt)
			a := s.c.NewTable(Namespace{})
			if err := s.extend(a, p); err != nil {
				t.Fatal(err)
			}
			if tc.commit {
				if err := s.c.Commit(a, p); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.c.Pin("o", a); err != nil {
				t.Fatal(err)
			}
			if !tc.keepTable {
				s.c.Release(a)
			}
			s.check()
			if n := s.c.Unpin("o"); n != (tc.prompt+3)/4 {
				t.Fatalf("Unpin returned %d", n)
			}
			if n := s.c.Unpin("o"); n != 0 {
				t.Fatalf("second Unpin returned %d", n)
			}
			wantLedger(t, s.c, tc.wantFree, tc.wantCached, tc.wantInUse, 0)
			s.check()
			s.c.Release(a)
			s.check()
		})
	}
}

func TestPinBudgets(t *testing.T) {
	tests := []struct {
		name            string
		global, perOwnr int
		ops             []pinOp
	}{
		{"per owner exceeded", 0, 2, []pinOp{
			{"a", opNewTable, 2, nil}, {"a", opNewTable, 3, ErrPinBudget},
		}},
		{"per owner union", 0, 3, []pinOp{
			{"a", opNewTable, 2, nil}, {"a", opGrowLast, 1, nil}, // 2 pinned + 1 new page = 3
			{"a", opGrowLast, 1, ErrPinBudget},
		}},
		{"global exceeded", 4, 0, []pinOp{
			{"a", opNewTable, 3, nil}, {"b", opNewTable, 3, ErrPinBudget},
		}},
		{"shared pages count once", 4, 0, []pinOp{
			{"a", opNewTable, 3, nil}, {"b", opSameTable, 0, nil},
		}},
		{"repin replaces", 3, 3, []pinOp{
			{"a", opRepinNew, 3, nil}, {"a", opRepinNew, 3, nil}, {"a", opRepinNew, 4, ErrPinBudget},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, Config{NumPages: 32, PageSize: 4, MaxPinnedPages: tc.global, MaxPinnedPagesPerOwner: tc.perOwnr})
			var last *Table
			for i, op := range tc.ops {
				tb := last
				switch op.kind {
				case opNewTable, opRepinNew:
					tb = s.c.NewTable(Namespace{})
					if err := s.extend(tb, seq(i*1000, op.pages*4)); err != nil {
						t.Fatal(err)
					}
				case opGrowLast:
					if err := s.extend(tb, seq(i*1000, op.pages*4)); err != nil {
						t.Fatal(err)
					}
				}
				before := s.c.Stats().Pinned
				beforeOwner := s.c.PinnedPages(op.owner)
				var err error
				if op.kind == opRepinNew {
					err = s.c.Repin(op.owner, tb)
				} else {
					err = s.c.Pin(op.owner, tb)
				}
				if op.want != nil {
					mustErr(t, err, op.want)
					if s.c.Stats().Pinned != before || s.c.PinnedPages(op.owner) != beforeOwner {
						t.Fatal("a refused pin changed the pinned counts")
					}
				} else if err != nil {
					t.Fatalf("op %d: %v", i, err)
				} else if op.kind == opRepinNew && s.c.PinnedPages(op.owner) != op.pages {
					t.Fatalf("op %d: owner pins %d, want %d", i, s.c.PinnedPages(op.owner), op.pages)
				}
				last = tb
				s.check()
			}
			s.c.Unpin("a")
			s.c.Unpin("b")
			if st := s.c.Stats(); st.Pinned != 0 || st.PinOwners != 0 {
				t.Fatalf("after unpin: %+v", st)
			}
			s.check()
		})
	}
}

type pinOpKind int

const (
	opNewTable  pinOpKind = iota // Pin a new table of pages pages
	opSameTable                  // Pin the previous op's table
	opGrowLast                   // grow the previous table by pages pages, Pin it
	opRepinNew                   // Repin a new table of pages pages
)

type pinOp struct {
	owner string
	kind  pinOpKind
	pages int
	want  error
}

func TestRepinTurnByTurn(t *testing.T) {
	// A session's turns: each turn's table extends the last; Repin moves
	// the pins. Pages of the old turn that the new one shares stay pinned;
	// the old partial last page (copied on write) is released.
	s := newSim(t, Config{NumPages: 16, PageSize: 4, MaxPinnedPagesPerOwner: 4})
	hist := seq(1, 6)
	turn, _ := s.run(hist, Namespace{})
	if err := s.c.Repin("sess", turn); err != nil {
		t.Fatal(err)
	}
	keep, _ := s.c.Fork(turn) // the session's own handle on its retained tokens
	s.c.Release(turn)
	for i := range 4 {
		next, err := s.c.Fork(keep)
		if err != nil {
			t.Fatal(err)
		}
		more := seq(100*(i+1), 3)
		if err := s.extend(next, more); err != nil {
			t.Fatal(err)
		}
		hist = append(hist, more...)
		if err := s.c.Commit(next, hist); err != nil {
			t.Fatal(err)
		}
		err = s.c.Repin("sess", next)
		if i == 3 {
			mustErr(t, err, ErrPinBudget) // 15 tokens fit 4 pages; 18 need 5 > 4
			s.c.Release(next)
			break
		}
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		s.c.Release(keep)
		keep = next
		if got, want := s.c.PinnedPages("sess"), len(keep.Pages()); got != want {
			t.Fatalf("turn %d: %d pinned, want %d", i, got, want)
		}
		s.verify(keep, hist)
		s.check()
	}
	if err := s.c.Repin("sess", nil); err != nil {
		t.Fatal(err)
	}
	s.c.Release(keep)
	if st := s.c.Stats(); st.Pinned != 0 || st.InUse != 0 {
		t.Fatalf("after close: %+v", st)
	}
	s.check()
}

// TestPinnedTable: an owner hands its pinned pages to a new table, the
// partly filled last page included (issue 17 point 12). Appending copies
// the pinned page first, so a branch cut inside it, or an append past the
// owner's tokens, never changes the owner's K/V; dropping the pins while a
// table holds the pages keeps them in use until it is released.
func TestPinnedTable(t *testing.T) {
	s := newSim(t, Config{NumPages: 8, PageSize: 4})
	hist := seq(1, 6) // one full page and 2 slots of the next
	a := s.c.NewTable(Namespace{})
	if err := s.extend(a, hist); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Commit(a, hist); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Repin("sess", a); err != nil {
		t.Fatal(err)
	}
	pinned := a.Pages()
	s.c.Release(a)
	wantLedger(t, s.c, 6, 0, 0, 2)
	s.check()
	owner := func() {
		t.Helper()
		v, err := s.c.PinnedTable("sess", Namespace{}, len(hist))
		if err != nil {
			t.Fatal(err)
		}
		s.verify(v, hist)
		if got := s.mem[pinned[1]][2:]; got[0] != -1 || got[1] != -1 {
			t.Fatalf("slots past the owner's tokens were written in its page: %v", got)
		}
		s.c.Release(v)
	}

	// Append: all 6 tokens reused, the partial page copied before writing.
	ap, err := s.c.PinnedTable("sess", Namespace{}, 6)
	if err != nil || ap.Len() != 6 || !slices.Equal(ap.Pages(), pinned) {
		t.Fatalf("pinned table %v len %d pages %v, want %v: %v", ap, ap.Len(), ap.Pages(), pinned, err)
	}
	wantLedger(t, s.c, 6, 0, 0, 2) // pinned wins over in use
	if n, _ := s.c.PagesNeeded(ap, 1); n != 1 {
		t.Fatalf("appending into a pinned partial page needs %d pages, want 1 (its copy)", n)
	}
	before := s.c.Stats().COWCopies
	if err := s.extend(ap, seq(50, 3)); err != nil {
		t.Fatal(err)
	}
	if s.c.Stats().COWCopies != before+1 || ap.Pages()[1] == pinned[1] {
		t.Fatal("the pinned partial page was written in place")
	}
	s.verify(ap, append(slices.Clone(hist), 50, 51, 52))
	owner()
	s.check()

	// Branch cut inside the partial page: position 5 is rewritten in the
	// copy only.
	br, err := s.c.PinnedTable("sess", Namespace{}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.extend(br, seq(90, 4)); err != nil {
		t.Fatal(err)
	}
	s.verify(br, append(slices.Clone(hist[:5]), 90, 91, 92, 93))
	owner()
	s.check()

	// A whole-page cut shares no partial page: nothing to copy.
	wp, _ := s.c.PinnedTable("sess", Namespace{}, 4)
	if n, _ := s.c.PagesNeeded(wp, 1); n != 1 || len(wp.Pages()) != 1 {
		t.Fatalf("whole-page cut: %d pages, needs %d", len(wp.Pages()), n)
	}
	s.c.Release(wp)

	// The owner's pins dropped (session evicted or closed) while tables
	// hold its pages: they stay in use, then become cached or free.
	s.c.Unpin("sess")
	s.check()
	if st := s.c.Stats(); st.Pinned != 0 || st.InUse == 0 {
		t.Fatalf("after unpin with live tables: %+v", st)
	}
	s.c.Release(ap)
	s.c.Release(br)
	s.c.Release(br) // twice is safe
	s.check()
	if st := s.c.Stats(); st.InUse != 0 || st.Free+st.Cached != st.Total {
		t.Fatalf("pages held after release: %+v", st)
	}

	// Bad arguments.
	_, err = s.c.PinnedTable("sess", Namespace{}, 1)
	mustErr(t, err, ErrBadArgument)
	_, err = s.c.PinnedTable("nobody", Namespace{}, -1)
	mustErr(t, err, ErrBadArgument)
	e, err := s.c.PinnedTable("nobody", Namespace{}, 0)
	if err != nil || e.Len() != 0 {
		t.Fatalf("empty pinned table: %v", err)
	}
	s.c.Release(e)
	s.check()
}
