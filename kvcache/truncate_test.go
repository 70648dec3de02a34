package kvcache

import (
	"slices"
	"testing"
)

// TestTruncate: rolling back slots releases the pages wholly beyond them,
// keeps the rest (and their contents), and a later append rewrites the
// kept partial page, copying it first when another table shares it.
func TestTruncate(t *testing.T) {
	tests := []struct {
		name       string
		have, keep int
		shared     bool // a fork holds all pages while truncating
		wantPages  int
		wantFree   int // free pages after truncation (16-page pool)
	}{
		{"within last page", 10, 9, false, 3, 13},
		{"drops one page", 10, 7, false, 2, 14},
		{"to a page boundary", 12, 8, false, 2, 14},
		{"to zero", 6, 0, false, 0, 16},
		{"no-op", 6, 6, false, 2, 14},
		{"shared pages stay in use", 10, 5, true, 2, 13},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, Config{NumPages: 16, PageSize: 4})
			a := s.c.NewTable(Namespace{})
			if err := s.extend(a, seq(0, tc.have)); err != nil {
				t.Fatal(err)
			}
			var f *Table
			if tc.shared {
				var err error
				if f, err = s.c.Fork(a); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.c.Truncate(a, tc.keep); err != nil {
				t.Fatal(err)
			}
			s.check()
			if a.Len() != tc.keep || len(a.Pages()) != tc.wantPages {
				t.Fatalf("Len %d pages %d, want %d and %d", a.Len(), len(a.Pages()), tc.keep, tc.wantPages)
			}
			if st := s.c.Stats(); st.Free != tc.wantFree {
				t.Fatalf("%d free pages, want %d", st.Free, tc.wantFree)
			}
			s.verify(a, seq(0, tc.keep))
			// Re-append different tokens over the rolled-back slots.
			if err := s.extend(a, seq(500, 3)); err != nil {
				t.Fatal(err)
			}
			s.verify(a, slices.Concat(seq(0, tc.keep), seq(500, 3)))
			if f != nil {
				s.verify(f, seq(0, tc.have)) // the fork's pages are untouched
				s.c.Release(f)
			}
			s.check()
			s.c.Release(a)
			wantLedger(t, s.c, 16, 0, 0, 0)
		})
	}
}

// TestTruncateForgetsHashes: a committed page that truncation cuts into
// leaves the table's hash chain, so a later commit re-hashes the new
// tokens; the indexed page itself is copied before it is rewritten.
func TestTruncateForgetsHashes(t *testing.T) {
	s := newSim(t, Config{NumPages: 16, PageSize: 4})
	a := s.c.NewTable(Namespace{})
	if err := s.extend(a, seq(0, 8)); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Commit(a, seq(0, 8)); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Truncate(a, 6); err != nil {
		t.Fatal(err)
	}
	if a.HashedPages() != 1 {
		t.Fatalf("%d hashed pages, want 1", a.HashedPages())
	}
	if err := s.extend(a, seq(300, 2)); err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(seq(0, 6), seq(300, 2))
	if err := s.c.Commit(a, want); err != nil {
		t.Fatal(err)
	}
	s.verify(a, want)
	s.check()
	// The original block 2 (tokens 4..7) is still matchable and intact.
	m, n := s.c.Match(seq(0, 9), Namespace{}, -1)
	if n != 8 {
		t.Fatalf("match %d tokens, want 8", n)
	}
	s.verify(m, seq(0, 8))
	s.c.Release(m)
	s.c.Release(a)
	if err := s.c.Truncate(a, 0); err == nil {
		t.Fatal("truncate of a released table succeeded")
	}
	s.check()
}
