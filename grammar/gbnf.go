package grammar

import (
	"container/list"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// CompileGBNF compiles a context-free grammar in GBNF, llama.cpp's format
// (docs/api.md, "Structured outputs core"), for a vocabulary. The output
// must match the rule named root. Syntax errors are ErrSyntax with a line
// and column; an undefined rule, a missing root, left recursion, a rule
// that produces no finite string and token references are
// ErrUnsupported; a grammar over the size bounds is ErrTooLarge.
func CompileGBNF(src string, v *Vocab) (Constraint, error) {
	if v == nil {
		return nil, errors.New("grammar: CompileGBNF needs a vocabulary")
	}
	g, err := compileGBNFProgram(src)
	if err != nil {
		return nil, err
	}
	c := &gbnfConstraint{g: g, vocab: v, empty: NewMask(v.n)}
	w := &recognizer{g: g}
	lo, hi := w.start()
	if hi == lo {
		return nil, fmt.Errorf("%w: gbnf root rule cannot start within the recognizer's bounds", ErrTooLarge)
	}
	c.start = w.save(lo, hi)
	c.startKey = stateKey(c.start)
	c.cache.init(maskCacheBytes / (8 * max(1, len(c.empty))))
	c.rels.init(relCacheBytes / (8 * max(1, len(c.empty))))
	return c, nil
}

func compileGBNFProgram(src string) (*gprogram, error) {
	rules, err := parseGBNF(src)
	if err != nil {
		return nil, err
	}
	return buildProgram(rules)
}

// maskCacheBytes bounds the masks a GBNF constraint keeps (least recently
// used go first).
const (
	maskCacheBytes = 16 << 20
	relCacheBytes  = 8 << 20
)

// gbnfConstraint is a compiled GBNF grammar over one vocabulary. Safe for
// concurrent use: the program is read-only and the mask cache locks.
type gbnfConstraint struct {
	g        *gprogram
	vocab    *Vocab
	start    []int32
	startKey string
	empty    Mask // no token allowed
	cache    maskCache
	rels     lru[*relResult] // relative walks (gbnf_split.go)
	splits   atomic.Int64    // masks computed by a split, for tests
	memos    sync.Pool       // of *memo, reused by mask computations
}

func (c *gbnfConstraint) VocabSize() int { return c.vocab.n }

func (c *gbnfConstraint) Start() Guide {
	return &gbnfGuide{c: c, state: c.start, key: c.startKey, w: &recognizer{g: c.g}}
}

// mask returns the cached mask of a state, computing it on a miss.
func (c *gbnfConstraint) mask(w *recognizer, key string, state []int32) Mask {
	if m, ok := c.cache.get(key); ok {
		return m
	}
	return c.cache.put(key, c.computeMask(w, state))
}

// computeMask is the uncached mask of a state: the end-of-generation
// tokens when it accepts, and every token whose bytes keep it alive (a
// walk of the vocabulary trie).
func (c *gbnfConstraint) computeMask(w *recognizer, state []int32) Mask {
	v := c.vocab
	m := NewMask(v.n)
	mm := c.getMemo()
	defer c.memos.Put(mm)
	if c.maskSplit(w, mm, state, m) {
		c.splits.Add(1)
	} else {
		// Not split (or not exactly): walk the whole state.
		clear(m)
		if sid, ok := mm.intern(c.g, state, stateKey(state)); ok {
			w.walkMemo(mm, v, 0, sid, m, nil)
		} else {
			w.reset()
			lo, hi := w.load(state)
			w.walkTrie(v, 0, lo, hi, m)
		}
	}
	if stateAccepts(state) {
		for _, id := range v.eos {
			m.Set(id)
		}
	}
	return m
}

// getMemo takes a memo from the pool (Put it back after use), emptied
// when full.
func (c *gbnfConstraint) getMemo() *memo {
	mm, _ := c.memos.Get().(*memo)
	if mm == nil {
		mm = &memo{}
		mm.reset()
	} else if len(mm.enc) >= maxMemoStates {
		mm.reset()
	}
	return mm
}

// referenceMask is the plain twin of computeMask: every token's bytes fed
// to the recognizer one by one.
func (c *gbnfConstraint) referenceMask(state []int32) Mask {
	v := c.vocab
	m := NewMask(v.n)
	if stateAccepts(state) {
		for _, id := range v.eos {
			m.Set(id)
		}
	}
	w := &recognizer{g: c.g}
	for id, p := range v.pieces {
		if len(p) == 0 {
			continue
		}
		w.reset()
		lo, hi := w.load(state)
		for _, b := range p {
			if lo, hi = w.step(lo, hi, b); lo == hi {
				break
			}
		}
		if hi > lo {
			m.Set(int32(id))
		}
	}
	return m
}

// gbnfGuide follows one output: the state after the tokens so far.
type gbnfGuide struct {
	c     *gbnfConstraint
	state []int32
	key   string
	ended bool        // an end-of-generation token was accepted
	w     *recognizer // arena reused across calls
}

func (g *gbnfGuide) Mask() Mask {
	if g.ended {
		return g.c.empty
	}
	return g.c.mask(g.w, g.key, g.state)
}

func (g *gbnfGuide) Advance(id int32) error {
	if g.ended {
		return fmt.Errorf("%w: generation already ended", ErrTokenRejected)
	}
	v := g.c.vocab
	if id < 0 || int(id) >= v.n {
		return fmt.Errorf("%w: token %d outside the vocabulary", ErrTokenRejected, id)
	}
	if isEOG(v, id) {
		if !stateAccepts(g.state) {
			return fmt.Errorf("%w: end of generation before the output is complete", ErrTokenRejected)
		}
		g.ended = true
		return nil
	}
	p := v.pieces[id]
	if len(p) == 0 {
		return fmt.Errorf("%w: token %d has no text", ErrTokenRejected, id)
	}
	if g.advanceMemo(p) {
		return nil
	}
	state, err := g.advanceBytes(p)
	if err != nil {
		return fmt.Errorf("%w: token %d (%q): %w", ErrTokenRejected, id, p, err)
	}
	g.state, g.key = state, stateKey(state)
	return nil
}

// advanceMemo reads p through a pooled memo's transitions. It returns
// false, leaving the guide unchanged, when p is refused or the memo is
// full: advanceBytes then decides (and says why).
func (g *gbnfGuide) advanceMemo(p []byte) bool {
	c := g.c
	mm := c.getMemo()
	defer c.memos.Put(mm)
	sid, ok := mm.intern(c.g, g.state, g.key)
	if !ok {
		return false
	}
	for _, b := range p {
		if sid, _, _ = mm.transition(g.w, sid, b); sid < 0 {
			return false
		}
	}
	g.state, g.key = mm.enc[sid], mm.keys[sid]
	return true
}

var errGBNFNoMatch = errors.New("the grammar does not allow it here")

// advanceBytes returns the state after bytes p, or why p is refused.
func (g *gbnfGuide) advanceBytes(p []byte) ([]int32, error) {
	w := g.w
	w.reset()
	lo, hi := w.load(g.state)
	for _, b := range p {
		if lo, hi = w.step(lo, hi, b); lo == hi {
			switch {
			case w.overflow:
				return nil, fmt.Errorf("%w: more than %d parses at once", ErrTooLarge, maxGBNFStacks)
			case w.deep:
				return nil, fmt.Errorf("%w: nesting deeper than %d", ErrTooLarge, maxGBNFDepth)
			}
			return nil, errGBNFNoMatch
		}
	}
	return w.save(lo, hi), nil
}

func (g *gbnfGuide) Done() bool { return g.ended || stateFinal(g.state) }

// distance is the fewest bytes that complete the output (a test steers
// random walks with it).
func (g *gbnfGuide) distance() int {
	best := -1
	for i := 0; i < len(g.state); {
		n := int(g.state[i])
		d := 0
		for _, pos := range g.state[i+1 : i+1+n] {
			d += int(g.c.g.minRest[pos])
		}
		if best < 0 || d < best {
			best = d
		}
		i += 1 + n
	}
	return best
}

func isEOG(v *Vocab, id int32) bool {
	for _, e := range v.eos {
		if e == id {
			return true
		}
	}
	return false
}

// lru is a least-recently-used map from state keys to values, safe for
// concurrent use.
type lru[V any] struct {
	mu      sync.Mutex // protects max, entries, order
	max     int
	entries map[string]*list.Element
	order   list.List // of *lruEntry[V], most recent first
}

type lruEntry[V any] struct {
	key string
	val V
}

// maskCache holds the masks of states.
type maskCache = lru[Mask]

func (c *lru[V]) init(max int) {
	c.max = max
	if c.max < 16 {
		c.max = 16
	}
	c.entries = map[string]*list.Element{}
}

func (c *lru[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[V]).val, true
	}
	var zero V
	return zero, false
}

// put stores v unless the key is there already (two outputs computed it
// at once), and returns the stored value.
func (c *lru[V]) put(key string, v V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruEntry[V]).val
	}
	c.entries[key] = c.order.PushFront(&lruEntry[V]{key, v})
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.entries, old.Value.(*lruEntry[V]).key)
	}
	return v
}

func (c *lru[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

var _ Constraint = (*gbnfConstraint)(nil)
