package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// SchemaOptions tune the JSON the automaton accepts.
type SchemaOptions struct {
	// AnyDepth bounds the nesting of values left free by the schema (`{}`,
	// `true`, or "any JSON"); 0 means 2.
	AnyDepth int
}

// CompileSchema compiles a JSON Schema of the supported subset (docs/api.md,
// "Structured outputs core") to a DFA over the bytes of compact JSON (no
// insignificant whitespace). Object properties are produced in the order
// the schema lists them; no additional properties are produced. A keyword
// outside the subset is ErrUnsupported, never ignored.
func CompileSchema(schema []byte, opts SchemaOptions) (*DFA, error) {
	root, err := decodeOrdered(schema)
	if err != nil {
		return nil, err
	}
	c := &schemaCompiler{root: root, opts: opts}
	if c.opts.AnyDepth <= 0 {
		c.opts.AnyDepth = 2
	}
	n, err := c.schema(root, "#")
	if err != nil {
		return nil, err
	}
	return compileNode(n)
}

// CompileAnyJSON compiles "any JSON value" with arrays and objects nested
// at most depth levels deep (compact JSON, as CompileSchema).
func CompileAnyJSON(depth int) (*DFA, error) {
	return compileNode(anyJSON(depth))
}

// object is a JSON object with its keys in document order.
type object struct {
	keys []string
	vals map[string]any
}

// decodeOrdered decodes JSON keeping object key order; numbers stay
// json.Number so that their text is kept.
func decodeOrdered(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, fmt.Errorf("%w: schema: %v", ErrSyntax, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: schema: trailing data", ErrSyntax)
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; dup {
				return nil, fmt.Errorf("duplicate key %q", k)
			}
			o.keys = append(o.keys, k)
			o.vals[k] = v
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		var a []any
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return tok, nil
}

// encodeCompact writes v as compact JSON, keys in document order.
func encodeCompact(sb *strings.Builder, v any) {
	switch v := v.(type) {
	case *object:
		sb.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			encodeCompact(sb, k)
			sb.WriteByte(':')
			encodeCompact(sb, v.vals[k])
		}
		sb.WriteByte('}')
	case []any:
		sb.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				sb.WriteByte(',')
			}
			encodeCompact(sb, x)
		}
		sb.WriteByte(']')
	case json.Number:
		sb.WriteString(v.String())
	default: // string, bool, nil
		b, _ := json.Marshal(v)
		sb.Write(b)
	}
}

// Keywords that only annotate: they never change which values are valid.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

type schemaCompiler struct {
	root any
	opts SchemaOptions
	refs []string // $ref expansion stack, to refuse recursion
}

func unsupported(path, format string, args ...any) error {
	return fmt.Errorf("%w: schema %s: %s", ErrUnsupported, path, fmt.Sprintf(format, args...))
}

// schema compiles one (sub)schema at JSON pointer path.
func (c *schemaCompiler) schema(s any, path string) (*node, error) {
	switch s := s.(type) {
	case bool:
		if !s {
			return nil, unsupported(path, "the false schema matches nothing")
		}
		return anyJSON(c.opts.AnyDepth), nil
	case *object:
		return c.objectSchema(s, path)
	}
	return nil, fmt.Errorf("%w: schema %s: not an object or boolean", ErrSyntax, path)
}

func (c *schemaCompiler) objectSchema(s *object, path string) (*node, error) {
	var handled = map[string]bool{}
	for k := range annotations {
		handled[k] = true
	}
	use := func(k string) (any, bool) {
		handled[k] = true
		v, ok := s.vals[k]
		return v, ok
	}
	use("$defs")
	use("definitions")
	var n *node
	var err error
	if ref, ok := use("$ref"); ok {
		n, err = c.ref(ref, path)
	} else if e, ok := use("enum"); ok {
		n, err = enumNode(e, path, use)
	} else if v, ok := use("const"); ok {
		n, err = enumNode([]any{v}, path, use)
	} else if a, ok := use("anyOf"); ok {
		n, err = c.anyOf(a, path)
	} else if t, ok := use("type"); ok {
		n, err = c.typed(s, t, path, use)
	} else {
		// No type: only annotations may remain, and the value is free.
		n = anyJSON(c.opts.AnyDepth)
	}
	if err != nil {
		return nil, err
	}
	for _, k := range s.keys {
		if !handled[k] {
			return nil, unsupported(path, "keyword %q (alone or with the keywords beside it)", k)
		}
	}
	return n, nil
}

func (c *schemaCompiler) ref(v any, path string) (*node, error) {
	ref, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%w: schema %s: $ref is not a string", ErrSyntax, path)
	}
	var name string
	var defs string
	switch {
	case strings.HasPrefix(ref, "#/$defs/"):
		defs, name = "$defs", ref[len("#/$defs/"):]
	case strings.HasPrefix(ref, "#/definitions/"):
		defs, name = "definitions", ref[len("#/definitions/"):]
	default:
		return nil, unsupported(path, "$ref %q (only #/$defs/NAME and #/definitions/NAME)", ref)
	}
	if strings.ContainsAny(name, "/~%") {
		return nil, unsupported(path, "$ref %q (escaped or nested names)", ref)
	}
	if slices.Contains(c.refs, ref) {
		return nil, unsupported(path, "recursive $ref %q (needs a grammar, not a regular automaton)", ref)
	}
	root, _ := c.root.(*object)
	var table *object
	if root != nil {
		table, _ = root.vals[defs].(*object)
	}
	if table == nil || table.vals[name] == nil {
		return nil, fmt.Errorf("%w: schema %s: $ref %q not found", ErrSyntax, path, ref)
	}
	c.refs = append(c.refs, ref)
	defer func() { c.refs = c.refs[:len(c.refs)-1] }()
	return c.schema(table.vals[name], ref)
}

// enumNode is one of the values; a "type" beside it must hold for each.
func enumNode(v any, path string, use func(string) (any, bool)) (*node, error) {
	vals, ok := v.([]any)
	if !ok || len(vals) == 0 {
		return nil, fmt.Errorf("%w: schema %s: enum is not a non-empty array", ErrSyntax, path)
	}
	if t, ok := use("type"); ok {
		name, _ := t.(string)
		for _, x := range vals {
			if k := jsonKind(x); k != name && (name != "number" || k != "integer") {
				return nil, unsupported(path, "enum value of kind %s beside type %v", k, t)
			}
		}
	}
	alts := make([]*node, len(vals))
	for i, x := range vals {
		var sb strings.Builder
		encodeCompact(&sb, x)
		alts[i] = literal(sb.String())
	}
	return alt(alts...), nil
}

func (c *schemaCompiler) anyOf(v any, path string) (*node, error) {
	subs, ok := v.([]any)
	if !ok || len(subs) == 0 {
		return nil, fmt.Errorf("%w: schema %s: anyOf is not a non-empty array", ErrSyntax, path)
	}
	alts := make([]*node, len(subs))
	for i, s := range subs {
		n, err := c.schema(s, path+"/anyOf/"+strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		alts[i] = n
	}
	return alt(alts...), nil
}

func (c *schemaCompiler) typed(s *object, t any, path string, use func(string) (any, bool)) (*node, error) {
	var types []string
	switch t := t.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			name, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("%w: schema %s: type list holds a non-string", ErrSyntax, path)
			}
			types = append(types, name)
		}
	default:
		return nil, fmt.Errorf("%w: schema %s: type is not a string or list", ErrSyntax, path)
	}
	var alts []*node
	for _, name := range types {
		var n *node
		var err error
		switch name {
		case "null":
			n = literal("null")
		case "boolean":
			n = alt(literal("true"), literal("false"))
		case "integer":
			n, err = integerSchema(path, use)
		case "number":
			n, err = numberSchema(path, use)
		case "string":
			n, err = stringSchema(path, use)
		case "array":
			n, err = c.arraySchema(path, use)
		case "object":
			n, err = c.objectProps(path, use)
		default:
			err = fmt.Errorf("%w: schema %s: unknown type %q", ErrSyntax, path, name)
		}
		if err != nil {
			return nil, err
		}
		alts = append(alts, n)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return alt(alts...), nil
}

// count reads a non-negative integer keyword; ok is false when absent.
func count(path, key string, use func(string) (any, bool)) (n int, ok bool, err error) {
	num, present, err := numberKeyword(path, key, use)
	if !present || err != nil {
		return 0, false, err
	}
	i, err := strconv.Atoi(num.String())
	if err != nil || i < 0 {
		return 0, false, fmt.Errorf("%w: schema %s: %s is not a non-negative integer", ErrSyntax, path, key)
	}
	if i > maxRepeat {
		return 0, false, unsupported(path, "%s %d above %d", key, i, maxRepeat)
	}
	return i, true, nil
}

func integerNode() *node {
	return concat(repeat(literal("-"), 0, 1),
		alt(literal("0"), concat(class(runeRange{'1', '9'}), repeat(class(digitRanges...), 0, -1))))
}

func numberNode() *node {
	digits := repeat(class(digitRanges...), 1, -1)
	return concat(integerNode(),
		repeat(concat(literal("."), digits), 0, 1),
		repeat(concat(class(runeRange{'E', 'E'}, runeRange{'e', 'e'}), repeat(class(runeRange{'+', '+'}, runeRange{'-', '-'}), 0, 1), digits), 0, 1))
}

// stringChar is one JSON string character, counted as one code point:
// an unescaped rune other than '"', '\\' and controls, a short escape, or
// a \u escape of a code point that is not a surrogate.
func stringChar() *node {
	hex := class(runeRange{'0', '9'}, runeRange{'A', 'F'}, runeRange{'a', 'f'})
	nonD := class(runeRange{'0', '9'}, runeRange{'A', 'C'}, runeRange{'E', 'F'}, runeRange{'a', 'c'}, runeRange{'e', 'f'})
	return alt(
		class(runeRange{0x20, '"' - 1}, runeRange{'"' + 1, '\\' - 1}, runeRange{'\\' + 1, 0x10FFFF}),
		concat(literal(`\`), class(runeRange{'"', '"'}, runeRange{'/', '/'}, runeRange{'\\', '\\'}, runeRange{'b', 'b'}, runeRange{'f', 'f'}, runeRange{'n', 'n'}, runeRange{'r', 'r'}, runeRange{'t', 't'})),
		concat(literal(`\u`), alt(concat(nonD, hex, hex, hex), concat(class(runeRange{'D', 'D'}, runeRange{'d', 'd'}), class(runeRange{'0', '7'}), hex, hex))),
	)
}

func stringSchema(path string, use func(string) (any, bool)) (*node, error) {
	lo, _, err := count(path, "minLength", use)
	if err != nil {
		return nil, err
	}
	hi, hasHi, err := count(path, "maxLength", use)
	if err != nil {
		return nil, err
	}
	if !hasHi {
		hi = -1
	} else if hi < lo {
		return nil, unsupported(path, "maxLength below minLength matches nothing")
	}
	if f, ok := use("format"); ok {
		name, isStr := f.(string)
		if !isStr {
			return nil, fmt.Errorf("%w: schema %s: format is not a string", ErrSyntax, path)
		}
		re, known := formatPatterns[name]
		if !known {
			return nil, unsupported(path, "format %q (supported: %s)", name, strings.Join(formatNames(), ", "))
		}
		if _, hasPattern := use("pattern"); hasPattern || lo > 0 || hasHi {
			return nil, unsupported(path, "format together with pattern, minLength or maxLength")
		}
		n, err := parseRegex(re)
		if err != nil {
			return nil, fmt.Errorf("schema %s: format %q: %w", path, name, err)
		}
		return concat(literal(`"`), jsonEncoded(n), literal(`"`)), nil
	}
	if p, ok := use("pattern"); ok {
		pat, isStr := p.(string)
		if !isStr {
			return nil, fmt.Errorf("%w: schema %s: pattern is not a string", ErrSyntax, path)
		}
		if lo > 0 || hasHi {
			return nil, unsupported(path, "pattern together with minLength/maxLength")
		}
		n, err := patternNode(pat)
		if err != nil {
			return nil, fmt.Errorf("schema %s: pattern: %w", path, err)
		}
		return concat(literal(`"`), n, literal(`"`)), nil
	}
	return concat(literal(`"`), repeat(stringChar(), lo, hi), literal(`"`)), nil
}

// patternNode is the JSON-encoded strings a JSON Schema pattern accepts.
// The pattern searches (it may match anywhere) unless anchored by a
// leading ^ and a trailing $; anchors elsewhere are refused. Wide classes
// (., \S, [^...]) produce no ECMA-262 whitespace or line terminators, so
// that the output holds under both ECMA-262 and RE2 readings of the
// pattern.
func patternNode(pat string) (*node, error) {
	anyChars := repeat(stringChar(), 0, -1)
	head, tail := anyChars, anyChars
	if strings.HasPrefix(pat, "^") {
		pat, head = pat[1:], empty()
	}
	if strings.HasSuffix(pat, "$") && (len(pat)-len(strings.TrimRight(pat[:len(pat)-1], `\`))-1)%2 == 0 {
		pat, tail = pat[:len(pat)-1], empty()
	}
	n, err := parseRegex(pat)
	if err != nil {
		return nil, err
	}
	return concat(head, jsonEncoded(n), tail), nil
}

// ecmaSpaces are ECMA-262's whitespace and line terminators beyond
// ASCII's \t \n \v \f and space (plus \r, a line terminator there).
var ecmaSpaces = normalize([]runeRange{{'\r', '\r'}, {0x85, 0x85}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}})

// jsonEncoded rewrites every class of n to the JSON string text of its
// runes: raw where JSON allows, escaped for '"', '\\' and controls.
func jsonEncoded(n *node) *node {
	switch n.op {
	case opClass:
		rs := n.ranges
		size := 0
		for _, r := range rs {
			size += int(r.hi-r.lo) + 1
		}
		if size > 1000 {
			rs = intersect(rs, negate(ecmaSpaces))
		}
		raw := intersect(rs, negate([]runeRange{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}))
		var alts []*node
		if len(raw) > 0 {
			alts = append(alts, class(raw...))
		}
		for _, r := range intersect(rs, []runeRange{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}) {
			for c := r.lo; c <= r.hi; c++ {
				b, _ := json.Marshal(string(c))
				alts = append(alts, literal(string(b[1:len(b)-1])))
			}
		}
		if len(alts) == 0 {
			return class() // matches nothing
		}
		return alt(alts...)
	case opEmpty:
		return n
	}
	subs := make([]*node, len(n.subs))
	for i, sub := range n.subs {
		subs[i] = jsonEncoded(sub)
	}
	return &node{op: n.op, subs: subs, min: n.min, max: n.max}
}

// intersect is the runes in both normalized range lists.
func intersect(a, b []runeRange) []runeRange {
	a, b = normalize(a), normalize(b)
	var out []runeRange
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].lo, b[j].lo), min(a[i].hi, b[j].hi)
		if lo <= hi {
			out = append(out, runeRange{lo, hi})
		}
		if a[i].hi < b[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}

func (c *schemaCompiler) arraySchema(path string, use func(string) (any, bool)) (*node, error) {
	lo, _, err := count(path, "minItems", use)
	if err != nil {
		return nil, err
	}
	hi, hasHi, err := count(path, "maxItems", use)
	if err != nil {
		return nil, err
	}
	if !hasHi {
		hi = -1
	} else if hi < lo {
		return nil, unsupported(path, "maxItems below minItems matches nothing")
	}
	item := anyJSON(c.opts.AnyDepth)
	if it, ok := use("items"); ok {
		if item, err = c.schema(it, path+"/items"); err != nil {
			return nil, err
		}
	}
	return listNode("[", "]", item, lo, hi), nil
}

// listNode is open, lo..hi (hi < 0: unbounded) items separated by commas,
// close.
func listNode(open, close string, item *node, lo, hi int) *node {
	if hi == 0 {
		return literal(open + close)
	}
	var body *node
	if lo <= 1 && hi < 0 {
		body = &node{op: opSepList, subs: []*node{item, literal(",")}}
	} else {
		restHi := -1
		if hi > 0 {
			restHi = hi - 1
		}
		body = concat(item, repeat(concat(literal(","), item), max(lo-1, 0), restHi))
	}
	if lo == 0 {
		body = repeat(body, 0, 1)
	}
	return concat(literal(open), body, literal(close))
}

func (c *schemaCompiler) objectProps(path string, use func(string) (any, bool)) (*node, error) {
	use("additionalProperties") // none are produced, so any value is honoured
	props := &object{vals: map[string]any{}}
	if p, ok := use("properties"); ok {
		if props, ok = p.(*object); !ok {
			return nil, fmt.Errorf("%w: schema %s: properties is not an object", ErrSyntax, path)
		}
	}
	required := map[string]bool{}
	if r, ok := use("required"); ok {
		list, ok := r.([]any)
		if !ok {
			return nil, fmt.Errorf("%w: schema %s: required is not an array", ErrSyntax, path)
		}
		for _, x := range list {
			name, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("%w: schema %s: required holds a non-string", ErrSyntax, path)
			}
			if _, ok := props.vals[name]; !ok {
				return nil, unsupported(path, "required property %q has no schema in properties", name)
			}
			required[name] = true
		}
	}
	members := make([]*node, len(props.keys))
	for i, k := range props.keys {
		v, err := c.schema(props.vals[k], path+"/properties/"+k)
		if err != nil {
			return nil, err
		}
		var sb strings.Builder
		encodeCompact(&sb, k)
		members[i] = concat(literal(sb.String()+":"), v)
	}
	// Members in schema order, commas between those present. Before the
	// first member that is produced nothing was written: first[i] is the
	// text from member i on when no member came before it, rest[i] when
	// one did.
	n := len(members)
	rest := make([]*node, n+1)
	rest[n] = empty()
	for i := n - 1; i >= 0; i-- {
		withComma := concat(literal(","), members[i])
		if !required[props.keys[i]] {
			withComma = repeat(withComma, 0, 1)
		}
		rest[i] = concat(withComma, rest[i+1])
	}
	var firsts []*node // alternatives for which member comes first
	for i := 0; i < n; i++ {
		firsts = append(firsts, concat(members[i], rest[i+1]))
		if required[props.keys[i]] {
			break
		}
	}
	allOptional := true
	for _, k := range props.keys {
		allOptional = allOptional && !required[k]
	}
	if allOptional {
		firsts = append(firsts, empty())
	}
	if len(firsts) == 0 {
		return literal("{}"), nil
	}
	return concat(literal("{"), alt(firsts...), literal("}")), nil
}

// anyJSON is any JSON value, arrays and objects nested at most depth deep.
func anyJSON(depth int) *node {
	str := concat(literal(`"`), repeat(stringChar(), 0, -1), literal(`"`))
	alts := []*node{literal("null"), literal("true"), literal("false"), numberNode(), str}
	if depth > 0 {
		inner := anyJSON(depth - 1)
		alts = append(alts,
			listNode("[", "]", inner, 0, -1),
			listNode("{", "}", concat(str, literal(":"), inner), 0, -1))
	}
	return alt(alts...)
}

// jsonKind names the JSON Schema type of a decoded value.
func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case *object:
		return "object"
	case json.Number:
		if _, err := strconv.ParseInt(v.String(), 10, 64); err == nil {
			return "integer"
		}
		return "number"
	}
	return "unknown"
}

// numberKeyword reads a numeric keyword; ok is false when it is absent.
func numberKeyword(path, key string, use func(string) (any, bool)) (num json.Number, ok bool, err error) {
	v, present := use(key)
	if !present {
		return "", false, nil
	}
	num, isNum := v.(json.Number)
	if !isNum {
		return "", false, fmt.Errorf("%w: schema %s: %s is not a number", ErrSyntax, path, key)
	}
	return num, true, nil
}

// integerSchema is an integer with optional inclusive or exclusive bounds
// (integers within int64 when given).
func integerSchema(path string, use func(string) (any, bool)) (*node, error) {
	bound := func(key string) (int64, bool, error) {
		num, ok, err := numberKeyword(path, key, use)
		if !ok || err != nil {
			return 0, false, err
		}
		i, err := strconv.ParseInt(num.String(), 10, 64)
		if err != nil || i <= math.MinInt64+1 || i >= math.MaxInt64-1 {
			return 0, false, unsupported(path, "%s %s (only integers within int64)", key, num)
		}
		return i, true, nil
	}
	lo, hasLo, err := bound("minimum")
	if err != nil {
		return nil, err
	}
	hi, hasHi, err := bound("maximum")
	if err != nil {
		return nil, err
	}
	if x, ok, err := bound("exclusiveMinimum"); err != nil {
		return nil, err
	} else if ok && (!hasLo || x+1 > lo) {
		lo, hasLo = x+1, true
	}
	if x, ok, err := bound("exclusiveMaximum"); err != nil {
		return nil, err
	} else if ok && (!hasHi || x-1 < hi) {
		hi, hasHi = x-1, true
	}
	if hasLo && hasHi && hi < lo {
		return nil, unsupported(path, "integer bounds match nothing")
	}
	return intRange(lo, hasLo, hi, hasHi), nil
}

// intRange is the JSON integers in [lo, hi]; a missing bound is open.
func intRange(lo int64, hasLo bool, hi int64, hasHi bool) *node {
	if !hasLo && !hasHi {
		return integerNode()
	}
	var alts []*node
	// Non-negative part: [max(lo,0), hi].
	if !hasHi || hi >= 0 {
		alts = append(alts, naturalRange(max(lo, 0), hi, hasHi))
	}
	// Negative part: -x for x in [max(1,-hi), -lo].
	if !hasLo || lo < 0 {
		from := int64(1)
		if hasHi && -hi > 1 {
			from = -hi
		}
		alts = append(alts, concat(literal("-"), naturalRange(from, -lo, hasLo)))
	}
	return alt(alts...)
}

// maxExactBound: number bounds must be integers-exact as float64.
const maxExactBound = 1 << 53

// numberSchema is a JSON number with optional bounds (minimum, maximum,
// exclusiveMinimum, exclusiveMaximum; any finite values within ±2^53).
// Bounded, it produces a sound subset of the numbers in range, without
// exponents: the integers in range, and "n.ddd" for every integer part n
// whose whole unit interval lies in range ([n, n+1) for n >= 0, and
// (-(k+1), -k] for "-k.ddd"). A range holding neither (narrower than a
// unit and no integer) is refused.
func numberSchema(path string, use func(string) (any, bool)) (*node, error) {
	bound := func(key string) (float64, bool, error) {
		num, ok, err := numberKeyword(path, key, use)
		if !ok || err != nil {
			return 0, false, err
		}
		f, err := strconv.ParseFloat(num.String(), 64)
		if err != nil || math.Abs(f) >= maxExactBound {
			return 0, false, unsupported(path, "%s %s (only numbers within ±2^53)", key, num)
		}
		return f, true, nil
	}
	type side struct {
		v         float64
		has, excl bool
	}
	var lo, hi side
	for _, b := range []struct {
		key  string
		dst  *side
		excl bool
	}{{"minimum", &lo, false}, {"exclusiveMinimum", &lo, true}, {"maximum", &hi, false}, {"exclusiveMaximum", &hi, true}} {
		v, ok, err := bound(b.key)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		tighter := !b.dst.has || (b.dst == &lo && (v > lo.v || (v == lo.v && b.excl))) ||
			(b.dst == &hi && (v < hi.v || (v == hi.v && b.excl)))
		if tighter {
			*b.dst = side{v, true, b.excl}
		}
	}
	if !lo.has && !hi.has {
		return numberNode(), nil
	}
	// The integers in range.
	var iLo, iHi int64
	if lo.has {
		iLo = int64(math.Ceil(lo.v))
		if lo.excl && float64(iLo) == lo.v {
			iLo++
		}
	}
	if hi.has {
		iHi = int64(math.Floor(hi.v))
		if hi.excl && float64(iHi) == hi.v {
			iHi--
		}
	}
	var alts []*node
	if !lo.has || !hi.has || iLo <= iHi {
		alts = append(alts, intRange(iLo, lo.has, iHi, hi.has))
	}
	frac := concat(literal("."), repeat(class(digitRanges...), 1, -1))
	// "n.ddd", n >= 0, value in [n, n+1): n in range as an integer (so
	// n >= lo, or n > lo when exclusive) and n+1 <= hi.
	pLo, pHi := max(iLo, 0), int64(math.Floor(hi.v))-1
	if !lo.has {
		pLo = 0
	}
	if !hi.has || pHi >= pLo {
		alts = append(alts, concat(naturalRange(pLo, pHi, hi.has), frac))
	}
	// "-k.ddd", k >= 0, value in (-(k+1), -k]: -(k+1) >= lo and -k <= hi
	// (-k < hi when exclusive).
	kLo, kHi := int64(0), int64(math.Floor(-lo.v))-1
	if hi.has {
		kLo = int64(math.Ceil(-hi.v))
		if hi.excl && float64(kLo) == -hi.v {
			kLo++
		}
		kLo = max(kLo, 0)
	}
	if !lo.has || kHi >= kLo {
		alts = append(alts, concat(literal("-"), naturalRange(kLo, kHi, lo.has), frac))
	}
	if len(alts) == 0 {
		return nil, unsupported(path, "number bounds [%v, %v] hold no integer and no whole unit interval", lo.v, hi.v)
	}
	return alt(alts...), nil
}

// naturalRange is the decimal numbers (no leading zeros) in [a, b], or
// [a, infinity) when bounded is false; 0 <= a.
func naturalRange(a, b int64, bounded bool) *node {
	if !bounded {
		k := len(strconv.FormatInt(a, 10))
		longer := concat(class(runeRange{'1', '9'}), repeat(class(digitRanges...), k, -1))
		top, _ := strconv.ParseInt(strings.Repeat("9", k), 10, 64)
		return alt(naturalRange(a, top, true), longer)
	}
	var alts []*node
	for d := len(strconv.FormatInt(a, 10)); d <= len(strconv.FormatInt(b, 10)); d++ {
		first, _ := strconv.ParseInt("1"+strings.Repeat("0", d-1), 10, 64)
		last, _ := strconv.ParseInt(strings.Repeat("9", d), 10, 64)
		if d == 1 {
			first = 0
		}
		x, y := max(a, first), min(b, last)
		if x <= y {
			alts = append(alts, sameLength(strconv.FormatInt(x, 10), strconv.FormatInt(y, 10)))
		}
	}
	return alt(alts...)
}

// sameLength is the digit strings between lo and hi, of equal length.
func sameLength(lo, hi string) *node {
	if lo == "" {
		return empty()
	}
	digit := func(a, b byte) *node { return class(runeRange{rune(a), rune(b)}) }
	if lo[0] == hi[0] {
		return concat(digit(lo[0], lo[0]), sameLength(lo[1:], hi[1:]))
	}
	n := len(lo) - 1
	alts := []*node{concat(digit(lo[0], lo[0]), sameLength(lo[1:], strings.Repeat("9", n)))}
	if lo[0]+1 <= hi[0]-1 {
		alts = append(alts, concat(digit(lo[0]+1, hi[0]-1), repeat(class(digitRanges...), n, n)))
	}
	alts = append(alts, concat(digit(hi[0], hi[0]), sameLength(strings.Repeat("0", n), hi[1:])))
	return alt(alts...)
}

// formatPatterns produce, for each supported string format, a sound subset
// of the strings the format allows (RFC 3339 dates and times with days up
// to 28 so every month has them, lower-case RFC 4122 UUIDs, plain ASCII
// e-mail addresses and host names, dotted-quad IPv4, http(s) URIs).
var formatPatterns = map[string]string{
	"date":      `\d{4}-(0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8])`,
	"time":      `([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)`,
	"date-time": `\d{4}-(0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)`,
	"uuid":      `[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`,
	"email":     `[a-z0-9]{1,20}([._+-][a-z0-9]{1,20}){0,2}@[a-z0-9]{1,20}(-[a-z0-9]{1,20})?(\.[a-z0-9]{1,20}){0,2}\.[a-z]{2,6}`,
	"hostname":  `[a-z0-9]{1,20}(-[a-z0-9]{1,20})?(\.[a-z0-9]{1,20}(-[a-z0-9]{1,20})?){0,3}`,
	"ipv4":      `(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}`,
	"uri":       `https?://[a-z0-9]{1,20}(\.[a-z0-9]{1,20}){0,3}(/[A-Za-z0-9._~-]{0,20}){0,4}`,
}

func formatNames() []string {
	names := make([]string, 0, len(formatPatterns))
	for n := range formatPatterns {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
