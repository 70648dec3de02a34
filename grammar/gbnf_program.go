package grammar

import (
	"fmt"
	"math"
	"strings"
)

// gprogram is a GBNF grammar flattened for the recognizer: every
// alternative of every rule is a run of elements ending with an end
// element. A recognizer position is an index into elems.
type gprogram struct {
	elems []gelem
	alts  [][]int32 // alts [rules]: start position of each alternative
	// minRest [elems]: fewest bytes from the position to the end of its
	// alternative (a test steers random walks to completion with it).
	minRest []int32
	names   []string // names [rules], for messages
}

type gkind uint8

const (
	gTerm gkind = iota // one byte of set
	gRef               // rule ref
	gEnd               // end of an alternative
)

type gelem struct {
	kind gkind
	ref  int32
	set  byteSet
}

// buildProgram flattens the rules and refuses grammars the recognizer
// cannot run: a rule that produces no finite string, and left recursion
// (a rule that can reach itself before reading a byte).
func buildProgram(rules []*grule) (*gprogram, error) {
	g := &gprogram{alts: make([][]int32, len(rules)), names: make([]string, len(rules))}
	for r, rule := range rules {
		g.names[r] = rule.name
		for _, a := range rule.alts {
			g.alts[r] = append(g.alts[r], int32(len(g.elems)))
			for _, s := range a {
				if s.ref >= 0 {
					g.elems = append(g.elems, gelem{kind: gRef, ref: s.ref})
				} else {
					g.elems = append(g.elems, gelem{kind: gTerm, set: s.set})
				}
			}
			g.elems = append(g.elems, gelem{kind: gEnd})
		}
	}
	minLen := g.minLengths()
	for r, n := range minLen {
		if n == math.MaxInt32 {
			return nil, fmt.Errorf("%w: gbnf rule %q produces no finite string", ErrUnsupported, g.userName(rules, r))
		}
	}
	g.minRest = make([]int32, len(g.elems))
	for i := len(g.elems) - 1; i >= 0; i-- {
		switch e := g.elems[i]; e.kind {
		case gTerm:
			g.minRest[i] = 1 + g.minRest[i+1]
		case gRef:
			g.minRest[i] = sat(minLen[e.ref] + g.minRest[i+1])
		}
	}
	if err := g.checkLeftRecursion(rules, minLen); err != nil {
		return nil, err
	}
	return g, nil
}

func sat(n int32) int32 {
	if n < 0 || n > math.MaxInt32/2 {
		return math.MaxInt32 / 2
	}
	return n
}

// minLengths is the fewest bytes each rule produces (MaxInt32: none):
// Knuth's generalization of Dijkstra's algorithm, so each rule is settled
// once, in order of its length (O(symbols log symbols) for any order of
// the rules in the source).
func (g *gprogram) minLengths() []int32 {
	minLen := make([]int32, len(g.alts))
	for r := range minLen {
		minLen[r] = math.MaxInt32
	}
	type alt struct {
		rule    int32
		pending int   // references to rules not settled yet
		sum     int64 // bytes of the settled part
	}
	var alts []alt
	uses := make([][]int32, len(g.alts)) // uses [rules]: alternatives referring to it, once per reference
	h := &lenHeap{}
	for r, starts := range g.alts {
		for _, a := range starts {
			i := int32(len(alts))
			alts = append(alts, alt{rule: int32(r)})
			for p := a; g.elems[p].kind != gEnd; p++ {
				if e := g.elems[p]; e.kind == gTerm {
					alts[i].sum++
				} else {
					alts[i].pending++
					uses[e.ref] = append(uses[e.ref], i)
				}
			}
			if alts[i].pending == 0 {
				h.push(alts[i].sum, int32(r))
			}
		}
	}
	for h.len() > 0 {
		n, r := h.pop()
		if minLen[r] != math.MaxInt32 {
			continue
		}
		minLen[r] = int32(min(n, math.MaxInt32/2))
		for _, i := range uses[r] {
			a := &alts[i]
			a.sum += int64(minLen[r])
			if a.pending--; a.pending == 0 && minLen[a.rule] == math.MaxInt32 {
				h.push(a.sum, a.rule)
			}
		}
	}
	return minLen
}

// lenHeap is a min-heap of (length, rule).
type lenHeap struct{ items []lenItem }

type lenItem struct {
	n    int64
	rule int32
}

func (h *lenHeap) len() int { return len(h.items) }

func (h *lenHeap) push(n int64, rule int32) {
	h.items = append(h.items, lenItem{n, rule})
	for i := len(h.items) - 1; i > 0; {
		p := (i - 1) / 2
		if h.items[p].n <= h.items[i].n {
			break
		}
		h.items[p], h.items[i] = h.items[i], h.items[p]
		i = p
	}
}

func (h *lenHeap) pop() (int64, int32) {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < last && h.items[l].n < h.items[m].n {
			m = l
		}
		if l+1 < last && h.items[l+1].n < h.items[m].n {
			m = l + 1
		}
		if m == i {
			break
		}
		h.items[m], h.items[i] = h.items[i], h.items[m]
		i = m
	}
	return top.n, top.rule
}

// checkLeftRecursion looks for a cycle in "rule A may start with rule B"
// (B after only rules that can be empty).
func (g *gprogram) checkLeftRecursion(rules []*grule, minLen []int32) error {
	starts := make([][]int32, len(g.alts))
	for r, alts := range g.alts {
		for _, a := range alts {
			for p := a; g.elems[p].kind == gRef; p++ {
				starts[r] = append(starts[r], g.elems[p].ref)
				if minLen[g.elems[p].ref] > 0 {
					break
				}
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(g.alts))
	var path []int32
	var visit func(r int32) error
	visit = func(r int32) error {
		color[r] = grey
		path = append(path, r)
		for _, s := range starts[r] {
			switch color[s] {
			case grey:
				name := g.userName(rules, int(s))
				for i := len(path) - 1; i >= 0 && !rules[s].user; i-- {
					if rules[path[i]].user {
						name = rules[path[i]].name
						break
					}
					if path[i] == s {
						break
					}
				}
				return fmt.Errorf("%w: gbnf left recursion through rule %q (a rule reaches itself before reading any character; write it with repetition instead)", ErrUnsupported, name)
			case white:
				if err := visit(s); err != nil {
					return err
				}
			}
		}
		path = path[:len(path)-1]
		color[r] = black
		return nil
	}
	for r := range g.alts {
		if color[r] == white {
			if err := visit(int32(r)); err != nil {
				return err
			}
		}
	}
	return nil
}

// userName names rule r for a message: its own name, or for a synthetic
// rule the user rule it belongs to.
func (g *gprogram) userName(rules []*grule, r int) string {
	n := rules[r].name
	if !rules[r].user {
		if i := strings.IndexByte(n, '/'); i >= 0 {
			return n[:i] + " (a group or repetition in it)"
		}
	}
	return n
}
