package kvcache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// walker drives a cache through random operations and checks, after
// every one: the ledger (CheckIntegrity), that every live table's pages
// hold its tokens in the shadow memory, that every indexed page's memory
// equals its stored tokens (copy-on-write never touched it), and that the
// event stream replays to exactly the prefix index.
type walker struct {
	*sim
	pick   func(n int) int // uniform in [0, n)
	live   []*liveTable
	owners []string
	sub    *Subscription
	stored map[uint64]bool // the index as the event stream tells it
	seq    uint64
	ops    map[string]int
}

type liveTable struct {
	t    *Table
	toks []int32 // tokens written (len == t.Len())
}

func newWalker(tb testing.TB, pick func(int) int, cfg Config) *walker {
	w := &walker{sim: newSim(tb, cfg), pick: pick, stored: map[uint64]bool{}, ops: map[string]int{}}
	w.owners = []string{"s1", "s2", "s3"}
	sub, err := w.c.Subscribe(0, false)
	if err != nil {
		tb.Fatal(err)
	}
	w.sub = sub
	return w
}

// prompt draws a prompt from a few shared stems so prefixes repeat.
func (w *walker) prompt() []int32 {
	stem := w.pick(3)
	n := 1 + w.pick(3*w.c.PageSize()+3)
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(stem*1000 + i)
	}
	if w.pick(4) == 0 { // diverge somewhere
		p[w.pick(n)] = int32(w.pick(5))
	}
	return p
}

func (w *walker) ns() Namespace {
	return []Namespace{{}, {Salt: "b"}, {Adapter: 2}}[w.pick(3)]
}

func (w *walker) step() {
	tb := w.tb
	switch op := w.pick(100); {
	case op < 20: // new request
		w.ops["request"]++
		p, ns := w.prompt(), w.ns()
		var t *Table
		cached := 0
		if w.pick(5) == 0 {
			t = w.c.NewTable(ns) // bypass
		} else {
			t, cached = w.c.Match(p, ns, len(p)-w.pick(2))
		}
		w.verify(t, p[:cached])
		if err := w.extend(t, p[cached:]); err != nil {
			if !errors.Is(err, ErrNoPages) {
				tb.Fatal(err)
			}
			w.ops["no pages"]++
			w.c.Release(t)
			return
		}
		if err := w.c.Commit(t, p[:len(p)-w.pick(2)]); err != nil {
			tb.Fatal(err)
		}
		w.live = append(w.live, &liveTable{t: t, toks: p})
	case op < 45: // decode step(s)
		lt := w.any()
		if lt == nil {
			return
		}
		w.ops["append"]++
		more := seq(w.pick(100000), 1+w.pick(w.c.PageSize()+2))
		if err := w.extend(lt.t, more); err != nil {
			if !errors.Is(err, ErrNoPages) {
				tb.Fatal(err)
			}
			w.ops["no pages"]++
			return
		}
		lt.toks = append(lt.toks, more...)
		if err := w.c.Commit(lt.t, lt.toks); err != nil {
			tb.Fatal(err)
		}
	case op < 53: // fork
		lt := w.any()
		if lt == nil {
			return
		}
		w.ops["fork"]++
		n := w.pick(len(lt.toks) + 1)
		f, err := w.c.ForkPrefix(lt.t, n)
		if err != nil {
			tb.Fatal(err)
		}
		w.live = append(w.live, &liveTable{t: f, toks: slices.Clone(lt.toks[:n])})
	case op < 80: // release
		if len(w.live) == 0 {
			return
		}
		w.ops["release"]++
		i := w.pick(len(w.live))
		w.c.Release(w.live[i].t)
		if w.pick(3) == 0 {
			w.c.Release(w.live[i].t)
		}
		w.live = slices.Delete(w.live, i, i+1)
	case op < 92: // pins
		owner := w.owners[w.pick(len(w.owners))]
		lt := w.any()
		switch {
		case lt == nil || w.pick(4) == 0:
			w.ops["unpin"]++
			w.c.Unpin(owner)
		case w.pick(2) == 0:
			w.ops["pin"]++
			if err := w.c.Pin(owner, lt.t); err != nil && !errors.Is(err, ErrPinBudget) {
				tb.Fatal(err)
			}
		default:
			w.ops["repin"]++
			if err := w.c.Repin(owner, lt.t); err != nil && !errors.Is(err, ErrPinBudget) {
				tb.Fatal(err)
			}
		}
	case op < 93:
		w.ops["clear"]++
		w.c.Clear()
	default: // verify a table end to end
		if lt := w.any(); lt != nil {
			w.ops["verify"]++
			w.verify(lt.t, lt.toks)
		}
	}
	w.checkAll()
}

func (w *walker) any() *liveTable {
	if len(w.live) == 0 {
		return nil
	}
	return w.live[w.pick(len(w.live))]
}

func (w *walker) checkAll() {
	tb := w.tb
	tb.Helper()
	w.check()
	for _, lt := range w.live {
		if lt.t.Len() != len(lt.toks) {
			tb.Fatalf("table Len %d, walker wrote %d tokens", lt.t.Len(), len(lt.toks))
		}
	}
	w.c.mu.Lock()
	for h, id := range w.c.index {
		if !slices.Equal(w.mem[id], w.c.pageTokens(id)) {
			w.c.mu.Unlock()
			tb.Fatalf("indexed page %d (%x): memory %v, stored tokens %v", id, h, w.mem[id], w.c.pageTokens(id))
		}
	}
	w.c.mu.Unlock()
	for _, b := range drain(w.sub) {
		if b.Seq != w.seq+1 {
			tb.Fatalf("batch seq %d after %d", b.Seq, w.seq)
		}
		w.seq = b.Seq
		for _, e := range b.Events {
			switch e.Kind {
			case BlockStored:
				for _, h := range e.Hashes {
					if w.stored[h] {
						tb.Fatalf("block %x stored twice", h)
					}
					w.stored[h] = true
				}
			case BlockRemoved:
				for _, h := range e.Hashes {
					if !w.stored[h] {
						tb.Fatalf("block %x removed but not stored", h)
					}
					delete(w.stored, h)
				}
			case AllBlocksCleared:
				clear(w.stored)
			}
		}
	}
	if err := w.sub.Err(); err != nil {
		tb.Fatal(err)
	}
	w.c.mu.Lock()
	n := len(w.c.index)
	for h := range w.stored {
		if _, ok := w.c.index[h]; !ok {
			w.c.mu.Unlock()
			tb.Fatalf("events say %x is stored; the index does not have it", h)
		}
	}
	w.c.mu.Unlock()
	if n != len(w.stored) {
		tb.Fatalf("index has %d blocks, events say %d", n, len(w.stored))
	}
}

// finish releases everything and checks that the pool is free or cached.
func (w *walker) finish() {
	for _, lt := range w.live {
		w.c.Release(lt.t)
	}
	w.live = nil
	for _, o := range w.owners {
		w.c.Unpin(o)
	}
	w.checkAll()
	st := w.c.Stats()
	if st.InUse != 0 || st.Pinned != 0 || st.Free+st.Cached != st.Total || st.Tables != 0 {
		w.tb.Fatalf("after releasing everything: %+v", st)
	}
}

func TestRandomWalk(t *testing.T) {
	steps := 10000
	if testing.Short() {
		steps = 2000
	}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			w := newWalker(t, rng.IntN, Config{
				NumPages: 48, PageSize: 4, MaxPinnedPages: 20, MaxPinnedPagesPerOwner: 12,
				SubscriberBuffer: 64,
			})
			for range steps {
				w.step()
			}
			w.finish()
			st := w.c.Stats()
			t.Logf("ops %v; hits %d/%d tokens, evictions %d, cow %d", w.ops, st.HitToks, st.QueryToks, st.Evictions, st.COWCopies)
			if st.HitToks == 0 || st.Evictions == 0 || st.COWCopies == 0 || w.ops["no pages"] == 0 {
				t.Fatalf("the walk missed a path: %+v", st)
			}
		})
	}
}

// FuzzOps drives the same walk from fuzz input: each byte picks the next
// choice. The seed corpus runs as a normal test.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, many times over and over"))
	f.Add(slices.Repeat([]byte{10, 200, 30, 77, 5, 91, 60, 13}, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		pos := 0
		pick := func(n int) int {
			if n <= 1 {
				return 0
			}
			if pos >= len(data) {
				return 0
			}
			b := int(data[pos])
			pos++
			return b % n
		}
		w := newWalker(t, pick, Config{NumPages: 12, PageSize: 2, MaxPinnedPages: 6, MaxPinnedPagesPerOwner: 4, SubscriberBuffer: 64})
		for pos < len(data) {
			w.step()
		}
		w.finish()
	})
}
