package grammar

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"unicode/utf8"
)

// Kind names a constraint kind of a Spec (docs/api.md, "Structured
// outputs").
type Kind string

const (
	KindJSONSchema Kind = "json_schema" // Source: a JSON Schema of the supported subset
	KindJSONObject Kind = "json_object" // any JSON object (Source unused)
	KindAnyJSON    Kind = "any_json"    // any JSON value (Source unused)
	KindRegex      Kind = "regex"       // Source: a pattern of the supported subset
	KindChoice     Kind = "choice"      // Choices: exactly one of these strings
	KindGBNF       Kind = "gbnf"        // Source: a GBNF grammar
)

// Spec is one constraint as a request states it: the front door of the
// package. Two equal Specs compile to the same Constraint.
type Spec struct {
	Kind    Kind
	Source  string
	Choices []string
	// Prefix and Suffix are literal text the output has before and after
	// the constrained part (a tool call's markers); not for gbnf.
	Prefix, Suffix string
}

// Limits guard compilation: a spec past them is refused with ErrTooLarge
// before (source) or after (states) compiling it.
type Limits struct {
	// MaxSourceBytes bounds Source plus the choices' bytes; 0: 64 KiB.
	MaxSourceBytes int
	// MaxStates bounds the DFA of the regular kinds; 0: 1<<14. (The
	// automaton builder's own hard bound is 1<<16.)
	MaxStates int
	// AnyDepth bounds the nesting of free JSON (json_object, any_json, `{}`
	// in a schema); 0: 2.
	AnyDepth int
}

func (l Limits) withDefaults() Limits {
	if l.MaxSourceBytes <= 0 {
		l.MaxSourceBytes = 64 << 10
	}
	if l.MaxStates <= 0 {
		l.MaxStates = 1 << 14
	}
	if l.AnyDepth <= 0 {
		l.AnyDepth = 2
	}
	return l
}

// Compile compiles a spec for a vocabulary, uncached.
func Compile(s Spec, v *Vocab, lim Limits) (Constraint, error) {
	lim = lim.withDefaults()
	size := len(s.Source)
	for _, c := range s.Choices {
		size += len(c)
	}
	if size > lim.MaxSourceBytes {
		return nil, fmt.Errorf("%w: the %s constraint is %d bytes, at most %d", ErrTooLarge, s.Kind, size, lim.MaxSourceBytes)
	}
	if s.Kind == KindGBNF {
		if s.Prefix != "" || s.Suffix != "" {
			return nil, fmt.Errorf("%w: a prefix or suffix around a GBNF grammar", ErrUnsupported)
		}
		return CompileGBNF(s.Source, v)
	}
	n, err := specNode(s, lim)
	if err != nil {
		return nil, err
	}
	if s.Prefix != "" || s.Suffix != "" {
		for _, t := range []string{s.Prefix, s.Suffix} {
			if !utf8.ValidString(t) {
				return nil, fmt.Errorf("%w: prefix or suffix is not UTF-8", ErrSyntax)
			}
		}
		n = concat(literal(s.Prefix), n, literal(s.Suffix))
	}
	d, err := compileNode(n)
	if err != nil {
		return nil, err
	}
	if d.NumStates() > lim.MaxStates {
		return nil, fmt.Errorf("%w: the %s constraint needs %d automaton states, at most %d", ErrTooLarge, s.Kind, d.NumStates(), lim.MaxStates)
	}
	return NewIndex(d, v), nil
}

// specNode is the automaton node of a regular kind.
func specNode(s Spec, lim Limits) (*node, error) {
	switch s.Kind {
	case KindJSONSchema:
		root, err := decodeOrdered([]byte(s.Source))
		if err != nil {
			return nil, err
		}
		c := &schemaCompiler{root: root, opts: SchemaOptions{AnyDepth: lim.AnyDepth}}
		return c.schema(root, "#")
	case KindJSONObject:
		return objectJSON(lim.AnyDepth), nil
	case KindAnyJSON:
		return anyJSON(lim.AnyDepth), nil
	case KindRegex:
		return parseRegex(s.Source)
	case KindChoice:
		if len(s.Choices) == 0 {
			return nil, fmt.Errorf("%w: empty choice", ErrSyntax)
		}
		alts := make([]*node, len(s.Choices))
		for i, c := range s.Choices {
			if !utf8.ValidString(c) {
				return nil, fmt.Errorf("%w: choice %d is not UTF-8", ErrSyntax, i)
			}
			alts[i] = literal(c)
		}
		return alt(alts...), nil
	}
	return nil, fmt.Errorf("%w: constraint kind %q", ErrUnsupported, s.Kind)
}

// objectJSON is any JSON object whose values nest at most depth-1 deeper.
func objectJSON(depth int) *node {
	str := concat(literal(`"`), repeat(stringChar(), 0, -1), literal(`"`))
	return listNode("{", "}", concat(str, literal(":"), anyJSON(depth-1)), 0, -1)
}

// key is the identity of a spec in a cache: a hash of its fields, each
// length-prefixed so that no two specs share an encoding.
type key [sha256.Size]byte

func (s Spec) key() key {
	h := sha256.New()
	var n [8]byte
	field := func(b string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write([]byte(b))
	}
	field(string(s.Kind))
	field(s.Source)
	field(s.Prefix)
	field(s.Suffix)
	binary.LittleEndian.PutUint64(n[:], uint64(len(s.Choices)))
	h.Write(n[:])
	for _, c := range s.Choices {
		field(c)
	}
	var k key
	h.Sum(k[:0])
	return k
}

// Cache compiles specs for one vocabulary and keeps the most recently
// used ones (their token masks fill in as requests visit states). It is
// safe for concurrent use; concurrent Gets of one spec compile it once.
// Build one per served model.
type Cache struct {
	v   *Vocab
	lim Limits
	max int

	mu      sync.Mutex // protects entries, lru
	entries map[key]*list.Element
	lru     *list.List // of *entry, most recent first
}

// entry is one spec's compilation; done closes when c and err are set.
type entry struct {
	k    key
	done chan struct{}
	c    Constraint
	err  error
}

// NewCache returns a cache of at most maxEntries compiled specs (0: 64)
// with the default Limits.
func NewCache(v *Vocab, maxEntries int) *Cache { return NewCacheLimits(v, maxEntries, Limits{}) }

// NewCacheLimits is NewCache with compile limits.
func NewCacheLimits(v *Vocab, maxEntries int, lim Limits) *Cache {
	if maxEntries <= 0 {
		maxEntries = 64
	}
	return &Cache{v: v, lim: lim.withDefaults(), max: maxEntries, entries: map[key]*list.Element{}, lru: list.New()}
}

// Vocab is the cache's vocabulary.
func (c *Cache) Vocab() *Vocab { return c.v }

// Len is the number of cached (or compiling) specs.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// Get returns the compiled constraint of s, compiling it on first use. A
// failed compile is remembered as well (the same spec fails the same way).
func (c *Cache) Get(s Spec) (Constraint, error) {
	k := s.key()
	c.mu.Lock()
	if el, ok := c.entries[k]; ok {
		c.lru.MoveToFront(el)
		e := el.Value.(*entry)
		c.mu.Unlock()
		<-e.done
		return e.c, e.err
	}
	e := &entry{k: k, done: make(chan struct{})}
	c.entries[k] = c.lru.PushFront(e)
	for c.lru.Len() > c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.entries, old.Value.(*entry).k)
	}
	c.mu.Unlock()

	// Evicted while compiling, the entry still serves those waiting on it.
	func() {
		defer close(e.done) // waiters never hang, even on a panic
		defer func() {
			if r := recover(); r != nil {
				e.c, e.err = nil, fmt.Errorf("grammar: compiling a %s constraint: %v", s.Kind, r)
			}
		}()
		e.c, e.err = Compile(s, c.v, c.lim)
	}()
	return e.c, e.err
}
