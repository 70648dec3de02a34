package grammar

import (
	"encoding/binary"
	"slices"
)

// The GBNF recognizer works on bytes with a set of stacks of grammar
// positions, as llama.cpp's grammar sampler does (docs/api.md,
// "Structured outputs core"). The top of every stack is a terminal: the
// byte sets the output may continue with; the entries below it are where
// to resume once the rule above them ends. An empty stack means the root
// rule is complete. Reading a byte keeps the stacks whose top accepts it,
// moves their top on and expands rule references until the tops are
// terminals again.
//
// Stacks are linked nodes in an arena, so stacks share their bottoms and
// a step allocates only the nodes it changes. The trie walk of a mask is
// depth first: the nodes and sets made below a trie node are dropped when
// the walk leaves it.

// Bounds of the recognizer. A stack deeper than maxGBNFDepth is dropped
// (nesting is limited); a set of more than maxGBNFStacks stacks, or a
// byte needing more than maxGBNFWork expansion steps, makes the prefix
// dead: the mask excludes it and Advance refuses it.
const (
	maxGBNFDepth  = 1000
	maxGBNFStacks = 256
	maxGBNFWork   = 1 << 15
)

// snode is one stack entry: a grammar position over its parent entry
// (-1: the bottom).
type snode struct{ pos, parent, depth int32 }

// recognizer holds the arenas of stack nodes and stack sets. A set is a
// range [lo, hi) of sets; its members are node ids, -1 for the empty
// (accepting) stack. Not safe for concurrent use.
type recognizer struct {
	g        *gprogram
	nodes    []snode
	sets     []int32
	work     int
	buf      []int32    // save's positions
	spans    [][2]int32 // save's stacks in buf
	overflow bool       // a set passed maxGBNFStacks or a byte maxGBNFWork
	deep     bool       // a stack was dropped at maxGBNFDepth
	stats    walkStats
}

func (w *recognizer) reset() {
	w.nodes, w.sets = w.nodes[:0], w.sets[:0]
	w.overflow, w.deep = false, false
}

func (w *recognizer) newNode(pos, parent int32) int32 {
	d := int32(1)
	if parent >= 0 {
		d = w.nodes[parent].depth + 1
	}
	if d > maxGBNFDepth {
		w.deep = true
		return -2
	}
	w.nodes = append(w.nodes, snode{pos, parent, d})
	return int32(len(w.nodes) - 1)
}

// same says whether stacks a and b hold the same positions.
func (w *recognizer) same(a, b int32) bool {
	for {
		if a == b {
			return true
		}
		if a < 0 || b < 0 {
			return false
		}
		na, nb := w.nodes[a], w.nodes[b]
		if na.pos != nb.pos || na.depth != nb.depth {
			return false
		}
		a, b = na.parent, nb.parent
	}
}

// emit adds stack id to the set that starts at lo unless it is there.
func (w *recognizer) emit(id int32, lo int) {
	for _, x := range w.sets[lo:] {
		if w.same(x, id) {
			return
		}
	}
	w.sets = append(w.sets, id)
	if len(w.sets)-lo > maxGBNFStacks {
		w.overflow = true
	}
}

// expand adds to the set at lo the stacks that continue at pos over
// parent, with terminals on top. existing is a node holding exactly
// (pos, parent), or -1.
func (w *recognizer) expand(pos, parent, existing int32, lo int) {
	if w.work++; w.work > maxGBNFWork {
		w.overflow = true
		return
	}
	switch e := &w.g.elems[pos]; e.kind {
	case gTerm:
		id := existing
		if id < 0 {
			if id = w.newNode(pos, parent); id < 0 {
				return
			}
		}
		w.emit(id, lo)
	case gEnd:
		if parent < 0 {
			w.emit(-1, lo)
			return
		}
		pn := w.nodes[parent]
		w.expand(pn.pos, pn.parent, parent, lo)
	case gRef:
		// The continuation is pushed only when something follows the
		// reference, so right recursion (repetition) keeps stacks flat.
		base := parent
		if w.g.elems[pos+1].kind != gEnd {
			if base = w.newNode(pos+1, parent); base < 0 {
				return
			}
		}
		for _, a := range w.g.alts[e.ref] {
			if w.expand(a, base, -1, lo); w.overflow {
				return
			}
		}
	}
}

// start builds the initial set: the expansion of the root rule.
func (w *recognizer) start() (lo, hi int) {
	lo = len(w.sets)
	w.work = 0
	for _, a := range w.g.alts[0] {
		w.expand(a, -1, -1, lo)
	}
	if w.overflow {
		w.sets = w.sets[:lo]
	}
	return lo, len(w.sets)
}

// step reads byte b from the set [lo, hi) and returns the next set (empty
// when no stack accepts b).
func (w *recognizer) step(lo, hi int, b byte) (nlo, nhi int) {
	nlo = len(w.sets)
	w.work = 0
	for i := lo; i < hi; i++ {
		id := w.sets[i]
		if id < 0 {
			continue
		}
		n := w.nodes[id]
		if !w.g.elems[n.pos].set.has(b) {
			continue
		}
		if w.expand(n.pos+1, n.parent, -1, nlo); w.overflow {
			w.sets = w.sets[:nlo]
			return nlo, nlo
		}
	}
	return nlo, len(w.sets)
}

// tops is the union of the byte sets on top of the stacks of [lo, hi).
func (w *recognizer) tops(lo, hi int) byteSet {
	var u byteSet
	for _, id := range w.sets[lo:hi] {
		if id >= 0 {
			s := &w.g.elems[w.nodes[id].pos].set
			u[0], u[1], u[2], u[3] = u[0]|s[0], u[1]|s[1], u[2]|s[2], u[3]|s[3]
		}
	}
	return u
}

// A state is the canonical form of a set, independent of the arena: the
// stacks sorted by their positions bottom to top, each written as its
// length then its positions. The empty (accepting) stack sorts first.

// save returns the state of the set [lo, hi).
func (w *recognizer) save(lo, hi int) []int32 {
	// Each stack's positions, bottom to top, into one buffer.
	w.buf, w.spans = w.buf[:0], w.spans[:0]
	for _, id := range w.sets[lo:hi] {
		start := len(w.buf)
		for x := id; x >= 0; x = w.nodes[x].parent {
			w.buf = append(w.buf, w.nodes[x].pos)
		}
		slices.Reverse(w.buf[start:])
		w.spans = append(w.spans, [2]int32{int32(start), int32(len(w.buf))})
	}
	slices.SortFunc(w.spans, func(a, b [2]int32) int {
		return slices.Compare(w.buf[a[0]:a[1]], w.buf[b[0]:b[1]])
	})
	out := make([]int32, 0, len(w.buf)+len(w.spans))
	for _, sp := range w.spans {
		out = append(out, sp[1]-sp[0])
		out = append(out, w.buf[sp[0]:sp[1]]...)
	}
	return out
}

// load rebuilds a state's set in the arena.
func (w *recognizer) load(state []int32) (lo, hi int) {
	lo = len(w.sets)
	for i := 0; i < len(state); {
		n := int(state[i])
		i++
		id := int32(-1)
		for _, pos := range state[i : i+n] {
			d := int32(1)
			if id >= 0 {
				d = w.nodes[id].depth + 1
			}
			w.nodes = append(w.nodes, snode{pos, id, d})
			id = int32(len(w.nodes) - 1)
		}
		i += n
		w.sets = append(w.sets, id)
	}
	return lo, len(w.sets)
}

// stateKey is a compact map key for a state.
func stateKey(state []int32) string {
	b := make([]byte, 0, 2*len(state))
	for _, x := range state {
		b = binary.AppendUvarint(b, uint64(x))
	}
	return string(b)
}

// stateAccepts says whether a state holds the empty stack (it sorts
// first).
func stateAccepts(state []int32) bool { return len(state) > 0 && state[0] == 0 }

// stateFinal says whether the empty stack is the only one: complete and
// nothing can extend it.
func stateFinal(state []int32) bool { return len(state) == 1 && state[0] == 0 }

// walkTrie sets in m every token below trie node whose bytes keep the set
// [lo, hi) alive: a depth-first walk of the vocabulary trie, stepping the
// set by each edge's byte and pruning dead prefixes.
func (w *recognizer) walkTrie(v *Vocab, node int32, lo, hi int, m Mask) {
	u := w.tops(lo, hi)
	for e := v.edgeStart[node]; e < v.edgeStart[node+1]; e++ {
		b := v.edgeByte[e]
		if !u.has(b) {
			continue
		}
		nodes, sets := len(w.nodes), len(w.sets)
		nlo, nhi := w.step(lo, hi, b)
		if nhi > nlo {
			child := v.edgeNode[e]
			for _, id := range v.tokIDs[v.tokStart[child]:v.tokStart[child+1]] {
				m.Set(id)
			}
			if v.edgeStart[child] < v.edgeStart[child+1] {
				w.walkTrie(v, child, nlo, nhi, m)
			}
		}
		w.nodes, w.sets = w.nodes[:nodes], w.sets[:sets]
		w.overflow = false
	}
}

// memo is a lazily built automaton over canonical stack sets: each set
// met in a trie walk is interned once with its transitions by byte, so a
// walk that comes back to a set it has seen (in a JSON string, every
// whole character brings the walk back to the same set) costs a table
// lookup per trie edge instead of a step of every stack. A memo holds at
// most maxMemoStates sets; past that the walk steps the arena stacks
// directly. Not safe for concurrent use: a constraint pools them.
type memo struct {
	ids  map[string]int32
	enc  [][]int32 // enc [sets]: the canonical state
	keys []string  // keys [sets]: its stateKey
	tops []byteSet // tops [sets]: the bytes some stack accepts
	next []int32   // next [sets][256]: 0 unknown, -1 dead, else set+1
	// Per set, for the exactness checks of a split mask (gbnf_split.go):
	size  []int32 // stacks in the set
	depth []int32 // entries of its deepest stack
	acc   []bool  // it holds the empty stack
	bound []bool  // a transition from it dropped a stack at maxGBNFDepth or came near the stack or work bounds
}

// maxMemoStates bounds a memo (a variable so that a test can shrink it).
var maxMemoStates = 1 << 12

func (mm *memo) reset() {
	if mm.ids == nil {
		mm.ids = map[string]int32{}
	}
	clear(mm.ids)
	mm.enc, mm.keys, mm.tops, mm.next = mm.enc[:0], mm.keys[:0], mm.tops[:0], mm.next[:0]
	mm.size, mm.depth, mm.acc, mm.bound = mm.size[:0], mm.depth[:0], mm.acc[:0], mm.bound[:0]
}

// intern returns the id of a state (key is its stateKey), adding it
// when there is room.
func (mm *memo) intern(g *gprogram, state []int32, key string) (int32, bool) {
	if id, ok := mm.ids[key]; ok {
		return id, true
	}
	if len(mm.enc) >= maxMemoStates {
		return -1, false
	}
	id := int32(len(mm.enc))
	mm.ids[key] = id
	mm.enc = append(mm.enc, state)
	mm.keys = append(mm.keys, key)
	var u byteSet
	size, depth := int32(0), int32(0)
	for i := 0; i < len(state); {
		n := int(state[i])
		if n > 0 {
			s := &g.elems[state[i+n]].set
			u[0], u[1], u[2], u[3] = u[0]|s[0], u[1]|s[1], u[2]|s[2], u[3]|s[3]
		}
		size, depth = size+1, max(depth, int32(n))
		i += 1 + n
	}
	mm.tops = append(mm.tops, u)
	mm.size = append(mm.size, size)
	mm.depth = append(mm.depth, depth)
	mm.acc = append(mm.acc, stateAccepts(state))
	mm.bound = append(mm.bound, false)
	mm.next = append(mm.next, make([]int32, 256)...)
	return id, true
}

// transition returns the set after byte b from set sid: its id, -1 when
// no stack accepts b, or -2 when the memo is full (the set is then
// w.sets[lo:hi]).
func (mm *memo) transition(w *recognizer, sid int32, b byte) (next int32, lo, hi int) {
	if t := mm.next[int(sid)<<8|int(b)]; t != 0 {
		return t - 1, 0, 0
	}
	if !mm.tops[sid].has(b) {
		return -1, 0, 0
	}
	w.reset()
	lo, hi = w.load(mm.enc[sid])
	lo, hi = w.step(lo, hi, b)
	if w.deep || w.overflow || w.work > maxGBNFWork/2 || hi-lo > maxGBNFStacks/2 {
		mm.bound[sid] = true
	}
	if hi == lo {
		mm.next[int(sid)<<8|int(b)] = -1
		return -1, 0, 0
	}
	state := w.save(lo, hi)
	id, ok := mm.intern(w.g, state, stateKey(state))
	if !ok {
		return -2, lo, hi
	}
	mm.next[int(sid)<<8|int(b)] = id + 1
	return id, 0, 0
}

// walkMemo is walkTrie over memo sets: it sets in m every token below
// trie node whose bytes keep memo set sid alive. With bounds, it also
// lists the trie nodes where the set holds the empty stack; with
// w.stats, it records the sizes and bounds of the sets it meets.
func (w *recognizer) walkMemo(mm *memo, v *Vocab, node, sid int32, m Mask, bounds *[]int32) {
	for e := v.edgeStart[node]; e < v.edgeStart[node+1]; e++ {
		b := v.edgeByte[e]
		if !mm.tops[sid].has(b) {
			continue
		}
		t, lo, hi := mm.transition(w, sid, b)
		if t == -1 {
			continue
		}
		child := v.edgeNode[e]
		for _, id := range v.tokIDs[v.tokStart[child]:v.tokStart[child+1]] {
			m.Set(id)
		}
		if t == -2 { // memo full: step the arena stacks below this edge
			w.stats.fellBack = true
			if v.edgeStart[child] < v.edgeStart[child+1] {
				w.walkTrie(v, child, lo, hi, m)
			}
			continue
		}
		if w.stats.on {
			w.stats.see(mm, t)
		}
		if bounds != nil && mm.acc[t] {
			*bounds = append(*bounds, child)
		}
		if v.edgeStart[child] < v.edgeStart[child+1] {
			w.walkMemo(mm, v, child, t, m, bounds)
		}
	}
	if w.stats.on {
		w.stats.see(mm, sid)
	}
}

// walkStats are what a split mask checks to be exact (gbnf_split.go).
type walkStats struct {
	on       bool
	size     int32 // most stacks in a set met
	depth    int32 // deepest stack met
	bound    bool  // a set met has a transition near a bound
	fellBack bool  // the memo was full
}

func (s *walkStats) see(mm *memo, sid int32) {
	s.size, s.depth = max(s.size, mm.size[sid]), max(s.depth, mm.depth[sid])
	s.bound = s.bound || mm.bound[sid]
}
