package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"sort"
	"strings"
	"time"
)

// flagSet is a flag.FlagSet with the command line's conventions, so each
// command only defines its flags:
//   - flags and positional arguments may be interspersed (`serve m.gguf
//     --grpc-addr :1` and `serve --grpc-addr :1 m.gguf` are the same); `--`
//     ends the flags;
//   - a command whose help says so takes its model file as a positional
//     argument, which sets --model (giving both, differently, is an error);
//   - positional arguments beyond what the command's help allows are an
//     error, never silently ignored;
//   - every numeric flag given is checked after parsing: negative values
//     (and NaN, infinities) are refused unless the flag allows them
//     (allowNegative), and limit adds bounds;
//   - -h / --help returns a *helpRequest carrying the command's help text
//     (dispatch prints it on stdout and exits 0); nothing is printed here, so
//     parsing is testable without output.
type flagSet struct {
	*flag.FlagSet
	cmd    string // "serve", "bench model", ...
	args   []string
	checks []flagCheck
	signed map[string]bool // numeric flags that may be negative
}

// flagCheck is one bound on one flag.
type flagCheck struct {
	name   string
	lo, hi float64
}

// newFlags returns the flag set of command cmd (as typed after "oengine").
// The writer is not used: help and errors are returned, not printed.
func newFlags(cmd string, _ io.Writer) *flagSet {
	fs := flag.NewFlagSet("oengine "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, cmd: cmd, signed: map[string]bool{}}
}

// allowNegative lets numeric flags take values below zero.
func (f *flagSet) allowNegative(names ...string) {
	for _, n := range names {
		f.signed[n] = true
	}
}

// limit bounds a numeric flag to [lo, hi] (math.Inf(1) for no upper bound).
func (f *flagSet) limit(name string, lo, hi float64) {
	f.checks = append(f.checks, flagCheck{name: name, lo: lo, hi: hi})
}

// Args returns the positional arguments left after Parse (the model file,
// when the command takes one, is not among them).
func (f *flagSet) Args() []string { return f.args }

// NArg is len(Args()).
func (f *flagSet) NArg() int { return len(f.args) }

// Arg returns the i'th positional argument, or "".
func (f *flagSet) Arg(i int) string {
	if i < 0 || i >= len(f.args) {
		return ""
	}
	return f.args[i]
}

// helpRequest is returned by Parse for -h / --help.
type helpRequest struct{ text string }

func (h *helpRequest) Error() string { return "help requested" }

// Parse parses args (see flagSet), then applies the positional-argument
// rules and the numeric checks.
func (f *flagSet) Parse(args []string) error {
	var pos []string
	for {
		if err := f.FlagSet.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return &helpRequest{text: f.help()}
			}
			return fmt.Errorf("%s: %s (see oengine %s --help)", f.cmd, dashes(err.Error()), f.cmd)
		}
		rest := f.FlagSet.Args()
		if len(rest) == 0 {
			break
		}
		used := len(args) - len(rest)
		if used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	h := helpFor(f.cmd)
	if h.modelArg && len(pos) > 0 {
		if err := f.setModel(pos[0]); err != nil {
			return err
		}
		pos = pos[1:]
	}
	if h.maxArgs >= 0 && len(pos) > h.maxArgs {
		return fmt.Errorf("%s: unexpected argument %q (usage: oengine %s %s)", f.cmd, pos[h.maxArgs], f.cmd, h.synopsis)
	}
	f.args = pos
	return f.checkNumbers()
}

// setModel applies a positional model file to --model.
func (f *flagSet) setModel(path string) error {
	m := f.Lookup("model")
	if m == nil {
		return fmt.Errorf("%s: internal: a positional model needs a --model flag", f.cmd)
	}
	if cur := m.Value.String(); cur != "" && cur != path {
		return fmt.Errorf("%s: model given twice: %q as an argument and --model %q", f.cmd, path, cur)
	}
	return m.Value.Set(path)
}

// checkNumbers refuses negative numbers (unless allowed), NaN and infinite
// values, and values outside the limits. Only flags given on the command
// line are checked: a default is the program's choice (-1 may mean "unset").
func (f *flagSet) checkNumbers() error {
	var err error
	set := map[string]bool{}
	f.Visit(func(fl *flag.Flag) {
		set[fl.Name] = true
		if err != nil {
			return
		}
		v, ok := numberOf(fl)
		if !ok {
			return
		}
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			err = fmt.Errorf("%s: %s must be a finite number, got %s", f.cmd, dashed(fl.Name), fl.Value)
		case v < 0 && !f.signed[fl.Name]:
			err = fmt.Errorf("%s: %s must not be negative, got %s", f.cmd, dashed(fl.Name), fl.Value)
		}
	})
	if err != nil {
		return err
	}
	for _, c := range f.checks {
		fl := f.Lookup(c.name)
		if fl == nil {
			return fmt.Errorf("%s: internal: limit on unknown flag --%s", f.cmd, c.name)
		}
		if !set[c.name] {
			continue
		}
		v, _ := numberOf(fl)
		switch {
		case v < c.lo && math.IsInf(c.hi, 1):
			return fmt.Errorf("%s: %s must be at least %s, got %s", f.cmd, dashed(c.name), fmtNum(c.lo), fl.Value)
		case v < c.lo || v > c.hi:
			return fmt.Errorf("%s: %s must be between %s and %s, got %s", f.cmd, dashed(c.name), fmtNum(c.lo), fmtNum(c.hi), fl.Value)
		}
	}
	return nil
}

func fmtNum(v float64) string { return fmt.Sprint(v) }

// numberOf returns a numeric flag's value (durations in seconds).
func numberOf(fl *flag.Flag) (float64, bool) {
	g, ok := fl.Value.(flag.Getter)
	if !ok {
		return 0, false
	}
	switch v := g.Get().(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint:
		return float64(v), true
	case uint64:
		return float64(v), true
	case float64:
		return v, true
	case time.Duration:
		return v.Seconds(), true
	}
	return 0, false
}

var singleDash = regexp.MustCompile(`(^|[\s:])-([a-zA-Z][a-zA-Z0-9])`)

// dashed spells a flag as help shows it: -o, -n, but --name.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// dashes rewrites the flag package's "-name" in its messages as "--name",
// the spelling the help and README use (one-letter flags keep one dash).
func dashes(msg string) string {
	if strings.HasPrefix(msg, "bad flag syntax") {
		return msg
	}
	return singleDash.ReplaceAllString(msg, "$1--$2")
}

// help returns the command's help text: summary, usage line, flags (spelled
// --name, as the README writes them) and examples.
func (f *flagSet) help() string {
	h := helpFor(f.cmd)
	var b strings.Builder
	fmt.Fprintf(&b, "oengine %s: %s\n\nusage: oengine %s %s\n", f.cmd, h.summary, f.cmd, h.synopsis)
	if h.modelArg {
		b.WriteString("\nMODEL.gguf may also be given as --model; flags may come before or after it.\n")
	}
	if h.notes != "" {
		b.WriteString("\n" + h.notes + "\n")
	}
	var flags []*flag.Flag
	f.VisitAll(func(fl *flag.Flag) { flags = append(flags, fl) })
	if len(flags) > 0 {
		b.WriteString("\nflags:\n")
	}
	for _, fl := range flags {
		b.WriteString(flagLine(fl))
	}
	if len(h.examples) > 0 {
		b.WriteString("\nexamples:\n")
		for _, e := range h.examples {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	return b.String()
}

// flagLine is one flag's entry: "  --name TYPE" then its usage indented.
func flagLine(fl *flag.Flag) string {
	arg, usage := flag.UnquoteUsage(fl)
	if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		arg = ""
	}
	switch arg {
	case "uint", "uint64", "int":
		arg = "N"
	case "float":
		arg = "X"
	}
	arg = strings.ToUpper(arg)
	head := "  " + dashed(fl.Name)
	if arg != "" {
		head += " " + arg
	}
	if !isZeroDefault(fl) {
		usage += fmt.Sprintf(" (default %s)", quoteDefault(fl))
	}
	return head + "\n        " + strings.ReplaceAll(usage, "\n", "\n        ") + "\n"
}

func isZeroDefault(fl *flag.Flag) bool {
	switch fl.DefValue {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

func quoteDefault(fl *flag.Flag) string {
	if _, ok := fl.Value.(flag.Getter); ok {
		if _, isStr := fl.Value.(flag.Getter).Get().(string); isStr {
			return fmt.Sprintf("%q", fl.DefValue)
		}
	}
	return fl.DefValue
}

// cmdHelp is what --help says about a command beyond its flags.
type cmdHelp struct {
	summary  string
	synopsis string // after "oengine CMD"
	notes    string
	examples []string
	modelArg bool // a first positional argument is the model file (--model)
	maxArgs  int  // positional arguments allowed besides the model (-1: any)
}

// helpTable holds every command's help, top-level and bench subcommands.
var helpTable = map[string]cmdHelp{}

func helpFor(cmd string) cmdHelp {
	h, ok := helpTable[cmd]
	if !ok {
		h = cmdHelp{synopsis: "[flags]"}
	}
	if h.summary == "" {
		h.summary = commands[cmd].summary
	}
	return h
}

// ---- sizes ----

var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

var sizeSyntax = regexp.MustCompile(`^([0-9]+(?:\.[0-9]*)?|\.[0-9]+) ?([a-zA-Z]*)$`)

// parseBytes reads a size: a non-negative integer or decimal number, an
// optional space and an optional unit: B, KB, MB, GB, TB (powers of 1000)
// or KiB, MiB, GiB, TiB (powers of 1024), any case. A bare number is bytes;
// fractions of a byte are dropped. Anything else (2G, 1e9, -1, a size
// beyond int64) is an error.
func parseBytes(s string) (int64, error) {
	in := strings.TrimSpace(s)
	m := sizeSyntax.FindStringSubmatch(in)
	if m == nil {
		return 0, fmt.Errorf("bad size %q: want a number and a unit, e.g. 2GiB, 512MiB, 1.5GB", s)
	}
	mult, ok := sizeUnits[strings.ToLower(m[2])]
	if !ok {
		hint := ""
		switch u := strings.ToUpper(m[2]); u {
		case "K", "M", "G", "T":
			hint = fmt.Sprintf(" (did you mean %s%siB or %s%sB?)", m[1], u, m[1], u)
		}
		return 0, fmt.Errorf("bad size %q: unknown unit %q; use B, KB, MB, GB, TB or KiB, MiB, GiB, TiB%s", s, m[2], hint)
	}
	num := m[1]
	if strings.HasSuffix(num, ".") {
		num += "0"
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("bad size %q", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	q := new(big.Int).Quo(r.Num(), r.Denom())
	if !q.IsInt64() {
		return 0, fmt.Errorf("bad size %q: beyond %d bytes", s, int64(math.MaxInt64))
	}
	return q.Int64(), nil
}

// ---- common checks ----

// oneOf checks that v (compared case-insensitively) is one of the choices.
func oneOf(cmd, flagName, v string, choices ...string) error {
	for _, c := range choices {
		if strings.EqualFold(v, c) {
			return nil
		}
	}
	return fmt.Errorf("%s: --%s must be %s, got %q", cmd, flagName, orList(choices), v)
}

func orList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// commandNames lists the top-level commands in order.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
