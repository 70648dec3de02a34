package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// GBNF parsing (docs/api.md, "Structured outputs core"): the source is
// read into rules whose alternatives are sequences of byte-set terminals
// and rule references. Literals become one terminal per UTF-8 byte; a
// character class becomes a rule whose alternatives are the byte
// sequences of its runes' UTF-8 encodings; groups and repetitions become
// synthetic rules (x* is R ::= x R | empty, so a repetition never grows
// the recognizer's stacks).

// byteSet is a set of bytes: bit b of word b/64.
type byteSet [4]uint64

func (s *byteSet) add(lo, hi byte) {
	for b := int(lo); b <= int(hi); b++ {
		s[b>>6] |= 1 << (uint(b) & 63)
	}
}

func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }

// gsym is one symbol of an alternative: a terminal byte set (ref < 0) or
// a reference to rule ref.
type gsym struct {
	set byteSet
	ref int32
}

func term(s byteSet) gsym { return gsym{set: s, ref: -1} }
func ref(r int32) gsym    { return gsym{ref: r} }

// grule is one rule: a user rule (name as written) or a synthetic one.
type grule struct {
	name    string
	user    bool
	defined bool
	at      int // offset of the definition, else of the first use
	alts    [][]gsym
}

// Limits on grammar size: a grammar past them is ErrTooLarge.
const (
	maxGBNFSource  = 1 << 20 // bytes of source
	maxGBNFSymbols = 1 << 20 // symbols in all alternatives
	maxGBNFRepeat  = 1000    // bound of {m,n}
)

type gbnfParser struct {
	src    string
	i      int
	rules  []*grule
	byName map[string]int32
	nsyms  int
}

// errAt is a syntax error at offset i, with its line and column.
func (p *gbnfParser) errAt(i int, format string, args ...any) error {
	line := 1 + strings.Count(p.src[:i], "\n")
	col := 1 + utf8.RuneCountInString(p.src[strings.LastIndexByte(p.src[:i], '\n')+1:i])
	return fmt.Errorf("%w: gbnf line %d column %d: %s", ErrSyntax, line, col, fmt.Sprintf(format, args...))
}

// parseGBNF reads the whole source into rules; rule 0 is root.
func parseGBNF(src string) ([]*grule, error) {
	if len(src) > maxGBNFSource {
		return nil, fmt.Errorf("%w: gbnf source over %d bytes", ErrTooLarge, maxGBNFSource)
	}
	if !utf8.ValidString(src) {
		return nil, fmt.Errorf("%w: gbnf source is not UTF-8", ErrSyntax)
	}
	p := &gbnfParser{src: src, byName: map[string]int32{}}
	p.ruleID("root", 0)
	p.skipSpace()
	for p.i < len(p.src) {
		start := p.i
		name := p.name()
		if name == "" {
			return nil, p.errAt(p.i, "rule name expected")
		}
		p.skipSpace()
		if !strings.HasPrefix(p.src[p.i:], "::=") {
			return nil, p.errAt(p.i, "::= expected after rule name %q", name)
		}
		p.i += 3
		id := p.ruleID(name, start)
		r := p.rules[id]
		if r.defined {
			return nil, p.errAt(start, "rule %q defined twice", name)
		}
		r.defined, r.at = true, start
		alts, err := p.alternates(name)
		if err != nil {
			return nil, err
		}
		r.alts = alts
		if p.i < len(p.src) {
			if c := p.src[p.i]; c == ')' || c == '|' {
				return nil, p.errAt(p.i, "unexpected %q", c)
			}
		}
	}
	for _, r := range p.rules {
		if r.user && !r.defined {
			if r.name == "root" {
				return nil, fmt.Errorf("%w: gbnf grammar has no root rule", ErrUnsupported)
			}
			line := 1 + strings.Count(p.src[:r.at], "\n")
			return nil, fmt.Errorf("%w: gbnf rule %q (used on line %d) is not defined", ErrUnsupported, r.name, line)
		}
	}
	if p.nsyms > maxGBNFSymbols {
		return nil, fmt.Errorf("%w: gbnf grammar over %d symbols", ErrTooLarge, maxGBNFSymbols)
	}
	return p.rules, nil
}

func (p *gbnfParser) ruleID(name string, at int) int32 {
	if id, ok := p.byName[name]; ok {
		return id
	}
	id := int32(len(p.rules))
	p.byName[name] = id
	p.rules = append(p.rules, &grule{name: name, user: true, at: at})
	return id
}

// synth adds a synthetic rule named after the user rule it serves.
func (p *gbnfParser) synth(owner string, alts [][]gsym) int32 {
	for _, a := range alts {
		p.nsyms += len(a) + 1
	}
	id := int32(len(p.rules))
	p.rules = append(p.rules, &grule{name: fmt.Sprintf("%s/%d", owner, id), defined: true, at: p.i, alts: alts})
	return id
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func (p *gbnfParser) name() string {
	start := p.i
	for p.i < len(p.src) && isNameByte(p.src[p.i]) {
		p.i++
	}
	return p.src[start:p.i]
}

// skipSpace skips blanks, newlines and # comments.
func (p *gbnfParser) skipSpace() {
	for p.i < len(p.src) {
		switch c := p.src[p.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.i++
		case c == '#':
			for p.i < len(p.src) && p.src[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

// atRuleStart says whether the input continues with `name ::=`: a rule
// body ends where the next rule starts, so rules may span lines.
func (p *gbnfParser) atRuleStart() bool {
	save := p.i
	defer func() { p.i = save }()
	if p.name() == "" {
		return false
	}
	p.skipSpace()
	return strings.HasPrefix(p.src[p.i:], "::=")
}

// alternates parses seq ('|' seq)* up to ')', the next rule or the end.
func (p *gbnfParser) alternates(owner string) ([][]gsym, error) {
	var alts [][]gsym
	for {
		seq, err := p.sequence(owner)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		p.nsyms += len(seq) + 1
		if p.i < len(p.src) && p.src[p.i] == '|' {
			p.i++
			continue
		}
		return alts, nil
	}
}

func (p *gbnfParser) sequence(owner string) ([]gsym, error) {
	var seq []gsym
	last := -1 // start in seq of the last item, for a quantifier
	for {
		p.skipSpace()
		if p.i >= len(p.src) || p.src[p.i] == ')' || p.src[p.i] == '|' || p.atRuleStart() {
			return seq, nil
		}
		start := p.i
		switch c := p.src[p.i]; {
		case c == '"':
			lit, err := p.literal()
			if err != nil {
				return nil, err
			}
			last = len(seq)
			for i := 0; i < len(lit); i++ {
				var s byteSet
				s.add(lit[i], lit[i])
				seq = append(seq, term(s))
			}
		case c == '[':
			rs, err := p.class()
			if err != nil {
				return nil, err
			}
			last = len(seq)
			seq = append(seq, p.runeClass(owner, rs))
		case c == '.':
			p.i++
			last = len(seq)
			seq = append(seq, p.runeClass(owner, []runeRange{{0, utf8.MaxRune}}))
		case c == '(':
			p.i++
			alts, err := p.alternates(owner)
			if err != nil {
				return nil, err
			}
			if p.i >= len(p.src) || p.src[p.i] != ')' {
				return nil, p.errAt(start, "( without )")
			}
			p.i++
			last = len(seq)
			seq = append(seq, ref(p.synth(owner, alts)))
		case isNameByte(c):
			name := p.name()
			last = len(seq)
			seq = append(seq, ref(p.ruleID(name, start)))
		case c == '*' || c == '+' || c == '?' || c == '{':
			if last < 0 {
				return nil, p.errAt(p.i, "%q without an item to repeat", c)
			}
			lo, hi, err := p.quantifier()
			if err != nil {
				return nil, err
			}
			item := append([]gsym(nil), seq[last:]...)
			seq = append(seq[:last], p.repeat(owner, item, lo, hi)...)
			if p.nsyms > maxGBNFSymbols {
				return nil, fmt.Errorf("%w: gbnf grammar over %d symbols", ErrTooLarge, maxGBNFSymbols)
			}
		case c == '<':
			return nil, fmt.Errorf("%w: gbnf token references (<...>) at offset %d", ErrUnsupported, p.i)
		default:
			return nil, p.errAt(p.i, "unexpected %q", c)
		}
	}
}

// quantifier parses * + ? {m} {m,} {m,n}; hi < 0 is unbounded.
func (p *gbnfParser) quantifier() (lo, hi int, err error) {
	start := p.i
	c := p.src[p.i]
	p.i++
	switch c {
	case '*':
		return 0, -1, nil
	case '+':
		return 1, -1, nil
	case '?':
		return 0, 1, nil
	}
	num := func() (int, bool) {
		p.skipSpace()
		s := p.i
		for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
			p.i++
		}
		n, err := strconv.Atoi(p.src[s:p.i])
		p.skipSpace()
		return n, err == nil
	}
	lo, ok := num()
	if !ok {
		return 0, 0, p.errAt(start, "repetition count expected after {")
	}
	hi = lo
	if p.i < len(p.src) && p.src[p.i] == ',' {
		p.i++
		p.skipSpace()
		hi = -1
		if p.i < len(p.src) && p.src[p.i] != '}' {
			if hi, ok = num(); !ok {
				return 0, 0, p.errAt(start, "bad repetition bound")
			}
		}
	}
	if p.i >= len(p.src) || p.src[p.i] != '}' {
		return 0, 0, p.errAt(start, "} expected")
	}
	p.i++
	if lo > maxGBNFRepeat || hi > maxGBNFRepeat || (hi >= 0 && hi < lo) {
		return 0, 0, p.errAt(start, "repetition {%d,%d} out of range (counts up to %d)", lo, hi, maxGBNFRepeat)
	}
	return lo, hi, nil
}

// repeat expands item{lo,hi} into symbols and synthetic rules.
func (p *gbnfParser) repeat(owner string, item []gsym, lo, hi int) []gsym {
	if len(item) != 1 && (lo > 1 || hi != 1) {
		item = []gsym{ref(p.synth(owner, [][]gsym{item}))}
	}
	var out []gsym
	for i := 0; i < lo; i++ {
		out = append(out, item...)
	}
	p.nsyms += len(out)
	switch {
	case hi < 0: // star: R ::= item R | empty
		id := p.synth(owner, nil)
		p.rules[id].alts = [][]gsym{append(append([]gsym(nil), item...), ref(id)), nil}
		p.nsyms += len(item) + 2
		out = append(out, ref(id))
	case hi > lo: // nested optionals: O1 ::= item | empty; Ok ::= item O(k-1) | empty
		prev := int32(-1)
		for k := 0; k < hi-lo; k++ {
			a := append([]gsym(nil), item...)
			if prev >= 0 {
				a = append(a, ref(prev))
			}
			prev = p.synth(owner, [][]gsym{a, nil})
		}
		out = append(out, ref(prev))
	}
	return out
}

// literal parses "..." and returns its UTF-8 bytes.
func (p *gbnfParser) literal() (string, error) {
	start := p.i
	p.i++
	var b strings.Builder
	for {
		if p.i >= len(p.src) {
			return "", p.errAt(start, "unterminated string")
		}
		switch p.src[p.i] {
		case '"':
			p.i++
			return b.String(), nil
		case '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
		default:
			r, size := utf8.DecodeRuneInString(p.src[p.i:])
			p.i += size
			b.WriteRune(r)
		}
	}
}

// escape parses \n \r \t \\ \" \[ \] \- \/ \xHH \uHHHH \UHHHHHHHH.
func (p *gbnfParser) escape() (rune, error) {
	start := p.i
	p.i++
	if p.i >= len(p.src) {
		return 0, p.errAt(start, "trailing backslash")
	}
	c := p.src[p.i]
	p.i++
	digits := 0
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-', '/', '^':
		return rune(c), nil
	case 'x':
		digits = 2
	case 'u':
		digits = 4
	case 'U':
		digits = 8
	default:
		return 0, p.errAt(start, "unknown escape \\%c", c)
	}
	if p.i+digits > len(p.src) {
		return 0, p.errAt(start, "\\%c needs %d hex digits", c, digits)
	}
	v, err := strconv.ParseUint(p.src[p.i:p.i+digits], 16, 32)
	if err != nil || v > utf8.MaxRune || (v >= 0xD800 && v <= 0xDFFF) {
		return 0, p.errAt(start, "bad \\%c escape %q", c, p.src[p.i:p.i+digits])
	}
	p.i += digits
	return rune(v), nil
}

// class parses [...] or [^...] into rune ranges.
func (p *gbnfParser) class() ([]runeRange, error) {
	start := p.i
	p.i++
	neg := p.i < len(p.src) && p.src[p.i] == '^'
	if neg {
		p.i++
	}
	char := func() (rune, error) {
		if p.src[p.i] == '\\' {
			return p.escape()
		}
		r, size := utf8.DecodeRuneInString(p.src[p.i:])
		p.i += size
		return r, nil
	}
	var rs []runeRange
	for {
		if p.i >= len(p.src) {
			return nil, p.errAt(start, "[ without ]")
		}
		if p.src[p.i] == ']' {
			p.i++
			break
		}
		lo, err := char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.i+1 < len(p.src) && p.src[p.i] == '-' && p.src[p.i+1] != ']' {
			p.i++
			if hi, err = char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errAt(start, "class range %q-%q is reversed", lo, hi)
			}
		}
		rs = append(rs, runeRange{lo, hi})
	}
	if neg {
		rs = negate(rs)
	}
	// Surrogates have no UTF-8 encoding.
	var valid []runeRange
	for _, r := range normalize(rs) {
		if r.lo >= 0xD800 && r.hi <= 0xDFFF {
			continue
		}
		valid = append(valid, r)
	}
	if len(valid) == 0 {
		return nil, p.errAt(start, "class matches nothing")
	}
	return valid, nil
}

// runeClass returns a symbol matching one rune of rs: a single terminal
// when every rune is one byte, else a rule whose alternatives are the
// UTF-8 byte sequences (sequences that differ only in their first byte
// share one alternative).
func (p *gbnfParser) runeClass(owner string, rs []runeRange) gsym {
	type key struct {
		n    int
		tail [3]byteRange
	}
	var order []key
	lead := map[key]*byteSet{}
	for _, seq := range utf8Sequences(rs) {
		k := key{n: len(seq)}
		copy(k.tail[:], seq[1:])
		s, ok := lead[k]
		if !ok {
			s = new(byteSet)
			lead[k] = s
			order = append(order, k)
		}
		s.add(seq[0].lo, seq[0].hi)
	}
	if len(order) == 1 && order[0].n == 1 {
		return term(*lead[order[0]])
	}
	alts := make([][]gsym, 0, len(order))
	for _, k := range order {
		a := []gsym{term(*lead[k])}
		for _, r := range k.tail[:k.n-1] {
			var s byteSet
			s.add(r.lo, r.hi)
			a = append(a, term(s))
		}
		alts = append(alts, a)
	}
	return ref(p.synth(owner, alts))
}
