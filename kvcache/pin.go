package kvcache

import "fmt"

// pinSet is one owner's pinned pages: distinct, in the order they were
// pinned (table order), so unpinning is deterministic.
type pinSet struct {
	order []PageID
	has   map[PageID]struct{}
}

// Pin adds t's current pages to owner's pinned set. Pinned pages are never
// evicted; they stay pinned after t is released, until Unpin or Repin. The
// budgets count distinct pages: owner's set must stay within
// MaxPinnedPagesPerOwner and all owners' within MaxPinnedPages, else
// ErrPinBudget and nothing changes.
func (c *Cache) Pin(owner string, t *Table) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkPinLocked(owner, t); err != nil {
		return err
	}
	old := c.owners[owner]
	next := &pinSet{has: make(map[PageID]struct{})}
	if old != nil {
		next.order = append(next.order, old.order...)
		for _, id := range old.order {
			next.has[id] = struct{}{}
		}
	}
	for _, id := range t.pages {
		if _, ok := next.has[id]; !ok {
			next.has[id] = struct{}{}
			next.order = append(next.order, id)
		}
	}
	return c.applyPinsLocked(owner, old, next)
}

// Repin replaces owner's pinned set with t's current pages, atomically (a
// session moving its pins from one turn's table to the next). Pages in
// both sets stay pinned throughout; pages only in the old set are unpinned
// (becoming cached or free). The budget is checked against the new set.
// A nil t unpins everything.
func (c *Cache) Repin(owner string, t *Table) error {
	if t == nil {
		c.Unpin(owner)
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkPinLocked(owner, t); err != nil {
		return err
	}
	next := &pinSet{has: make(map[PageID]struct{}, len(t.pages))}
	for _, id := range t.pages {
		if _, ok := next.has[id]; !ok {
			next.has[id] = struct{}{}
			next.order = append(next.order, id)
		}
	}
	return c.applyPinsLocked(owner, c.owners[owner], next)
}

// Unpin releases all of owner's pins and returns how many pages it held.
// Unpinned pages become cached (evictable) when they are in the prefix
// index and no table holds them, free when neither. Idempotent.
func (c *Cache) Unpin(owner string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.owners[owner]
	if old == nil {
		return 0
	}
	n := len(old.order)
	// Cannot fail: an empty set is within every budget.
	_ = c.applyPinsLocked(owner, old, &pinSet{})
	return n
}

// PinnedTable returns a new table in namespace ns over the first n token
// slots of owner's pinned pages, in the order they were pinned: for a set
// made by Repin(owner, t), the pages holding t's first n tokens. It lets an
// owner (a session) hand its K/V to a new sequence, a partly filled last
// page included; that page stays the owner's: the first append copies it
// (PrepareAppend copies pinned pages). The table knows no block hashes
// (Commit computes them). ErrBadArgument when n < 0 or n exceeds the
// pinned pages; n == 0 gives an empty table.
func (c *Cache) PinnedTable(owner string, ns Namespace, n int) (*Table, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var order []PageID
	if s := c.owners[owner]; s != nil {
		order = s.order
	}
	if n < 0 || ceilDiv(n, c.pageSize) > len(order) {
		return nil, fmt.Errorf("%w: %d tokens from the %d pages owner %q pins", ErrBadArgument, n, len(order), owner)
	}
	t := &Table{c: c, ns: ns, seed: ns.seed(), n: n,
		pages: append(make([]PageID, 0, ceilDiv(n, c.pageSize)+1), order[:ceilDiv(n, c.pageSize)]...)}
	for _, id := range t.pages {
		c.pages[id].refs++
		c.settleLocked(id) // pinned stays pinned
	}
	c.tables[t] = struct{}{}
	return t, nil
}

// PinnedPages returns the number of distinct pages owner has pinned.
func (c *Cache) PinnedPages(owner string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.owners[owner]; s != nil {
		return len(s.order)
	}
	return 0
}

func (c *Cache) checkPinLocked(owner string, t *Table) error {
	if owner == "" {
		return fmt.Errorf("%w: empty pin owner", ErrBadArgument)
	}
	return c.checkLocked(t)
}

// applyPinsLocked checks the budgets for replacing old (may be nil) by next
// and applies it: new pages are pinned first, then dropped ones unpinned
// last first (so the head of a sequence is the most recently cached).
func (c *Cache) applyPinsLocked(owner string, old, next *pinSet) error {
	if max := c.cfg.MaxPinnedPagesPerOwner; max > 0 && len(next.order) > max {
		oldN := 0
		if old != nil {
			oldN = len(old.order)
		}
		// Shrinking an owner already over a lowered budget is allowed.
		if len(next.order) > oldN {
			return fmt.Errorf("%w: owner %q would pin %d pages, limit %d", ErrPinBudget, owner, len(next.order), max)
		}
	}
	inOld := func(id PageID) bool {
		if old == nil {
			return false
		}
		_, ok := old.has[id]
		return ok
	}
	added, dropped := 0, 0
	for _, id := range next.order {
		if !inOld(id) && c.pages[id].pins == 0 {
			added++
		}
	}
	if old != nil {
		for _, id := range old.order {
			if _, ok := next.has[id]; !ok && c.pages[id].pins == 1 {
				dropped++
			}
		}
	}
	if max := c.cfg.MaxPinnedPages; max > 0 && added > dropped {
		if after := c.count[statePinned] + added - dropped; after > max {
			return fmt.Errorf("%w: %d pages pinned in all, limit %d", ErrPinBudget, after, max)
		}
	}
	for _, id := range next.order {
		if !inOld(id) {
			c.pages[id].pins++
			c.settleLocked(id)
		}
	}
	if old != nil {
		for i := len(old.order) - 1; i >= 0; i-- {
			id := old.order[i]
			if _, ok := next.has[id]; !ok {
				c.pages[id].pins--
				c.settleLocked(id)
			}
		}
	}
	if len(next.order) == 0 {
		delete(c.owners, owner)
	} else {
		c.owners[owner] = next
	}
	return nil
}
