package scheduler

import (
	"fmt"
	"slices"
)

// fakeAlloc is a small reference-counted page pool with a prefix index, and
// a fake K/V memory: each page slot records the token written there, so
// tests can prove that page tables, copy-on-write and prefix reuse give
// every sequence exactly its own tokens.
type fakeAlloc struct {
	ps     int
	ref    []int     // per page: references from tables
	mem    [][]int32 // per page: token per slot (-1 unwritten)
	free   []int32
	index  map[string]int32 // prefix key -> page (full pages)
	keyOf  map[int32]string
	lru    []int32 // cached pages with ref 0, oldest first
	tables map[*fakeTable]bool
}

type fakeTable struct {
	salt     string
	pages    []int32
	released bool
}

func (t *fakeTable) Pages() []int32 { return t.pages }

func newFakeAlloc(pages, ps int) *fakeAlloc {
	a := &fakeAlloc{ps: ps, ref: make([]int, pages), mem: make([][]int32, pages),
		index: map[string]int32{}, keyOf: map[int32]string{}, tables: map[*fakeTable]bool{}}
	for i := range pages {
		a.mem[i] = slices.Repeat([]int32{-1}, ps)
		a.free = append(a.free, int32(i))
	}
	return a
}

func (a *fakeAlloc) PageSize() int   { return a.ps }
func (a *fakeAlloc) TotalPages() int { return len(a.ref) }
func (a *fakeAlloc) Available() int  { return len(a.free) + len(a.lru) }

func key(tokens []int32, salt string) string { return fmt.Sprint(salt, tokens) }

func (a *fakeAlloc) NewTable(salt string) Table {
	t := &fakeTable{salt: salt}
	a.tables[t] = true
	return t
}

func (a *fakeAlloc) take(p int32) {
	if a.ref[p] == 0 {
		if i := slices.Index(a.lru, p); i >= 0 {
			a.lru = slices.Delete(a.lru, i, i+1)
		}
	}
	a.ref[p]++
}

func (a *fakeAlloc) Match(tokens []int32, salt string, maxTokens int) (Table, int) {
	t := a.NewTable(salt).(*fakeTable)
	for n := a.ps; n <= maxTokens; n += a.ps {
		p, ok := a.index[key(tokens[:n], salt)]
		if !ok {
			break
		}
		a.take(p)
		t.pages = append(t.pages, p)
	}
	return t, len(t.pages) * a.ps
}

func (a *fakeAlloc) MatchPrefix(prefix Table, n int, tokens []int32, salt string, maxTokens int) (Table, int) {
	n = min(n, maxTokens)
	ft := prefix.(*fakeTable)
	c := a.NewTable(ft.salt).(*fakeTable)
	for _, p := range ft.pages[:(n+a.ps-1)/a.ps] {
		a.take(p)
		c.pages = append(c.pages, p)
	}
	return c, n
}

func (a *fakeAlloc) Fork(t Table) (Table, error) {
	ft := t.(*fakeTable)
	c := a.NewTable(ft.salt).(*fakeTable)
	for _, p := range ft.pages {
		a.take(p)
	}
	c.pages = slices.Clone(ft.pages)
	return c, nil
}

func (a *fakeAlloc) alloc() int32 {
	if len(a.free) > 0 {
		p := a.free[len(a.free)-1]
		a.free = a.free[:len(a.free)-1]
		a.ref[p] = 1
		return p
	}
	p := a.lru[0] // evict
	a.lru = a.lru[1:]
	delete(a.index, a.keyOf[p])
	delete(a.keyOf, p)
	a.ref[p] = 1
	return p
}

func (a *fakeAlloc) Grow(t Table, valid, total int) ([]Copy, error) {
	ft := t.(*fakeTable)
	need := (total+a.ps-1)/a.ps - len(ft.pages)
	cowIdx := -1
	if valid%a.ps != 0 && valid/a.ps < len(ft.pages) {
		if p := ft.pages[valid/a.ps]; a.ref[p] > 1 || a.keyOf[p] != "" {
			cowIdx = valid / a.ps
		}
	}
	extra := max(need, 0)
	if cowIdx >= 0 {
		extra++
	}
	if extra > a.Available() {
		return nil, ErrNoPages
	}
	var copies []Copy
	if cowIdx >= 0 {
		src := ft.pages[cowIdx]
		dst := a.alloc()
		copies = append(copies, Copy{Src: src, Dst: dst})
		a.unref(src)
		ft.pages[cowIdx] = dst
	}
	for range need {
		ft.pages = append(ft.pages, a.alloc())
	}
	return copies, nil
}

func (a *fakeAlloc) Commit(t Table, tokens []int32) {
	ft := t.(*fakeTable)
	salt := ft.salt
	for i := 0; (i+1)*a.ps <= len(tokens) && i < len(ft.pages); i++ {
		k := key(tokens[:(i+1)*a.ps], salt)
		p := ft.pages[i]
		if _, ok := a.index[k]; ok || a.keyOf[p] != "" {
			continue
		}
		a.index[k] = p
		a.keyOf[p] = k
	}
}

func (a *fakeAlloc) unref(p int32) {
	a.ref[p]--
	if a.ref[p] > 0 {
		return
	}
	if a.keyOf[p] != "" {
		a.lru = append(a.lru, p)
		return
	}
	a.mem[p] = slices.Repeat([]int32{-1}, a.ps)
	a.free = append(a.free, p)
}

func (a *fakeAlloc) Truncate(t Table, n int) {
	ft := t.(*fakeTable)
	keep := (n + a.ps - 1) / a.ps
	for _, p := range ft.pages[keep:] {
		a.unref(p)
	}
	ft.pages = ft.pages[:keep]
}

func (a *fakeAlloc) Release(t Table) {
	ft := t.(*fakeTable)
	if ft.released {
		return
	}
	ft.released = true
	delete(a.tables, ft)
	for _, p := range ft.pages {
		a.unref(p)
	}
	ft.pages = nil
}

// check verifies the ledger: refcounts equal table references, every page
// is free, cached (ref 0, indexed) or referenced.
func (a *fakeAlloc) check() error {
	refs := make([]int, len(a.ref))
	for t := range a.tables {
		for _, p := range t.pages {
			refs[p]++
		}
	}
	states := make([]int, len(a.ref))
	for _, p := range a.free {
		states[p]++
	}
	for _, p := range a.lru {
		states[p]++
	}
	for p := range a.ref {
		if refs[p] != a.ref[p] {
			return fmt.Errorf("page %d: refcount %d, tables hold %d", p, a.ref[p], refs[p])
		}
		if a.ref[p] > 0 {
			states[p]++
		}
		if states[p] != 1 {
			return fmt.Errorf("page %d in %d states", p, states[p])
		}
	}
	return nil
}

// run performs a plan on the fake memory: copies, then writes each item's
// tokens at their positions, then checks every position the item attends
// to holds the sequence's own token.
func (a *fakeAlloc) run(p *Plan) error {
	for _, c := range p.Copies {
		copy(a.mem[c.Dst], a.mem[c.Src])
	}
	for _, it := range p.Items {
		toks := it.Seq.Tokens()
		for pos := it.Start; pos < it.End; pos++ {
			a.mem[it.Pages[pos/a.ps]][pos%a.ps] = toks[pos]
		}
	}
	for _, it := range p.Items {
		toks := it.Seq.Tokens()
		for pos := 0; pos < it.End; pos++ {
			if got := a.mem[it.Pages[pos/a.ps]][pos%a.ps]; got != toks[pos] {
				return fmt.Errorf("seq %d pos %d: memory holds %d, want %d", it.Seq.ID(), pos, got, toks[pos])
			}
		}
	}
	return nil
}
