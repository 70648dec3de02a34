package grammar

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// Limits on automaton size: a constraint past them is ErrTooLarge.
const (
	maxNFAStates = 1 << 20
	maxDFAStates = 1 << 16
)

// DFA is a deterministic automaton over bytes. State 0 is the start; a
// transition to -1 is dead. Every live state can reach an accepting one
// (dead ends are trimmed), so a walk that stays live can always finish.
type DFA struct {
	trans  []int32 // trans [states][256] (row-major): next state, -1 dead
	accept []bool  // accept [states]
	// dist [states]: fewest bytes from the state to an accepting state.
	dist []int32
}

// NumStates is the number of states.
func (d *DFA) NumStates() int { return len(d.accept) }

// Next is the state after byte b from s, -1 when b is not allowed (or s is
// already -1).
func (d *DFA) Next(s int32, b byte) int32 {
	if s < 0 {
		return -1
	}
	return d.trans[int(s)<<8|int(b)]
}

// Accepting says whether the bytes read so far form a complete match.
func (d *DFA) Accepting(s int32) bool { return s >= 0 && d.accept[s] }

// DistToAccept is the fewest bytes that complete a match from s (-1 when s
// is dead). An engine near its token limit can use it to steer to the end.
func (d *DFA) DistToAccept(s int32) int {
	if s < 0 {
		return -1
	}
	return int(d.dist[s])
}

// Match runs the whole input from the start state.
func (d *DFA) Match(b []byte) bool {
	s := int32(0)
	for _, c := range b {
		if s = d.Next(s, c); s < 0 {
			return false
		}
	}
	return d.Accepting(s)
}

// CompileRegex compiles a pattern of the supported subset (see parseRegex)
// to a DFA that accepts exactly the strings the whole pattern matches.
func CompileRegex(pattern string) (*DFA, error) {
	n, err := parseRegex(pattern)
	if err != nil {
		return nil, err
	}
	return compileNode(n)
}

// nfa states: a byte range with one successor, an epsilon split, or match.
type nstate struct {
	lo, hi byte
	out    int32
	eps    []int32 // non-nil: epsilon split (lo, hi, out unused)
	match  bool
}

type nfa struct {
	states []nstate
	err    error
}

func (m *nfa) add(s nstate) int32 {
	if len(m.states) >= maxNFAStates {
		m.err = fmt.Errorf("%w: more than %d NFA states", ErrTooLarge, maxNFAStates)
		return 0
	}
	m.states = append(m.states, s)
	return int32(len(m.states) - 1)
}

// build compiles n so that its match continues at next, and returns its
// start state (Thompson's construction, built back to front).
func (m *nfa) build(n *node, next int32) int32 {
	if m.err != nil {
		return next
	}
	switch n.op {
	case opEmpty:
		return next
	case opClass:
		var starts []int32
		for _, seq := range utf8Sequences(n.ranges) {
			cur := next
			for i := len(seq) - 1; i >= 0; i-- {
				cur = m.add(nstate{lo: seq[i].lo, hi: seq[i].hi, out: cur})
			}
			starts = append(starts, cur)
		}
		if len(starts) == 1 {
			return starts[0]
		}
		if starts == nil {
			starts = []int32{} // an empty class: a split with no way out
		}
		return m.add(nstate{eps: starts})
	case opConcat:
		cur := next
		for i := len(n.subs) - 1; i >= 0; i-- {
			cur = m.build(n.subs[i], cur)
		}
		return cur
	case opAlt:
		starts := make([]int32, len(n.subs))
		for i, sub := range n.subs {
			starts[i] = m.build(sub, next)
		}
		return m.add(nstate{eps: starts})
	case opSepList:
		// entry -> item -> after; after -> sep -> entry, or next.
		entry := m.add(nstate{eps: []int32{}})
		after := m.add(nstate{eps: []int32{}})
		item := m.build(n.subs[0], after)
		sep := m.build(n.subs[1], entry)
		if m.err != nil {
			return next
		}
		m.states[entry].eps = []int32{item}
		m.states[after].eps = []int32{sep, next}
		return entry
	case opRepeat:
		sub := n.subs[0]
		cur := next
		if n.max < 0 {
			loop := m.add(nstate{eps: []int32{}})
			body := m.build(sub, loop)
			if m.err != nil {
				return next
			}
			m.states[loop].eps = []int32{body, next}
			cur = loop
		} else {
			for i := 0; i < n.max-n.min && m.err == nil; i++ {
				cur = m.add(nstate{eps: []int32{m.build(sub, cur), next}})
			}
		}
		for i := 0; i < n.min && m.err == nil; i++ {
			cur = m.build(sub, cur)
		}
		return cur
	}
	panic("grammar: unknown node op")
}

func compileNode(n *node) (*DFA, error) {
	m := &nfa{}
	final := m.add(nstate{match: true})
	start := m.build(n, final)
	if m.err != nil {
		return nil, m.err
	}
	d, err := m.determinize(start)
	if err != nil {
		return nil, err
	}
	return d.minimize(), nil
}

// closure adds to set the states reachable from s by epsilon moves; only
// byte and match states are kept.
func (m *nfa) closure(s int32, seen []uint32, gen uint32, set []int32) []int32 {
	stack := []int32{s}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[x] == gen {
			continue
		}
		seen[x] = gen
		if st := &m.states[x]; st.eps != nil {
			for i := len(st.eps) - 1; i >= 0; i-- {
				stack = append(stack, st.eps[i])
			}
			continue
		}
		set = append(set, x)
	}
	return set
}

// determinize is the subset construction, splitting the byte alphabet at
// the range bounds present in each state set.
func (m *nfa) determinize(start int32) (*DFA, error) {
	seen := make([]uint32, len(m.states))
	gen := uint32(1)
	key := func(set []int32) string {
		b := make([]byte, 0, 4*len(set))
		for _, x := range set {
			b = append(b, byte(x), byte(x>>8), byte(x>>16), byte(x>>24))
		}
		return string(b)
	}
	d := &DFA{}
	ids := map[string]int32{}
	var sets [][]int32
	intern := func(set []int32) (int32, error) {
		slices.Sort(set)
		k := key(set)
		if id, ok := ids[k]; ok {
			return id, nil
		}
		if len(sets) >= maxDFAStates {
			return 0, fmt.Errorf("%w: more than %d DFA states", ErrTooLarge, maxDFAStates)
		}
		id := int32(len(sets))
		ids[k] = id
		sets = append(sets, set)
		acc := false
		for _, x := range set {
			acc = acc || m.states[x].match
		}
		d.accept = append(d.accept, acc)
		row := make([]int32, 256)
		for i := range row {
			row[i] = -1
		}
		d.trans = append(d.trans, row...)
		return id, nil
	}
	if _, err := intern(m.closure(start, seen, gen, nil)); err != nil {
		return nil, err
	}
	var bounds []int
	for i := 0; i < len(sets); i++ {
		set := sets[i]
		bounds = bounds[:0]
		for _, x := range set {
			if st := &m.states[x]; !st.match {
				bounds = append(bounds, int(st.lo), int(st.hi)+1)
			}
		}
		slices.Sort(bounds)
		bounds = slices.Compact(bounds)
		for k := 0; k+1 < len(bounds); k++ {
			lo, hi := bounds[k], bounds[k+1] // [lo, hi)
			gen++
			var next []int32
			for _, x := range set {
				if st := &m.states[x]; !st.match && int(st.lo) <= lo && lo <= int(st.hi) {
					next = m.closure(st.out, seen, gen, next)
				}
			}
			if len(next) == 0 {
				continue
			}
			id, err := intern(next)
			if err != nil {
				return nil, err
			}
			row := d.trans[i<<8 : i<<8+256]
			for b := lo; b < hi; b++ {
				row[b] = id
			}
		}
	}
	d.trim()
	return d, nil
}

// trim computes the distance to acceptance by a backward search and cuts
// every transition into a state that cannot reach acceptance.
func (d *DFA) trim() {
	n := len(d.accept)
	rev := make([][]int32, n)
	for s := 0; s < n; s++ {
		for b := 0; b < 256; b++ {
			if t := d.trans[s<<8|b]; t >= 0 && (len(rev[t]) == 0 || rev[t][len(rev[t])-1] != int32(s)) {
				rev[t] = append(rev[t], int32(s))
			}
		}
	}
	d.dist = make([]int32, n)
	var queue []int32
	for s := range d.dist {
		d.dist[s] = -1
		if d.accept[s] {
			d.dist[s] = 0
			queue = append(queue, int32(s))
		}
	}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		for _, s := range rev[t] {
			if d.dist[s] < 0 {
				d.dist[s] = d.dist[t] + 1
				queue = append(queue, s)
			}
		}
	}
	for i, t := range d.trans {
		if t >= 0 && d.dist[t] < 0 {
			d.trans[i] = -1
		}
	}
}

// byteRange is one byte position of a UTF-8 sequence class.
type byteRange struct{ lo, hi byte }

// utf8Sequences turns rune ranges into alternatives of byte-range
// sequences that match exactly the UTF-8 encodings of those runes
// (surrogates excluded, as they have no UTF-8 encoding).
func utf8Sequences(rs []runeRange) [][]byteRange {
	var out [][]byteRange
	for _, r := range rs {
		out = splitUTF8(r.lo, r.hi, out)
	}
	return out
}

func splitUTF8(lo, hi rune, out [][]byteRange) [][]byteRange {
	if lo > hi {
		return out
	}
	// Cut out the surrogates.
	if lo <= 0xDFFF && hi >= 0xD800 {
		out = splitUTF8(lo, 0xD7FF, out)
		return splitUTF8(0xE000, hi, out)
	}
	// Split where the encoded length changes.
	for _, max := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= max && hi > max {
			out = splitUTF8(lo, max, out)
			return splitUTF8(max+1, hi, out)
		}
	}
	if hi <= 0x7F {
		return append(out, []byteRange{{byte(lo), byte(hi)}})
	}
	// Split until every continuation byte spans its full range or the
	// leading bytes agree, so that the byte ranges form a product.
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		mask := rune(1)<<(6*i) - 1
		if lo&^mask != hi&^mask {
			if lo&mask != 0 {
				out = splitUTF8(lo, lo|mask, out)
				return splitUTF8((lo|mask)+1, hi, out)
			}
			if hi&mask != mask {
				out = splitUTF8(lo, (hi&^mask)-1, out)
				return splitUTF8(hi&^mask, hi, out)
			}
		}
	}
	var a, b [utf8.UTFMax]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	seq := make([]byteRange, n)
	for i := range seq {
		seq[i] = byteRange{a[i], b[i]}
	}
	return append(out, seq)
}

// CompileChoice compiles "exactly one of these strings" (each taken
// literally; at least one).
func CompileChoice(choices []string) (*DFA, error) {
	if len(choices) == 0 {
		return nil, fmt.Errorf("%w: empty choice", ErrSyntax)
	}
	alts := make([]*node, len(choices))
	for i, c := range choices {
		if !utf8.ValidString(c) {
			return nil, fmt.Errorf("%w: choice %d is not UTF-8", ErrSyntax, i)
		}
		alts[i] = literal(c)
	}
	return compileNode(alt(alts...))
}

// minimizeBudget bounds the work of minimize (states times rounds):
// Moore's refinement needs as many rounds as the longest distinguishing
// string (a maxLength of 1000 needs about 1000), so past the budget the
// DFA is kept as it is: correct, only larger. (Hopcroft's algorithm would
// lift the bound.)
const minimizeBudget = 1 << 20

// minimize merges equivalent states (Moore's partition refinement):
// states start split by acceptance and are split again by the classes of
// their successors until no split happens. State 0 stays the start.
func (d *DFA) minimize() *DFA {
	n := d.NumStates()
	class := make([]int32, n)
	for s := range class {
		if d.accept[s] {
			class[s] = 1
		}
	}
	// Bytes with the same column (the same successor in every state) are
	// interchangeable: compare one byte per group.
	var reps []int
	cols := map[string]bool{}
	col := make([]byte, 4*n)
	for b := 0; b < 256; b++ {
		for s := 0; s < n; s++ {
			t := d.trans[s<<8|b]
			col[4*s], col[4*s+1], col[4*s+2], col[4*s+3] = byte(t), byte(t>>8), byte(t>>16), byte(t>>24)
		}
		if !cols[string(col)] {
			cols[string(col)] = true
			reps = append(reps, b)
		}
	}
	nClasses := 0
	key := make([]byte, 4*(len(reps)+1))
	for round := 1; ; round++ {
		if round*n > minimizeBudget {
			return d
		}
		ids := make(map[string]int32, nClasses)
		next := make([]int32, n)
		for s := 0; s < n; s++ {
			put := func(i int, v int32) {
				key[4*i], key[4*i+1], key[4*i+2], key[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
			}
			put(0, class[s])
			for i, b := range reps {
				t := d.trans[s<<8|b]
				if t >= 0 {
					t = class[t]
				}
				put(i+1, t)
			}
			id, ok := ids[string(key)]
			if !ok {
				id = int32(len(ids))
				ids[string(key)] = id
			}
			next[s] = id
		}
		class = next
		if len(ids) == nClasses {
			break
		}
		nClasses = len(ids)
	}
	// State 0 has class 0: classes are numbered in order of first state.
	m := &DFA{trans: make([]int32, nClasses<<8), accept: make([]bool, nClasses), dist: make([]int32, nClasses)}
	for s := n - 1; s >= 0; s-- {
		c := class[s]
		m.accept[c], m.dist[c] = d.accept[s], d.dist[s]
		for b := 0; b < 256; b++ {
			t := d.trans[s<<8|b]
			if t >= 0 {
				t = class[t]
			}
			m.trans[int(c)<<8|b] = t
		}
	}
	return m
}
