package kvcache

import (
	"fmt"
	"slices"
)

// EventKind names a KV event.
type EventKind uint8

const (
	BlockStored      EventKind = iota + 1 // blocks entered the prefix index
	BlockRemoved                          // blocks left the prefix index (evicted)
	AllBlocksCleared                      // Clear emptied the index
)

func (k EventKind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one change of the prefix index, shaped like the wire's
// openengine.v1 BlockStored / BlockRemoved / AllBlocksCleared. Events are
// shared between subscribers: read-only.
type Event struct {
	Kind EventKind
	// BlockStored: a chain of blocks, each the parent of the next.
	// BlockRemoved: the removed blocks, in eviction order.
	Hashes    []uint64
	Parent    uint64 // BlockStored: parent of Hashes[0], when HasParent
	HasParent bool
	Tokens    []int32 // BlockStored: len(Hashes)*BlockSize ids, block after block
	BlockSize int     // BlockStored: tokens per block
	Adapter   int64   // BlockStored: adapter id of the namespace (0 = none)
	Medium    Medium
}

// Batch is the events of one cache operation under one sequence number.
// Sequence numbers start at 1 and increase by 1 per batch.
type Batch struct {
	Seq      uint64
	UnixNano int64
	Events   []Event
}

// eventLog holds staged events, the retained window and the subscribers;
// protected by Cache.mu.
type eventLog struct {
	lastSeq uint64
	pending []Event
	ring    []Batch // retained batches, oldest at start; cap = window
	start   int
	n       int
	subs    map[*Subscription]struct{}
}

func (l *eventLog) init(window int) {
	if window > 0 {
		l.ring = make([]Batch, window)
	}
	l.subs = make(map[*Subscription]struct{})
}

// stage queues an event for the current operation's batch and returns it
// for further appends (valid until the next stage call).
func (l *eventLog) stage(e Event) *Event {
	l.pending = append(l.pending, e)
	return &l.pending[len(l.pending)-1]
}

// stageRemoved adds hash to the trailing BlockRemoved event, or stages one.
func (l *eventLog) stageRemoved(hash uint64, m Medium) {
	if k := len(l.pending); k > 0 && l.pending[k-1].Kind == BlockRemoved {
		l.pending[k-1].Hashes = append(l.pending[k-1].Hashes, hash)
		return
	}
	l.stage(Event{Kind: BlockRemoved, Hashes: []uint64{hash}, Medium: m})
}

// retained returns the batches with Seq >= from, oldest first.
func (l *eventLog) retained(from uint64) []Batch {
	var out []Batch
	for i := 0; i < l.n; i++ {
		b := l.ring[(l.start+i)%len(l.ring)]
		if b.Seq >= from {
			out = append(out, b)
		}
	}
	return out
}

// oldest returns the smallest retained sequence number (lastSeq+1 when
// none is retained).
func (l *eventLog) oldest() uint64 {
	if l.n == 0 {
		return l.lastSeq + 1
	}
	return l.ring[l.start].Seq
}

// flushLocked turns the staged events into one batch: retained in the
// window and offered to every subscriber without blocking; a subscriber
// whose buffer is full is dropped with ErrSlowSubscriber.
func (c *Cache) flushLocked() {
	l := &c.ev
	if len(l.pending) == 0 {
		return
	}
	l.lastSeq++
	b := Batch{Seq: l.lastSeq, UnixNano: c.cfg.Now().UnixNano(), Events: l.pending}
	l.pending = nil
	if len(l.ring) > 0 {
		if l.n < len(l.ring) {
			l.ring[(l.start+l.n)%len(l.ring)] = b
			l.n++
		} else {
			l.ring[l.start] = b
			l.start = (l.start + 1) % len(l.ring)
		}
	}
	for s := range l.subs {
		select {
		case s.ch <- b:
		default:
			c.dropLocked(s, ErrSlowSubscriber)
		}
	}
}

// Subscription receives the cache's event batches. Read C until it is
// closed, then Err says why (nil after Close).
type Subscription struct {
	c   *Cache
	ch  chan Batch
	err error // protected by c.mu

	// Snapshot, when asked for: one BlockStored event per block stored at
	// subscription time, parents before children, as of sequence AsOf.
	Snapshot []Event
	// Backlog: the retained batches with Seq >= fromSeq, oldest first.
	Backlog []Batch
	// AsOf is the last sequence number reflected by Snapshot and Backlog;
	// batches on C start at AsOf+1.
	AsOf uint64
}

// C returns the live batch channel (buffered; closed when the
// subscription ends).
func (s *Subscription) C() <-chan Batch { return s.ch }

// Err returns why C was closed: ErrSlowSubscriber, ErrClosed, or nil.
func (s *Subscription) Err() error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.err
}

// Close ends the subscription; safe to call twice.
func (s *Subscription) Close() {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.dropLocked(s, nil)
}

func (c *Cache) dropLocked(s *Subscription, err error) {
	if _, ok := c.ev.subs[s]; !ok {
		return
	}
	delete(c.ev.subs, s)
	s.err = err
	close(s.ch)
}

// Subscribe starts a subscription. fromSeq > 0 resumes: Backlog holds the
// retained batches from fromSeq on; ErrEventWindow when fromSeq is older
// than the retained window or beyond the next sequence number. fromSeq 0:
// live batches only. snapshot asks for the blocks stored now. A
// subscriber that does not drain C is dropped (ErrSlowSubscriber); the
// cache never blocks on it.
func (c *Cache) Subscribe(fromSeq uint64, snapshot bool) (*Subscription, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	l := &c.ev
	s := &Subscription{c: c, ch: make(chan Batch, c.cfg.SubscriberBuffer), AsOf: l.lastSeq}
	if fromSeq > 0 {
		if fromSeq > l.lastSeq+1 {
			return nil, fmt.Errorf("%w: sequence %d is ahead of the last (%d)", ErrEventWindow, fromSeq, l.lastSeq)
		}
		if fromSeq < l.oldest() {
			return nil, fmt.Errorf("%w: sequence %d is older than the oldest retained (%d)", ErrEventWindow, fromSeq, l.oldest())
		}
		s.Backlog = l.retained(fromSeq)
	}
	if snapshot {
		s.Snapshot = c.snapshotLocked()
	}
	l.subs[s] = struct{}{}
	return s, nil
}

// snapshotLocked lists the indexed blocks as BlockStored events, ordered
// by chain position then hash (parents first).
func (c *Cache) snapshotLocked() []Event {
	ids := make([]PageID, 0, len(c.index))
	for _, id := range c.index {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b PageID) int {
		pa, pb := &c.pages[a], &c.pages[b]
		if pa.block != pb.block {
			return int(pa.block - pb.block)
		}
		switch {
		case pa.hash < pb.hash:
			return -1
		case pa.hash > pb.hash:
			return 1
		}
		return 0
	})
	out := make([]Event, len(ids))
	for i, id := range ids {
		pg := &c.pages[id]
		out[i] = Event{
			Kind: BlockStored, Hashes: []uint64{pg.hash},
			Parent: pg.parent, HasParent: pg.hasParent,
			Tokens:    slices.Clone(c.pageTokens(id)),
			BlockSize: c.pageSize, Adapter: pg.adapter, Medium: c.cfg.Medium,
		}
	}
	return out
}

// Close ends every subscription with ErrClosed and refuses new ones. Page
// operations keep working.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for s := range c.ev.subs {
		c.dropLocked(s, ErrClosed)
	}
}
