package kvcache

import (
	"errors"
	"math"
	"testing"
)

func TestNewConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
		size    int
	}{
		{"defaults", Config{NumPages: 8}, false, DefaultPageSize},
		{"custom page size", Config{NumPages: 8, PageSize: 32}, false, 32},
		{"no pages", Config{}, true, 0},
		{"negative pages", Config{NumPages: -1}, true, 0},
		{"negative page size", Config{NumPages: 4, PageSize: -16}, true, 0},
		{"negative pin budget", Config{NumPages: 4, MaxPinnedPages: -1}, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.cfg)
			if tc.wantErr {
				mustErr(t, err, ErrBadArgument)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.PageSize() != tc.size || c.NumPages() != tc.cfg.NumPages {
				t.Fatalf("page size %d pages %d", c.PageSize(), c.NumPages())
			}
			wantLedger(t, c, tc.cfg.NumPages, 0, 0, 0)
			if err := c.CheckIntegrity(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPagesForBudget(t *testing.T) {
	tests := []struct {
		name          string
		bytes, perPge int64
		want          int
	}{
		{"exact", 1 << 20, 1 << 10, 1024},
		{"rounds down", 1000, 300, 3},
		{"too small", 100, 300, 0},
		{"zero budget", 0, 300, 0},
		{"negative page", 1000, -1, 0},
		{"zero page", 1000, 0, 0},
		{"capped", math.MaxInt64, 1, math.MaxInt32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := PagesForBudget(tc.bytes, tc.perPge); got != tc.want {
				t.Fatalf("PagesForBudget(%d, %d) = %d, want %d", tc.bytes, tc.perPge, got, tc.want)
			}
		})
	}
}

func TestAllocateRelease(t *testing.T) {
	tests := []struct {
		name      string
		appends   []int // PrepareAppend sizes, in order
		wantPages int
		wantErr   error // of the last append
	}{
		{"empty", nil, 0, nil},
		{"one token", []int{1}, 1, nil},
		{"exactly one page", []int{4}, 1, nil},
		{"page boundary", []int{4, 1}, 2, nil},
		{"token by token", []int{1, 1, 1, 1, 1, 1, 1, 1, 1}, 3, nil},
		{"whole pool", []int{32}, 8, nil},
		{"zero append", []int{3, 0}, 1, nil},
		{"beyond pool", []int{30, 3}, 8, ErrNoPages},
		{"negative", []int{-1}, 0, ErrBadArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, Config{NumPages: 8, PageSize: 4})
			tb := s.c.NewTable(Namespace{})
			total := 0
			var err error
			for _, n := range tc.appends {
				before := tb.Len()
				if n < 0 {
					_, err = s.c.PrepareAppend(tb, n)
				} else {
					err = s.extend(tb, seq(total, n))
				}
				if err != nil {
					if tb.Len() != before {
						t.Fatalf("failed append changed Len %d -> %d", before, tb.Len())
					}
					break
				}
				total += n
			}
			if tc.wantErr != nil {
				mustErr(t, err, tc.wantErr)
			} else if err != nil {
				t.Fatal(err)
			}
			if got := len(tb.Pages()); got != tc.wantPages {
				t.Fatalf("%d pages, want %d", got, tc.wantPages)
			}
			if tb.Len() != total {
				t.Fatalf("Len %d, want %d", tb.Len(), total)
			}
			s.verify(tb, seq(0, total))
			wantLedger(t, s.c, 8-tc.wantPages, 0, tc.wantPages, 0)
			s.check()
			s.c.Release(tb)
			s.c.Release(tb) // idempotent
			s.c.Release(nil)
			if !tb.Released() || tb.Len() != 0 || len(tb.Pages()) != 0 {
				t.Fatalf("released table: released=%v len=%d pages=%v", tb.Released(), tb.Len(), tb.Pages())
			}
			wantLedger(t, s.c, 8, 0, 0, 0)
			s.check()
		})
	}
}

func TestReleasedAndForeignTables(t *testing.T) {
	s := newSim(t, Config{NumPages: 4, PageSize: 4})
	other := newSim(t, Config{NumPages: 4, PageSize: 4})
	tb := s.c.NewTable(Namespace{})
	s.c.Release(tb)
	foreign := other.c.NewTable(Namespace{})
	tests := []struct {
		name string
		op   func() error
		want error
	}{
		{"append released", func() error { _, err := s.c.PrepareAppend(tb, 1); return err }, ErrReleased},
		{"fork released", func() error { _, err := s.c.Fork(tb); return err }, ErrReleased},
		{"commit released", func() error { return s.c.Commit(tb, nil) }, ErrReleased},
		{"pin released", func() error { return s.c.Pin("a", tb) }, ErrReleased},
		{"needed released", func() error { _, err := s.c.PagesNeeded(tb, 1); return err }, ErrReleased},
		{"append foreign", func() error { _, err := s.c.PrepareAppend(foreign, 1); return err }, ErrForeignTable},
		{"fork nil", func() error { _, err := s.c.Fork(nil); return err }, ErrBadArgument},
		{"pin empty owner", func() error { return s.c.Pin("", foreign) }, ErrBadArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mustErr(t, tc.op(), tc.want)
			s.check()
		})
	}
	s.c.Release(foreign) // foreign: ignored, still live in its own cache
	if foreign.Released() {
		t.Fatal("Release on a foreign cache released the table")
	}
	other.c.Release(foreign)
	other.check()
}

func TestForkCopyOnWrite(t *testing.T) {
	tests := []struct {
		name       string
		prompt     int // tokens before the fork
		forkAt     int // ForkPrefix length (-1: Fork)
		appendA    int // tokens appended to the original
		appendB    int // tokens appended to the fork
		wantCopies int // total COW copies
	}{
		{"partial last page, both append", 6, -1, 1, 1, 1},
		{"partial last page, fork appends", 6, -1, 0, 3, 1},
		{"full pages, no copy", 8, -1, 2, 2, 0},
		{"prefix mid page", 8, 5, 0, 2, 1},
		{"prefix on boundary", 8, 4, 1, 1, 0},
		{"empty prefix", 8, 0, 1, 1, 0},
		{"no appends", 6, -1, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, Config{NumPages: 16, PageSize: 4})
			a := s.c.NewTable(Namespace{})
			if err := s.extend(a, seq(0, tc.prompt)); err != nil {
				t.Fatal(err)
			}
			var b *Table
			var err error
			shared := tc.prompt
			if tc.forkAt < 0 {
				b, err = s.c.Fork(a)
			} else {
				b, err = s.c.ForkPrefix(a, tc.forkAt)
				shared = tc.forkAt
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Len() != shared {
				t.Fatalf("fork Len %d, want %d", b.Len(), shared)
			}
			s.check()
			if err := s.extend(a, seq(100, tc.appendA)); err != nil {
				t.Fatal(err)
			}
			if err := s.extend(b, seq(200, tc.appendB)); err != nil {
				t.Fatal(err)
			}
			s.verify(a, append(seq(0, tc.prompt), seq(100, tc.appendA)...))
			s.verify(b, append(seq(0, shared), seq(200, tc.appendB)...))
			if got := s.c.Stats().COWCopies; got != uint64(tc.wantCopies) {
				t.Fatalf("%d copies, want %d", got, tc.wantCopies)
			}
			s.check()
			s.c.Release(a)
			s.verify(b, append(seq(0, shared), seq(200, tc.appendB)...))
			s.check()
			s.c.Release(b)
			wantLedger(t, s.c, 16, 0, 0, 0)
			s.check()
		})
	}
}

func TestForkPrefixBounds(t *testing.T) {
	s := newSim(t, Config{NumPages: 4, PageSize: 4})
	a := s.c.NewTable(Namespace{})
	if err := s.extend(a, seq(0, 5)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{-1, 6} {
		if _, err := s.c.ForkPrefix(a, n); !errors.Is(err, ErrBadArgument) {
			t.Fatalf("ForkPrefix(%d): %v, want ErrBadArgument", n, err)
		}
	}
	s.check()
}

func TestPagesNeededMatchesPrepareAppend(t *testing.T) {
	s := newSim(t, Config{NumPages: 64, PageSize: 4})
	a := s.c.NewTable(Namespace{})
	if err := s.extend(a, seq(0, 6)); err != nil {
		t.Fatal(err)
	}
	b, _ := s.c.Fork(a)
	for _, n := range []int{0, 1, 2, 3, 5, 9} {
		need, err := s.c.PagesNeeded(b, n)
		if err != nil {
			t.Fatal(err)
		}
		before := s.c.Available()
		if err := s.extend(b, seq(0, n)); err != nil {
			t.Fatal(err)
		}
		if got := before - s.c.Available(); got != need {
			t.Fatalf("append %d: PagesNeeded %d, took %d", n, need, got)
		}
	}
	s.check()
}

func TestNoPagesLeavesTableUnchanged(t *testing.T) {
	s := newSim(t, Config{NumPages: 3, PageSize: 4})
	a := s.c.NewTable(Namespace{})
	if err := s.extend(a, seq(0, 6)); err != nil {
		t.Fatal(err)
	}
	b, _ := s.c.Fork(a)
	// b needs a COW copy plus 2 new pages: 3 > 1 available.
	pages := b.Pages()
	_, err := s.c.PrepareAppend(b, 6)
	mustErr(t, err, ErrNoPages)
	if b.Len() != 6 || len(b.Pages()) != len(pages) || b.Pages()[1] != pages[1] {
		t.Fatalf("table changed after ErrNoPages: len %d pages %v (was %v)", b.Len(), b.Pages(), pages)
	}
	wantLedger(t, s.c, 1, 0, 2, 0)
	s.check()
}
