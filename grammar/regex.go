// Package grammar compiles output constraints (a regular-expression subset,
// a JSON Schema subset, any JSON of bounded depth) to a deterministic
// automaton over bytes, and from it, for a model vocabulary, the set of
// tokens allowed in each automaton state (docs/api.md, "Structured outputs
// core"). It knows nothing of the engine: the engine asks a Matcher for a
// Mask, applies it to the logits and Advances with the sampled token.
package grammar

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Errors. Anything outside the supported subset is ErrUnsupported: it is
// refused before use, never ignored.
var (
	ErrSyntax      = errors.New("grammar: syntax error")
	ErrUnsupported = errors.New("grammar: unsupported construct")
	ErrTooLarge    = errors.New("grammar: automaton too large")
)

// maxRepeat bounds {m,n} counts (Go's regexp uses the same bound).
const maxRepeat = 1000

type opKind uint8

const (
	opEmpty   opKind = iota // matches the empty string
	opClass                 // one rune from ranges
	opConcat                // subs in order
	opAlt                   // one of subs
	opRepeat                // sub[0] between min and max times (max < 0: unbounded)
	opSepList               // sub[0] (sub[1] sub[0])*, one copy of sub[0] in the NFA
)

type runeRange struct{ lo, hi rune }

// node is the syntax tree shared by the regex parser and the schema
// compiler.
type node struct {
	op       opKind
	ranges   []runeRange
	subs     []*node
	min, max int
}

func empty() *node               { return &node{op: opEmpty} }
func class(r ...runeRange) *node { return &node{op: opClass, ranges: r} }
func concat(subs ...*node) *node { return &node{op: opConcat, subs: subs} }
func alt(subs ...*node) *node    { return &node{op: opAlt, subs: subs} }
func repeat(n *node, lo, hi int) *node {
	return &node{op: opRepeat, subs: []*node{n}, min: lo, max: hi}
}

// literal matches exactly s (UTF-8 text).
func literal(s string) *node {
	subs := make([]*node, 0, len(s))
	for _, r := range s {
		subs = append(subs, class(runeRange{r, r}))
	}
	return concat(subs...)
}

// parseRegex parses the subset: literals, escapes of punctuation, \n \t \r
// \f \v, \xHH, \d \w \s \D \W \S (ASCII, as Go's regexp), classes
// [a-z] [^...], '.', groups ( ) and (?: ), alternation |, and the greedy
// quantifiers ? * + {m} {m,} {m,n}. The whole input must match (no anchors).
func parseRegex(pat string) (*node, error) {
	if !utf8.ValidString(pat) {
		return nil, fmt.Errorf("%w: pattern is not UTF-8", ErrSyntax)
	}
	p := &parser{s: pat}
	n, err := p.alternation(0)
	if err != nil {
		return nil, err
	}
	if p.i < len(p.s) {
		return nil, fmt.Errorf("%w: unexpected %q at %d", ErrSyntax, p.s[p.i], p.i)
	}
	return n, nil
}

type parser struct {
	s string
	i int
}

func (p *parser) alternation(depth int) (*node, error) {
	if depth > 100 {
		return nil, fmt.Errorf("%w: groups nested too deeply", ErrTooLarge)
	}
	var alts []*node
	for {
		seq, err := p.sequence(depth)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if p.i < len(p.s) && p.s[p.i] == '|' {
			p.i++
			continue
		}
		break
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return alt(alts...), nil
}

func (p *parser) sequence(depth int) (*node, error) {
	var items []*node
	for p.i < len(p.s) && p.s[p.i] != '|' && p.s[p.i] != ')' {
		atom, err := p.atom(depth)
		if err != nil {
			return nil, err
		}
		atom, err = p.quantifier(atom)
		if err != nil {
			return nil, err
		}
		items = append(items, atom)
	}
	switch len(items) {
	case 0:
		return empty(), nil
	case 1:
		return items[0], nil
	}
	return concat(items...), nil
}

func (p *parser) quantifier(atom *node) (*node, error) {
	if p.i >= len(p.s) {
		return atom, nil
	}
	lo, hi := 0, 0
	switch p.s[p.i] {
	case '?':
		lo, hi = 0, 1
		p.i++
	case '*':
		lo, hi = 0, -1
		p.i++
	case '+':
		lo, hi = 1, -1
		p.i++
	case '{':
		var err error
		if lo, hi, err = p.braces(); err != nil {
			return nil, err
		}
	default:
		return atom, nil
	}
	if p.i < len(p.s) {
		switch p.s[p.i] {
		case '?', '*', '+', '{':
			return nil, fmt.Errorf("%w: lazy or nested quantifier at %d", ErrUnsupported, p.i)
		}
	}
	return repeat(atom, lo, hi), nil
}

// braces parses {m}, {m,} or {m,n} at p.i.
func (p *parser) braces() (int, int, error) {
	start := p.i
	p.i++ // '{'
	num := func() (int, bool) {
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		if j == p.i || p.i-j > 4 {
			return 0, false
		}
		v, _ := strconv.Atoi(p.s[j:p.i])
		return v, true
	}
	lo, ok := num()
	if !ok {
		return 0, 0, fmt.Errorf("%w: bad repeat at %d", ErrSyntax, start)
	}
	hi := lo
	if p.i < len(p.s) && p.s[p.i] == ',' {
		p.i++
		if p.i < len(p.s) && p.s[p.i] == '}' {
			hi = -1
		} else if hi, ok = num(); !ok {
			return 0, 0, fmt.Errorf("%w: bad repeat at %d", ErrSyntax, start)
		}
	}
	if p.i >= len(p.s) || p.s[p.i] != '}' {
		return 0, 0, fmt.Errorf("%w: bad repeat at %d", ErrSyntax, start)
	}
	p.i++
	if lo > maxRepeat || hi > maxRepeat || (hi >= 0 && hi < lo) {
		return 0, 0, fmt.Errorf("%w: repeat {%d,%d} out of range", ErrSyntax, lo, hi)
	}
	return lo, hi, nil
}

func (p *parser) atom(depth int) (*node, error) {
	c := p.s[p.i]
	switch c {
	case '(':
		p.i++
		if p.i < len(p.s) && p.s[p.i] == '?' {
			if p.i+1 < len(p.s) && p.s[p.i+1] == ':' {
				p.i += 2
			} else {
				return nil, fmt.Errorf("%w: group flags at %d", ErrUnsupported, p.i)
			}
		}
		n, err := p.alternation(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			return nil, fmt.Errorf("%w: missing )", ErrSyntax)
		}
		p.i++
		return n, nil
	case '[':
		return p.bracket()
	case '.':
		p.i++
		return class(runeRange{0, '\n' - 1}, runeRange{'\n' + 1, utf8.MaxRune}), nil
	case '\\':
		rs, err := p.escape(false)
		if err != nil {
			return nil, err
		}
		return class(rs...), nil
	case '?', '*', '+', '{':
		return nil, fmt.Errorf("%w: quantifier without operand at %d", ErrSyntax, p.i)
	case '^', '$':
		return nil, fmt.Errorf("%w: anchors (the whole output must match)", ErrUnsupported)
	case ']', '}':
		return nil, fmt.Errorf("%w: unescaped %q at %d", ErrSyntax, c, p.i)
	}
	r, size := utf8.DecodeRuneInString(p.s[p.i:])
	p.i += size
	return class(runeRange{r, r}), nil
}

var (
	digitRanges = []runeRange{{'0', '9'}}
	wordRanges  = []runeRange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	spaceRanges = []runeRange{{'\t', '\n'}, {'\f', '\r'}, {' ', ' '}}
)

// escape parses a backslash sequence at p.i and returns its rune ranges.
// In a bracket the Perl classes are allowed too.
func (p *parser) escape(inClass bool) ([]runeRange, error) {
	p.i++ // '\\'
	if p.i >= len(p.s) {
		return nil, fmt.Errorf("%w: trailing backslash", ErrSyntax)
	}
	c := p.s[p.i]
	p.i++
	one := func(r rune) []runeRange { return []runeRange{{r, r}} }
	switch c {
	case 'd':
		return digitRanges, nil
	case 'w':
		return wordRanges, nil
	case 's':
		return spaceRanges, nil
	case 'D':
		return negate(digitRanges), nil
	case 'W':
		return negate(wordRanges), nil
	case 'S':
		return negate(spaceRanges), nil
	case 'n':
		return one('\n'), nil
	case 't':
		return one('\t'), nil
	case 'r':
		return one('\r'), nil
	case 'f':
		return one('\f'), nil
	case 'v':
		return one('\v'), nil
	case 'x':
		if p.i < len(p.s) && p.s[p.i] == '{' {
			end := p.i + 1
			for end < len(p.s) && p.s[end] != '}' {
				end++
			}
			v, err := strconv.ParseUint(p.s[p.i+1:min(end, len(p.s))], 16, 32)
			if end >= len(p.s) || err != nil || v > utf8.MaxRune {
				return nil, fmt.Errorf("%w: bad \\x{} escape", ErrSyntax)
			}
			p.i = end + 1
			return one(rune(v)), nil
		}
		if p.i+2 > len(p.s) {
			return nil, fmt.Errorf("%w: bad \\x escape", ErrSyntax)
		}
		v, err := strconv.ParseUint(p.s[p.i:p.i+2], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("%w: bad \\x escape", ErrSyntax)
		}
		p.i += 2
		return one(rune(v)), nil
	}
	if c < utf8.RuneSelf && isPunct(c) {
		return one(rune(c)), nil
	}
	return nil, fmt.Errorf("%w: escape \\%c", ErrUnsupported, c)
}

func isPunct(c byte) bool {
	return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~')
}

// bracket parses [...] or [^...] at p.i.
func (p *parser) bracket() (*node, error) {
	start := p.i
	p.i++
	neg := false
	if p.i < len(p.s) && p.s[p.i] == '^' {
		neg = true
		p.i++
	}
	var rs []runeRange
	first := true
	for {
		if p.i >= len(p.s) {
			return nil, fmt.Errorf("%w: missing ] for [ at %d", ErrSyntax, start)
		}
		c := p.s[p.i]
		if c == ']' {
			if first {
				return nil, fmt.Errorf("%w: empty class at %d", ErrSyntax, start)
			}
			p.i++
			break
		}
		if c == '[' {
			return nil, fmt.Errorf("%w: [ inside a class (escape it)", ErrUnsupported)
		}
		first = false
		lo, isRange, err := p.classAtom()
		if err != nil {
			return nil, err
		}
		if !isRange {
			rs = append(rs, lo...)
			continue
		}
		// A '-' followed by something other than ']' makes a range.
		if p.i+1 < len(p.s) && p.s[p.i] == '-' && p.s[p.i+1] != ']' {
			p.i++
			hi, isRange2, err := p.classAtom()
			if err != nil {
				return nil, err
			}
			if !isRange2 || hi[0].lo < lo[0].lo {
				return nil, fmt.Errorf("%w: bad class range at %d", ErrSyntax, start)
			}
			rs = append(rs, runeRange{lo[0].lo, hi[0].lo})
			continue
		}
		rs = append(rs, lo...)
	}
	rs = normalize(rs)
	if neg {
		rs = negate(rs)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: class matches nothing at %d", ErrUnsupported, start)
	}
	return class(rs...), nil
}

// classAtom parses one member of a class; isSingle says it is one rune
// (so it may start or end a range).
func (p *parser) classAtom() (rs []runeRange, isSingle bool, err error) {
	if p.s[p.i] == '\\' {
		rs, err = p.escape(true)
		if err != nil {
			return nil, false, err
		}
		return rs, len(rs) == 1 && rs[0].lo == rs[0].hi, nil
	}
	r, size := utf8.DecodeRuneInString(p.s[p.i:])
	p.i += size
	return []runeRange{{r, r}}, true, nil
}

// normalize sorts and merges ranges.
func normalize(rs []runeRange) []runeRange {
	out := append([]runeRange(nil), rs...)
	for i := 1; i < len(out); i++ { // insertion sort: classes are short
		for j := i; j > 0 && out[j].lo < out[j-1].lo; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi+1 {
			if r.hi > merged[n-1].hi {
				merged[n-1].hi = r.hi
			}
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// negate returns the runes of [0, MaxRune] not in rs.
func negate(rs []runeRange) []runeRange {
	rs = normalize(rs)
	var out []runeRange
	next := rune(0)
	for _, r := range rs {
		if r.lo > next {
			out = append(out, runeRange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, runeRange{next, utf8.MaxRune})
	}
	return out
}
