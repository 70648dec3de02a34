package kvcache

import "fmt"

// Table is one sequence's page table: an opaque handle. Token position p
// lives in page Pages()[p/PageSize] at slot p%PageSize. Len counts reserved
// token slots (those PrepareAppend made room for, or that Match found
// cached); the runner writes K/V for them.
//
// A Table's contents are protected by its cache's mutex; its methods are
// safe from any goroutine. A released table reports Len 0 and no pages.
type Table struct {
	c        *Cache
	ns       Namespace
	seed     uint64   // namespace seed of the chained hash
	pages    []PageID // ceil(n / pageSize) pages
	n        int      // reserved token slots
	hashes   []uint64 // chain hashes of the leading full pages known so far
	released bool
}

// Copy asks the runner to copy the whole K/V contents of page Src into page
// Dst before anything is written into Dst (copy-on-write).
type Copy struct {
	Src, Dst PageID
}

// Len returns the reserved token slots.
func (t *Table) Len() int {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.n
}

// Pages returns a copy of the page list.
func (t *Table) Pages() []PageID {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return append([]PageID(nil), t.pages...)
}

// AppendPages appends the page list to dst and returns it (no allocation
// when dst has room); for the runner's per-step plan.
func (t *Table) AppendPages(dst []PageID) []PageID {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return append(dst, t.pages...)
}

// Namespace returns the prefix-cache namespace the table hashes under.
func (t *Table) Namespace() Namespace { return t.ns }

// Released reports whether Release was called.
func (t *Table) Released() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.released
}

// HashedPages returns how many leading full pages have known chain hashes
// (matched from the index or committed).
func (t *Table) HashedPages() int {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return len(t.hashes)
}

// NewTable returns an empty table in namespace ns (use it to bypass the
// prefix cache: Commit still stores its pages).
func (c *Cache) NewTable(ns Namespace) *Table {
	t := &Table{c: c, ns: ns, seed: ns.seed()}
	c.mu.Lock()
	c.tables[t] = struct{}{}
	c.mu.Unlock()
	return t
}

func (c *Cache) checkLocked(t *Table) error {
	switch {
	case t == nil:
		return fmt.Errorf("%w: nil table", ErrBadArgument)
	case t.c != c:
		return ErrForeignTable
	case t.released:
		return ErrReleased
	}
	return nil
}

// Fork returns a new table sharing all of t's pages (reference-counted;
// the partially filled last page is copied on the first append by either).
func (c *Cache) Fork(t *Table) (*Table, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkLocked(t); err != nil {
		return nil, err
	}
	return c.forkLocked(t, t.n), nil
}

// ForkPrefix returns a new table sharing the pages that hold t's first n
// tokens (0 <= n <= t.Len()). A page only partly covered by n is shared and
// copied on the first append.
func (c *Cache) ForkPrefix(t *Table, n int) (*Table, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkLocked(t); err != nil {
		return nil, err
	}
	if n < 0 || n > t.n {
		return nil, fmt.Errorf("%w: fork prefix %d of a table of %d tokens", ErrBadArgument, n, t.n)
	}
	return c.forkLocked(t, n), nil
}

func (c *Cache) forkLocked(t *Table, n int) *Table {
	np := ceilDiv(n, c.pageSize)
	nh := min(len(t.hashes), n/c.pageSize)
	f := &Table{
		c:      c,
		ns:     t.ns,
		seed:   t.seed,
		pages:  append([]PageID(nil), t.pages[:np]...),
		n:      n,
		hashes: append([]uint64(nil), t.hashes[:nh]...),
	}
	for _, id := range f.pages {
		c.pages[id].refs++ // state unchanged: refs was already > 0
	}
	c.tables[f] = struct{}{}
	return f
}

// PagesNeeded returns how many pages PrepareAppend(t, n) would allocate now
// (new pages plus a copy-on-write copy of the last page).
func (c *Cache) PagesNeeded(t *Table, n int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkLocked(t); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("%w: negative token count %d", ErrBadArgument, n)
	}
	cow, fresh := c.needLocked(t, n)
	if cow {
		fresh++
	}
	return fresh, nil
}

// needLocked reports whether appending n tokens must first copy the last
// page (shared with another table, in the prefix index, or pinned: its
// contents must not change; a pin owner may hold more of the page than t
// covers) and how many new pages the growth takes.
func (c *Cache) needLocked(t *Table, n int) (cow bool, fresh int) {
	if n == 0 {
		return false, 0
	}
	if t.n%c.pageSize != 0 {
		pg := &c.pages[t.pages[len(t.pages)-1]]
		cow = pg.refs > 1 || pg.indexed || pg.pins > 0
	}
	return cow, ceilDiv(t.n+n, c.pageSize) - len(t.pages)
}

// PrepareAppend reserves n more token slots in t. It returns the page
// copies the runner must perform before writing (at most one: the shared
// last page). On ErrNoPages (the pages needed exceed free plus evictable
// pages) t is unchanged. Cached pages are evicted least recently used
// first.
func (c *Cache) PrepareAppend(t *Table, n int) ([]Copy, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.flushLocked()
	if err := c.checkLocked(t); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: negative token count %d", ErrBadArgument, n)
	}
	cow, fresh := c.needLocked(t, n)
	need := fresh
	if cow {
		need++
	}
	if need > c.availableLocked() {
		return nil, fmt.Errorf("%w: need %d pages, %d available", ErrNoPages, need, c.availableLocked())
	}
	var copies []Copy
	if cow {
		last := len(t.pages) - 1
		src := t.pages[last]
		dst, err := c.allocLocked()
		if err != nil {
			return nil, err // unreachable: availability checked above
		}
		t.pages[last] = dst
		c.pages[src].refs--
		c.settleLocked(src)
		copies = []Copy{{Src: src, Dst: dst}}
		c.metrics.cowCopies++
	}
	for range fresh {
		id, err := c.allocLocked()
		if err != nil {
			return nil, err // unreachable: availability checked above
		}
		t.pages = append(t.pages, id)
	}
	t.n += n
	return copies, nil
}

// Release drops t's references: each page becomes cached (if in the prefix
// index), free, or stays pinned / in use by others. Pages are released
// last first, so the tail of a sequence is evicted before its head. Safe
// to call twice, and on nil.
func (c *Cache) Release(t *Table) {
	if t == nil || t.c != c {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(t)
}

func (c *Cache) releaseLocked(t *Table) {
	if t.released {
		return
	}
	t.released = true
	delete(c.tables, t)
	for i := len(t.pages) - 1; i >= 0; i-- {
		id := t.pages[i]
		c.pages[id].refs--
		c.settleLocked(id)
	}
	t.pages, t.hashes, t.n = nil, nil, 0
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Truncate shrinks t to its first n reserved slots (0 <= n <= Len): the
// references to pages wholly beyond them are dropped through the same path
// as Release (each becomes cached, free, or stays held by others), and
// chain hashes of pages no longer full are forgotten. Speculative decoding
// uses it to roll back the K/V slots of rejected draft tokens
// (docs/api.md "Speculative decoding"). The kept last page may hold
// stale slots past n; the next PrepareAppend overwrites them (copying the
// page first when it is shared, indexed or pinned).
func (c *Cache) Truncate(t *Table, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkLocked(t); err != nil {
		return err
	}
	if n < 0 || n > t.n {
		return fmt.Errorf("%w: truncate a table of %d tokens to %d", ErrBadArgument, t.n, n)
	}
	keep := ceilDiv(n, c.pageSize)
	for i := len(t.pages) - 1; i >= keep; i-- {
		id := t.pages[i]
		c.pages[id].refs--
		c.settleLocked(id)
	}
	t.pages = t.pages[:keep]
	if h := n / c.pageSize; len(t.hashes) > h {
		t.hashes = t.hashes[:h]
	}
	t.n = n
	return nil
}
