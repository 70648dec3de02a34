package kvcache

import (
	"fmt"
	"slices"
)

// Namespace separates prefix-cache entries: pages stored under one
// namespace are never matched under another. Salt is the request's cache
// salt ("" = shared), Adapter the LoRA adapter id (0 = base model).
type Namespace struct {
	Salt    string
	Adapter int64
}

// Mixing constants (golden ratio and the splitmix64 multipliers).
const (
	hashK0 = 0x9E3779B97F4A7C15
	hashK1 = 0xBF58476D1CE4E5B9
	hashK2 = 0x94D049BB133111EB
	rootK  = 0x6A09E667F3BCC909 // stands in for the parent of a chain's first block
)

// mix64 is the splitmix64 finalizer: a bijection on uint64 with full
// avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= hashK1
	x ^= x >> 27
	x *= hashK2
	x ^= x >> 31
	return x
}

// seed folds the namespace into the chain's starting value: FNV-1a over
// the salt bytes, then the adapter id. Stable across processes and
// platforms (unlike hash/maphash).
func (ns Namespace) seed() uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(ns.Salt); i++ {
		h ^= uint64(ns.Salt[i])
		h *= 1099511628211
	}
	h = mix64(h ^ uint64(len(ns.Salt)))
	return mix64(h ^ mix64(uint64(ns.Adapter)+hashK0))
}

// BlockHash returns the chained hash of one block: it depends on the
// namespace seed, the parent block's hash (or its absence, for the first
// block) and the block's token ids, in order. Deterministic across
// processes; block hashes go on the wire as uint64.
func BlockHash(ns Namespace, parent uint64, hasParent bool, tokens []int32) uint64 {
	return blockHash(ns.seed(), parent, hasParent, tokens)
}

func blockHash(seed, parent uint64, hasParent bool, tokens []int32) uint64 {
	h := mix64(seed + hashK0)
	if hasParent {
		h = mix64(h ^ parent)
	} else {
		h = mix64(h ^ rootK)
	}
	h = mix64(h ^ uint64(len(tokens)))
	i := 0
	for ; i+1 < len(tokens); i += 2 {
		w := uint64(uint32(tokens[i])) | uint64(uint32(tokens[i+1]))<<32
		h = mix64(h ^ w)
	}
	if i < len(tokens) {
		h = mix64(h ^ uint64(uint32(tokens[i])) ^ hashK0)
	}
	return h
}

// Match returns a new table that references the longest cached prefix of
// tokens made of whole pages stored under ns, and the number of tokens it
// covers (a multiple of PageSize). At most limit tokens are reused
// (limit < 0: no limit); a caller that needs logits for the last prompt
// token passes len(tokens)-1 so at least one token is computed. Every hit
// is verified against the stored namespace, parent and token ids, so a
// hash collision can only cause a miss. Matched cached pages leave the LRU
// list (they are in use until released).
func (c *Cache) Match(tokens []int32, ns Namespace, limit int) (*Table, int) {
	seed := ns.seed()
	t := &Table{c: c, ns: ns, seed: seed}
	n := len(tokens)
	if limit >= 0 && limit < n {
		n = limit
	}
	maxPages := n / c.pageSize
	// Room for the whole prompt: the caller reserves the rest next.
	t.pages = make([]PageID, 0, ceilDiv(len(tokens), c.pageSize)+1)
	t.hashes = make([]uint64, 0, len(tokens)/c.pageSize)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.tables[t] = struct{}{}
	var parent uint64
	hasParent := false
	for i := 0; i < maxPages; i++ {
		blk := tokens[i*c.pageSize : (i+1)*c.pageSize]
		h := blockHash(seed, parent, hasParent, blk)
		id, ok := c.index[h]
		if !ok {
			break
		}
		pg := &c.pages[id]
		if pg.seed != seed || pg.hasParent != hasParent || pg.parent != parent ||
			!slices.Equal(c.pageTokens(id), blk) {
			break // a hash collision: treat as a miss
		}
		pg.refs++
		c.settleLocked(id)
		t.pages = append(t.pages, id)
		t.hashes = append(t.hashes, h)
		parent, hasParent = h, true
	}
	t.n = len(t.pages) * c.pageSize
	c.metrics.matchQueries++
	c.metrics.matchQueryToks += uint64(len(tokens))
	c.metrics.matchHitToks += uint64(t.n)
	return t, t.n
}

// Commit registers t's newly full pages in the prefix index. tokens are
// the table's token ids from position 0 whose K/V the runner has written
// (len(tokens) <= t.Len()); the tokens of pages already hashed (matched or
// committed earlier) are assumed unchanged. Only whole pages are stored.
//
// A page whose hash is already indexed on another page (two requests
// computed the same block at once) is not stored: the table keeps its own
// copy, which becomes free when released; the chain continues, so later
// pages are still stored. Every stored block emits a BlockStored event
// (consecutive blocks in one event).
func (c *Cache) Commit(t *Table, tokens []int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.flushLocked()
	if err := c.checkLocked(t); err != nil {
		return err
	}
	if len(tokens) > t.n {
		return fmt.Errorf("%w: commit of %d tokens into a table of %d slots", ErrBadArgument, len(tokens), t.n)
	}
	full := len(tokens) / c.pageSize
	first := len(t.hashes)
	if full <= first {
		return nil
	}
	// First pass: hashes, and a check that no page is indexed under a
	// different hash (the caller's tokens would contradict its contents).
	hashes := t.hashes
	for i := first; i < full; i++ {
		var parent uint64
		if i > 0 {
			parent = hashes[i-1]
		}
		h := blockHash(t.seed, parent, i > 0, tokens[i*c.pageSize:(i+1)*c.pageSize])
		if pg := &c.pages[t.pages[i]]; pg.indexed && pg.hash != h {
			return fmt.Errorf("%w: tokens of page %d disagree with its stored block", ErrBadArgument, i)
		}
		hashes = append(hashes, h)
	}
	t.hashes = hashes
	// Second pass: store.
	var ev *Event
	for i := first; i < full; i++ {
		id, h := t.pages[i], hashes[i]
		pg := &c.pages[id]
		if _, dup := c.index[h]; dup || pg.indexed {
			ev = nil
			continue
		}
		var parent uint64
		if i > 0 {
			parent = hashes[i-1]
		}
		blk := tokens[i*c.pageSize : (i+1)*c.pageSize]
		pg.indexed = true
		pg.hash, pg.parent, pg.hasParent = h, parent, i > 0
		pg.seed, pg.adapter, pg.block = t.seed, t.ns.Adapter, int32(i)
		copy(c.pageTokens(id), blk)
		c.index[h] = id
		c.settleLocked(id) // no move: the table holds a reference
		c.metrics.stored++
		if ev == nil {
			ev = c.ev.stage(Event{
				Kind: BlockStored, Parent: parent, HasParent: i > 0,
				BlockSize: c.pageSize, Adapter: t.ns.Adapter, Medium: c.cfg.Medium,
			})
		}
		ev.Hashes = append(ev.Hashes, h)
		ev.Tokens = append(ev.Tokens, blk...)
	}
	return nil
}

// unindexLocked removes page id from the prefix index, staging a
// BlockRemoved event when emit is set, and settles it.
func (c *Cache) unindexLocked(id PageID, emit bool) {
	pg := &c.pages[id]
	delete(c.index, pg.hash)
	pg.indexed = false
	if emit {
		c.ev.stageRemoved(pg.hash, c.cfg.Medium)
	}
	c.settleLocked(id)
}

// Clear empties the prefix index: cached pages become free, pages in use
// or pinned stay where they are but are no longer matchable. Emits one
// AllBlocksCleared event.
func (c *Cache) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.flushLocked()
	for i := range c.pages { // by id, so the free list order is deterministic
		if c.pages[i].indexed {
			c.unindexLocked(PageID(i), false)
		}
	}
	c.ev.stage(Event{Kind: AllBlocksCleared, Medium: c.cfg.Medium})
}
