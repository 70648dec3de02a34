package chat

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ardanlabs/jinja"
)

// ErrTemplateLimit reports a render that ran past a limit (time, output
// size or range() elements). It also matches ErrTemplate.
var ErrTemplateLimit = fmt.Errorf("%w: limit exceeded", ErrTemplate)

// Limits bound one render of a chat template, so that a template from a
// model file (or --chat-template) that loops or allocates without bound
// fails with an error instead of hanging the server. The zero value means
// the defaults below.
type Limits struct {
	// Timeout bounds the wall time of one render (default 2 s).
	Timeout time.Duration
	// MaxOutput bounds the rendered text in bytes (default 8 MiB).
	MaxOutput int
	// MaxRange bounds the elements that all range() calls of one render
	// may produce together (default 1<<20). The library offers no step
	// limit, so range (the one way a template builds a long loop) is
	// replaced by a counting version.
	MaxRange int
	// MaxMacroCalls bounds the macro calls of one render of a template
	// whose macros recurse (default 1<<14), which bounds the recursion's
	// depth: the library has no depth limit, and a runaway recursion
	// would overflow the stack, which is fatal (guardMacros).
	MaxMacroCalls int
}

// Default limits (see Limits).
const (
	DefaultRenderTimeout = 2 * time.Second
	DefaultMaxOutput     = 8 << 20
	DefaultMaxRange      = 1 << 20
	DefaultMaxMacroCalls = 1 << 14
)

func (l Limits) withDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = DefaultRenderTimeout
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultMaxOutput
	}
	if l.MaxRange <= 0 {
		l.MaxRange = DefaultMaxRange
	}
	if l.MaxMacroCalls <= 0 {
		l.MaxMacroCalls = DefaultMaxMacroCalls
	}
	return l
}

// Template is a compiled chat template with its render limits. It renders
// whole conversations to text; Encoder turns that text into tokens. It is
// safe for concurrent use.
//
// Hostile templates: a render runs in its own goroutine; when it passes
// Limits.Timeout the caller gets ErrTemplateLimit at once, but the
// goroutine runs on until the template stops (Go cannot stop it), so a
// template that never stops keeps one CPU busy. range() is counted, which
// stops the plain unbounded loops (for i in range(10**9)) early, with no
// leaked work. Two constructs are still unbounded in the template library:
// string repetition ('x' * 10**10 allocates at once) and macro recursion
// (which ends in a fatal stack overflow). Recursive macros are therefore
// refused at compile time (a conservative check on the source).
// NewEncoder renders a probe conversation, so a template that misbehaves on
// an ordinary conversation is refused at load, before serving.
type Template struct {
	tmpl   *jinja.Template
	limits Limits
	// running counts renders still in flight, timed-out ones included (for
	// tests and metrics).
	running *atomic.Int64
	// now is the clock of strftime_now (time.Now; tests fix it).
	now func() time.Time
	// guarded: the macros recurse and each call is counted (guardMacros).
	guarded bool
}

// CompileTemplate compiles a chat template source.
func CompileTemplate(source string, limits Limits) (*Template, error) {
	guarded := recursiveMacros(source)
	if guarded {
		source = guardMacros(source)
	}
	t, err := jinja.Compile(source)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	return &Template{tmpl: t, limits: limits.withDefaults(), running: new(atomic.Int64), now: time.Now, guarded: guarded}, nil
}

// Specials are the texts of the special tokens a template may print.
type Specials struct {
	BOS, EOS string
}

// Vars are the variables of one render.
type Vars struct {
	Messages            []Message
	AddGenerationPrompt bool
	Specials            Specials
	// Kwargs are extra variables (the request's chat_template_kwargs,
	// e.g. enable_thinking), already decoded (see DecodeKwargs).
	Kwargs map[string]jinja.Value
	// Tools, when non-empty, is the `tools` variable: the tool
	// definitions as JSON-like values (OpenAI's shape, {"type":
	// "function", "function": {...}}).
	Tools []jinja.Value
}

// reserved are the variables a request's kwargs may not replace.
var reserved = map[string]bool{
	"messages": true, "add_generation_prompt": true, "bos_token": true, "eos_token": true,
	"range": true, "raise_exception": true, "tools": true, "strftime_now": true, macroGuard: true,
}

// Render renders the template for vars.
func (t *Template) Render(vars Vars) (string, error) {
	data := make(map[string]jinja.Value, len(vars.Kwargs)+6)
	for k, v := range vars.Kwargs {
		if reserved[k] {
			return "", fmt.Errorf("%w: %q", ErrReservedKwarg, k)
		}
		data[k] = v
	}
	msgs := make([]jinja.Value, len(vars.Messages))
	for i, m := range vars.Messages {
		msgs[i] = m.value()
	}
	data["messages"] = jinja.NewList(msgs)
	data["add_generation_prompt"] = jinja.NewBool(vars.AddGenerationPrompt)
	data["bos_token"] = jinja.NewString(vars.Specials.BOS)
	data["eos_token"] = jinja.NewString(vars.Specials.EOS)
	if len(vars.Tools) > 0 {
		data["tools"] = jinja.NewList(vars.Tools)
	}
	return t.renderValues(data)
}

// ErrReservedKwarg reports a template kwarg that would replace a variable
// the server sets (messages, bos_token, ...).
var ErrReservedKwarg = errors.New("chat: chat_template_kwargs may not set")

// renderValues runs one render under the limits.
func (t *Template) renderValues(data map[string]jinja.Value) (string, error) {
	lim := t.limits
	var budget atomic.Int64
	budget.Store(int64(lim.MaxRange))
	data["range"] = jinja.NewCallable("range", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		return countedRange(args, &budget)
	})
	if t.guarded {
		var calls atomic.Int64
		calls.Store(int64(lim.MaxMacroCalls))
		data[macroGuard] = jinja.NewCallable(macroGuard, func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
			if calls.Add(-1) < 0 {
				return jinja.Value{}, errMacroBudget
			}
			return jinja.NewString(""), nil
		})
	}
	// strftime_now(format): the server's local time in Python's strftime
	// format, as Hugging Face's and llama.cpp's renderers provide it
	// (gpt-oss's template calls it for "Current date", Llama 3.2's when
	// it is defined).
	now := t.now()
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 {
			return jinja.Value{}, fmt.Errorf("%w: strftime_now takes one format string, got %d arguments", ErrTemplate, len(args))
		}
		if !args[0].IsString() {
			return jinja.Value{}, fmt.Errorf("%w: strftime_now's format is not a string", ErrTemplate)
		}
		return jinja.NewString(strftime(now, args[0].AsString())), nil
	})
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1) // buffered: a timed-out render still sends and exits
	t.running.Add(1)
	go func() {
		defer t.running.Add(-1)
		var r result
		defer func() {
			// The template engine is third-party code running a template
			// from a model file: never let it take the server down.
			if p := recover(); p != nil {
				r = result{err: fmt.Errorf("%w: render panicked: %v", ErrTemplate, p)}
			}
			done <- r
		}()
		r.out, r.err = t.tmpl.RenderValues(data)
	}()
	timer := time.NewTimer(lim.Timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			if errors.Is(r.err, ErrTemplate) {
				return "", r.err
			}
			if errors.Is(r.err, errRangeBudget) {
				return "", fmt.Errorf("%w: range() produced more than %d elements", ErrTemplateLimit, lim.MaxRange)
			}
			if errors.Is(r.err, errMacroBudget) {
				return "", fmt.Errorf("%w: more than %d macro calls (recursive macros)", ErrTemplateLimit, lim.MaxMacroCalls)
			}
			return "", fmt.Errorf("%w: %v", ErrTemplate, r.err)
		}
		if len(r.out) > lim.MaxOutput {
			return "", fmt.Errorf("%w: output of %d bytes exceeds %d", ErrTemplateLimit, len(r.out), lim.MaxOutput)
		}
		return r.out, nil
	case <-timer.C:
		return "", fmt.Errorf("%w: render took more than %v", ErrTemplateLimit, lim.Timeout)
	}
}

// Running reports how many renders of t are still executing, including
// ones whose caller already got a timeout.
func (t *Template) Running() int64 { return t.running.Load() }

var (
	errRangeBudget = errors.New("chat: range budget exhausted")
	errMacroBudget = errors.New("chat: macro call budget exhausted")
)

// countedRange is Python's range (1 to 3 integer arguments) charged
// against budget before any element is built.
func countedRange(args []jinja.Value, budget *atomic.Int64) (jinja.Value, error) {
	var start, stop, step int64 = 0, 0, 1
	ints := make([]int64, len(args))
	for i, a := range args {
		switch {
		case a.IsInt():
			ints[i] = a.AsInt()
		case a.IsBool():
			if a.AsBool() {
				ints[i] = 1
			}
		default:
			return jinja.Undefined(), fmt.Errorf("range: argument %d is not an integer", i+1)
		}
	}
	switch len(ints) {
	case 1:
		stop = ints[0]
	case 2:
		start, stop = ints[0], ints[1]
	case 3:
		start, stop, step = ints[0], ints[1], ints[2]
	default:
		return jinja.Undefined(), fmt.Errorf("range: expected 1 to 3 arguments, got %d", len(args))
	}
	if step == 0 {
		return jinja.Undefined(), errors.New("range: step must not be zero")
	}
	var n int64
	switch {
	case step > 0 && stop > start:
		n = (stop - start + step - 1) / step
	case step < 0 && stop < start:
		n = (start - stop - step - 1) / -step
	}
	if n < 0 || budget.Add(-n) < 0 {
		return jinja.Undefined(), errRangeBudget
	}
	items := make([]jinja.Value, n)
	for i := range items {
		items[i] = jinja.NewInt(start + int64(i)*step)
	}
	return jinja.NewList(items), nil
}

// macroGuard names the callable that guardMacros puts at the start of
// every macro body: it counts the render's macro calls against
// Limits.MaxMacroCalls and writes nothing.
const macroGuard = "__oengine_macro_call"

// guardMacros returns src with a call of macroGuard at the start of every
// macro body, so that a render of a template whose macros recurse (as
// gpt-oss's does over a tool's JSON schema) fails with ErrTemplateLimit
// after Limits.MaxMacroCalls calls instead of recursing without bound:
// the template library has no depth limit, and a runaway recursion is a
// fatal stack overflow, not an error. The call copies the macro tag's
// right whitespace control ("-%}": "{{ call -}}", "%}": "{{ call }}"),
// so the rendered text is unchanged.
func guardMacros(src string) string {
	var b strings.Builder
	rest := src
	for {
		i := indexTag(rest, "macro")
		if i < 0 {
			break
		}
		end := strings.Index(rest[i:], "%}")
		if end < 0 {
			break // the compiler reports the syntax error
		}
		end += i + 2
		b.WriteString(rest[:end])
		if rest[end-3] == '-' {
			b.WriteString("{{ " + macroGuard + "() -}}")
		} else {
			b.WriteString("{{ " + macroGuard + "() }}")
		}
		rest = rest[end:]
	}
	b.WriteString(rest)
	return b.String()
}

// recursiveMacros reports whether the template's macros call themselves,
// directly or through other macros. The check is on the source text (a
// macro's body mentioning a macro's name counts as a call), so it may
// also guard a template whose macros only mention each other.
func recursiveMacros(src string) bool {
	type macro struct{ name, body string }
	var macros []macro
	rest := src
	for {
		i := indexTag(rest, "macro")
		if i < 0 {
			break
		}
		rest = rest[i:]
		name := macroName(rest)
		end := indexTag(rest, "endmacro")
		if name == "" || end < 0 {
			break // the compiler reports the syntax error
		}
		macros = append(macros, macro{name: name, body: rest[:end]})
		rest = rest[end:]
	}
	if len(macros) == 0 {
		return false
	}
	calls := map[string][]string{}
	for _, m := range macros {
		for _, o := range macros {
			if mentions(m.body, o.name) {
				calls[m.name] = append(calls[m.name], o.name)
			}
		}
	}
	// Depth-first search for a cycle.
	const (
		unseen = iota
		active
		finished
	)
	state := map[string]int{}
	var visit func(n string) bool
	visit = func(n string) bool {
		switch state[n] {
		case active:
			return true
		case finished:
			return false
		}
		state[n] = active
		for _, c := range calls[n] {
			if visit(c) {
				return true
			}
		}
		state[n] = finished
		return false
	}
	for _, m := range macros {
		if visit(m.name) {
			return true
		}
	}
	return false
}

// indexTag finds the start of "{% kw" or "{%- kw" (spaces allowed).
func indexTag(s, kw string) int {
	off := 0
	for {
		i := strings.Index(s[off:], "{%")
		if i < 0 {
			return -1
		}
		i += off
		j := i + 2
		if j < len(s) && (s[j] == '-' || s[j] == '+') {
			j++
		}
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
			j++
		}
		if strings.HasPrefix(s[j:], kw) && (j+len(kw) == len(s) || !isIdent(s[j+len(kw)])) {
			return i
		}
		off = i + 2
	}
}

// macroName reads the name after "{% macro".
func macroName(s string) string {
	i := strings.Index(s, "macro") + len("macro")
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
		i++
	}
	j := i
	for j < len(s) && isIdent(s[j]) {
		j++
	}
	return s[i:j]
}

// mentions reports whether name occurs in s as a whole identifier after
// the macro's own header.
func mentions(body, name string) bool {
	// Skip "{% macro NAME(" itself.
	h := strings.Index(body, name)
	if h < 0 {
		return false
	}
	s := body[h+len(name):]
	for {
		i := strings.Index(s, name)
		if i < 0 {
			return false
		}
		before := i == 0 || !isIdent(s[i-1])
		after := i+len(name) == len(s) || !isIdent(s[i+len(name)])
		if before && after {
			return true
		}
		s = s[i+len(name):]
	}
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
