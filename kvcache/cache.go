// Package kvcache is the paged KV cache's bookkeeping: a pool of fixed-size
// pages, per-sequence page tables (opaque handles), a prefix index keyed by
// chained block hashes, session pins with budgets, a page ledger with an
// integrity check, and a stream of KV events.
//
// kvcache knows pages, token ids, hashes and owners. It never holds K/V
// tensors: the model runner owns that memory, indexed by PageID, and copies
// pages when PrepareAppend asks it to (copy-on-write).
//
// Every page is in exactly one ledger state, derived from three facts:
//
//	pinned  pins > 0                          (held by a session lease)
//	in use  pins == 0, refs > 0               (held by running tables)
//	cached  pins == 0, refs == 0, indexed     (evictable, in the LRU list)
//	free    pins == 0, refs == 0, not indexed (in the free list)
//
// All state changes go through settleLocked, which moves a page between the
// free list and the LRU list and keeps the per-state counters.
package kvcache

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// PageID names one page of the pool: 0 <= id < NumPages. The runner's K/V
// storage is indexed by it.
type PageID int32

// noPage terminates the intrusive lists.
const noPage PageID = -1

// DefaultPageSize is the number of token slots in a page when Config leaves
// PageSize at 0.
const DefaultPageSize = 16

// Medium says where the pages live; the values equal the wire enum
// openengine.v1.StorageMedium.
type Medium uint8

const (
	MediumUnspecified Medium = 0 // STORAGE_MEDIUM_UNSPECIFIED: the CPU engine's primary tier
	MediumGPU         Medium = 1 // STORAGE_MEDIUM_GPU: pages in device memory
	MediumCPU         Medium = 2 // STORAGE_MEDIUM_CPU_PINNED (host memory offload tier)
)

// String returns "unspecified", "GPU" or "CPU".
func (m Medium) String() string {
	switch m {
	case MediumUnspecified:
		return "unspecified"
	case MediumGPU:
		return "GPU"
	case MediumCPU:
		return "CPU"
	}
	return fmt.Sprintf("Medium(%d)", uint8(m))
}

// Sentinel errors. Wrapped errors carry details; test with errors.Is.
var (
	ErrNoPages        = errors.New("kvcache: no free page")
	ErrPinBudget      = errors.New("kvcache: pinned-page budget exceeded")
	ErrReleased       = errors.New("kvcache: table already released")
	ErrForeignTable   = errors.New("kvcache: table belongs to another cache")
	ErrBadArgument    = errors.New("kvcache: invalid argument")
	ErrEventWindow    = errors.New("kvcache: event sequence outside the retained window")
	ErrSlowSubscriber = errors.New("kvcache: subscriber too slow, dropped")
	ErrClosed         = errors.New("kvcache: cache closed")
	ErrIntegrity      = errors.New("kvcache: integrity violation")
)

// Config sizes the pool. Zero values take the documented defaults.
type Config struct {
	PageSize int // token slots per page; 0 = DefaultPageSize
	NumPages int // pages in the pool; required, > 0 (see PagesForBudget)

	// Pinned-page budgets (distinct pages). 0 = no limit beyond the pool.
	MaxPinnedPages         int // all owners together
	MaxPinnedPagesPerOwner int // one owner

	Medium Medium // reported in events (docs/design.md §9); 0 = MediumUnspecified

	EventWindow      int // batches retained for resume; 0 = 1024, < 0 = none
	SubscriberBuffer int // batches buffered per subscriber; 0 = 1024

	Now func() time.Time // event timestamps; nil = time.Now
}

// PagesForBudget returns how many pages of bytesPerPage fit in bytes
// (0 for non-positive input), capped at math.MaxInt32.
func PagesForBudget(bytes, bytesPerPage int64) int {
	if bytes <= 0 || bytesPerPage <= 0 {
		return 0
	}
	n := bytes / bytesPerPage
	if n > math.MaxInt32 {
		n = math.MaxInt32
	}
	return int(n)
}

// pageState is the ledger state of a page.
type pageState uint8

const (
	stateFree pageState = iota
	stateCached
	stateInUse
	statePinned
	numStates
)

func (s pageState) String() string {
	return [...]string{"free", "cached", "in_use", "pinned"}[s]
}

// page is the bookkeeping of one page. Fields are protected by Cache.mu.
type page struct {
	refs  int32 // live tables that list this page
	pins  int32 // owners whose pin set holds this page
	state pageState

	// prefix index entry, valid when indexed
	indexed   bool
	hash      uint64
	parent    uint64
	hasParent bool
	block     int32  // position of the block in its chain (0 = first)
	seed      uint64 // namespace seed the block was stored under
	adapter   int64

	// intrusive list links: the free list or the LRU list, by state
	prev, next PageID
}

// plist is an intrusive doubly linked list over Cache.pages.
type plist struct {
	head, tail PageID
	n          int
}

// Cache is the page pool with its tables, prefix index, pins and events.
//
// mu protects every field below it, the pages' bookkeeping and the contents
// of every Table of this cache. Methods take it themselves; helpers that
// expect it held end in Locked. Callbacks never run under it: events go out
// through non-blocking channel sends only.
type Cache struct {
	pageSize int
	cfg      Config

	mu      sync.Mutex
	pages   []page
	tokens  []int32 // [NumPages][pageSize] token ids of indexed pages, row-major
	free    plist   // free pages; allocation takes the head
	lru     plist   // cached pages; eviction takes the head (least recent)
	count   [numStates]int
	index   map[uint64]PageID // block hash -> page
	tables  map[*Table]struct{}
	owners  map[string]*pinSet
	ev      eventLog
	closed  bool
	metrics counters
}

// counters are cumulative figures for metrics.
type counters struct {
	matchQueries   uint64 // Match calls
	matchQueryToks uint64 // tokens offered to Match
	matchHitToks   uint64 // tokens returned as cached
	evictions      uint64 // cached pages evicted to satisfy allocation
	stored         uint64 // blocks added to the prefix index
	cowCopies      uint64 // copy-on-write page copies requested
}

// New builds a cache of cfg.NumPages free pages.
func New(cfg Config) (*Cache, error) {
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.PageSize < 0 || cfg.PageSize > 1<<16 {
		return nil, fmt.Errorf("%w: page size %d", ErrBadArgument, cfg.PageSize)
	}
	if cfg.NumPages <= 0 || cfg.NumPages > math.MaxInt32 {
		return nil, fmt.Errorf("%w: page count %d", ErrBadArgument, cfg.NumPages)
	}
	if cfg.MaxPinnedPages < 0 || cfg.MaxPinnedPagesPerOwner < 0 {
		return nil, fmt.Errorf("%w: negative pin budget", ErrBadArgument)
	}
	if cfg.EventWindow == 0 {
		cfg.EventWindow = 1024
	}
	if cfg.SubscriberBuffer <= 0 {
		cfg.SubscriberBuffer = 1024
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cache{
		pageSize: cfg.PageSize,
		cfg:      cfg,
		pages:    make([]page, cfg.NumPages),
		tokens:   make([]int32, cfg.NumPages*cfg.PageSize),
		free:     plist{head: noPage, tail: noPage},
		lru:      plist{head: noPage, tail: noPage},
		index:    make(map[uint64]PageID),
		tables:   make(map[*Table]struct{}),
		owners:   make(map[string]*pinSet),
	}
	c.ev.init(cfg.EventWindow)
	for i := range c.pages {
		c.pages[i] = page{prev: noPage, next: noPage, state: stateFree}
		c.pushBack(&c.free, PageID(i))
	}
	c.count[stateFree] = cfg.NumPages
	return c, nil
}

// PageSize returns the token slots per page.
func (c *Cache) PageSize() int { return c.pageSize }

// NumPages returns the pool size.
func (c *Cache) NumPages() int { return len(c.pages) }

// Medium returns the medium reported in events.
func (c *Cache) Medium() Medium { return c.cfg.Medium }

// Stats is a consistent snapshot of the ledger and cumulative counters.
type Stats struct {
	PageSize int
	Total    int // pages in the pool
	Free     int // free pages
	Cached   int // cached, evictable pages (in the prefix index, unreferenced)
	InUse    int // pages held by running tables and not pinned
	Pinned   int // pages pinned by at least one owner

	Indexed    int // blocks in the prefix index (any state)
	Tables     int // live (unreleased) tables
	PinOwners  int // owners with a non-empty pin set
	LastSeq    uint64
	Evictions  uint64 // cached pages evicted for allocation
	Stored     uint64 // blocks ever added to the prefix index
	COWCopies  uint64 // copy-on-write copies requested
	Queries    uint64 // Match calls
	QueryToks  uint64 // tokens offered to Match
	HitToks    uint64 // tokens Match returned as cached
	Subscribed int    // live event subscriptions
}

// Available is the number of pages an allocation can obtain now (free plus
// evictable cached pages).
func (s Stats) Available() int { return s.Free + s.Cached }

// Used is the number of pages not available for allocation.
func (s Stats) Used() int { return s.InUse + s.Pinned }

// Stats returns the current figures; safe from any goroutine.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		PageSize:   c.pageSize,
		Total:      len(c.pages),
		Free:       c.count[stateFree],
		Cached:     c.count[stateCached],
		InUse:      c.count[stateInUse],
		Pinned:     c.count[statePinned],
		Indexed:    len(c.index),
		Tables:     len(c.tables),
		PinOwners:  len(c.owners),
		LastSeq:    c.ev.lastSeq,
		Evictions:  c.metrics.evictions,
		Stored:     c.metrics.stored,
		COWCopies:  c.metrics.cowCopies,
		Queries:    c.metrics.matchQueries,
		QueryToks:  c.metrics.matchQueryToks,
		HitToks:    c.metrics.matchHitToks,
		Subscribed: len(c.ev.subs),
	}
}

// Available returns free plus evictable pages.
func (c *Cache) Available() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.availableLocked()
}

func (c *Cache) availableLocked() int { return c.count[stateFree] + c.count[stateCached] }

// wantState derives the ledger state from the page's facts.
func (pg *page) wantState() pageState {
	switch {
	case pg.pins > 0:
		return statePinned
	case pg.refs > 0:
		return stateInUse
	case pg.indexed:
		return stateCached
	}
	return stateFree
}

// settleLocked moves page id to the state its facts call for. A page that
// becomes cached goes to the LRU tail (most recently used).
func (c *Cache) settleLocked(id PageID) {
	pg := &c.pages[id]
	want := pg.wantState()
	if want == pg.state {
		return
	}
	switch pg.state {
	case stateFree:
		c.unlink(&c.free, id)
	case stateCached:
		c.unlink(&c.lru, id)
	}
	c.count[pg.state]--
	switch want {
	case stateFree:
		c.pushBack(&c.free, id)
	case stateCached:
		c.pushBack(&c.lru, id)
	}
	c.count[want]++
	pg.state = want
}

// allocLocked takes one page (evicting the least recently used cached page
// when the free list is empty) and gives it a reference. Callers check
// availableLocked first; ErrNoPages here means nothing was available.
func (c *Cache) allocLocked() (PageID, error) {
	if c.free.n == 0 {
		if c.lru.n == 0 {
			return noPage, ErrNoPages
		}
		victim := c.lru.head
		c.unindexLocked(victim, true)
		c.metrics.evictions++
	}
	id := c.free.head
	c.pages[id].refs = 1
	c.settleLocked(id)
	return id, nil
}

// pageTokens returns the token row of page id (valid while indexed).
func (c *Cache) pageTokens(id PageID) []int32 {
	off := int(id) * c.pageSize
	return c.tokens[off : off+c.pageSize : off+c.pageSize]
}

func (c *Cache) pushBack(l *plist, id PageID) {
	pg := &c.pages[id]
	pg.prev, pg.next = l.tail, noPage
	if l.tail == noPage {
		l.head = id
	} else {
		c.pages[l.tail].next = id
	}
	l.tail = id
	l.n++
}

func (c *Cache) unlink(l *plist, id PageID) {
	pg := &c.pages[id]
	if pg.prev == noPage {
		l.head = pg.next
	} else {
		c.pages[pg.prev].next = pg.next
	}
	if pg.next == noPage {
		l.tail = pg.prev
	} else {
		c.pages[pg.next].prev = pg.prev
	}
	pg.prev, pg.next = noPage, noPage
	l.n--
}
