package kvcache

import (
	"errors"
	"fmt"
)

// CheckIntegrity verifies the ledger from scratch: every page's state
// matches its facts and its list membership; reference counts equal the
// live tables' page lists; pin counts equal the owners' sets; the free and
// LRU lists are well linked; the prefix index and the pages agree; the
// per-state counters and pin budgets hold; tables are well formed. It
// returns nil or an error wrapping ErrIntegrity listing the first problems.
// Cost: O(pages + table pages); meant for tests and a debug flag.
func (c *Cache) CheckIntegrity() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	bad := func(format string, args ...any) {
		if len(errs) < 10 {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	n := len(c.pages)
	refs := make([]int32, n)
	pins := make([]int32, n)

	for t := range c.tables {
		if t.released {
			bad("released table still registered")
		}
		if want := ceilDiv(t.n, c.pageSize); len(t.pages) != want {
			bad("table of %d tokens has %d pages, want %d", t.n, len(t.pages), want)
		}
		if len(t.hashes) > t.n/c.pageSize {
			bad("table of %d tokens has %d hashed pages", t.n, len(t.hashes))
		}
		seen := make(map[PageID]struct{}, len(t.pages))
		for i, id := range t.pages {
			if id < 0 || int(id) >= n {
				bad("table page %d out of range", id)
				continue
			}
			if _, dup := seen[id]; dup {
				bad("table lists page %d twice", id)
			}
			seen[id] = struct{}{}
			refs[id]++
			if pg := &c.pages[id]; pg.indexed && i < len(t.hashes) && pg.hash != t.hashes[i] {
				bad("table page %d (slot %d) indexed as %x, table hash %x", id, i, pg.hash, t.hashes[i])
			}
		}
	}
	pinned := 0
	for owner, s := range c.owners {
		if len(s.order) == 0 || len(s.order) != len(s.has) {
			bad("owner %q pin set malformed (%d ordered, %d distinct)", owner, len(s.order), len(s.has))
		}
		if max := c.cfg.MaxPinnedPagesPerOwner; max > 0 && len(s.order) > max {
			bad("owner %q pins %d pages, limit %d", owner, len(s.order), max)
		}
		for _, id := range s.order {
			if _, ok := s.has[id]; !ok {
				bad("owner %q pin order lists page %d not in its set", owner, id)
			}
			pins[id]++
		}
	}
	var count [numStates]int
	indexed := 0
	for i := range c.pages {
		pg := &c.pages[i]
		id := PageID(i)
		if pg.refs != refs[i] {
			bad("page %d refs %d, tables hold %d", id, pg.refs, refs[i])
		}
		if pg.pins != pins[i] {
			bad("page %d pins %d, owners hold %d", id, pg.pins, pins[i])
		}
		if pg.state != pg.wantState() {
			bad("page %d in state %v, facts say %v", id, pg.state, pg.wantState())
		}
		count[pg.state]++
		if pg.state == statePinned {
			pinned++
		}
		if pg.indexed {
			indexed++
			if got, ok := c.index[pg.hash]; !ok || got != id {
				bad("page %d indexed as %x but the index maps it to %d (%v)", id, pg.hash, got, ok)
			}
		}
	}
	if count != c.count {
		bad("state counters %v, recount %v", c.count, count)
	}
	if indexed != len(c.index) {
		bad("%d pages indexed, index has %d entries", indexed, len(c.index))
	}
	for h, id := range c.index {
		if id < 0 || int(id) >= n || !c.pages[id].indexed || c.pages[id].hash != h {
			bad("index entry %x -> page %d does not match the page", h, id)
		}
	}
	if max := c.cfg.MaxPinnedPages; max > 0 && pinned > max {
		bad("%d pages pinned, limit %d", pinned, max)
	}
	if len(c.ev.pending) != 0 {
		bad("%d events staged outside an operation", len(c.ev.pending))
	}
	c.checkListLocked("free", &c.free, stateFree, bad)
	c.checkListLocked("lru", &c.lru, stateCached, bad)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrIntegrity, errors.Join(errs...))
}

// checkListLocked walks l forward and backward: every member must be in
// state st, links symmetric, length equal to l.n and to the state count.
func (c *Cache) checkListLocked(name string, l *plist, st pageState, bad func(string, ...any)) {
	steps, prev := 0, noPage
	for id := l.head; id != noPage; id = c.pages[id].next {
		if steps > len(c.pages) {
			bad("%s list has a cycle", name)
			return
		}
		if c.pages[id].state != st {
			bad("%s list holds page %d in state %v", name, id, c.pages[id].state)
		}
		if c.pages[id].prev != prev {
			bad("%s list page %d prev %d, want %d", name, id, c.pages[id].prev, prev)
		}
		prev = id
		steps++
	}
	if prev != l.tail {
		bad("%s list ends at %d, tail %d", name, prev, l.tail)
	}
	if steps != l.n || steps != c.count[st] {
		bad("%s list has %d pages, counter %d, state count %d", name, steps, l.n, c.count[st])
	}
}
