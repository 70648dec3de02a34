package grammar

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"regexp"
	"testing"
	"unicode/utf8"
)

var regexCases = []string{
	`abc`, `a|b|cd`, `(ab)*c`, `a?b+c*`, `[a-z]+`, `[^a-z]`, `\d{3}-\d{4}`, `\w+@\w+\.com`,
	`\s*x\s*`, `.`, `.*`, `(?:ab|cd){2,3}`, `x{0,2}y{2,}`, `[\d\s]+`, `[^\w]`, `é+ü?`, `[α-ω]{1,3}`,
	`[^"\\]*`, `\x41\.\-`, `(a|)+b`, ``, `[\-a]`, `[a-]`, `\D\W\S`, `(((a)))`, `日本語|中文`,
	`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, `[\x00-\x7f]`, `[^\x00-\x{7f}]`,
}

// alphabet of the strings tested against each pattern: ASCII specials,
// letters, digits, multi-byte runes of every length.
var alphabet = []rune("abcdxyzABZ019_-+.eE \t\n\"\\@éüαω日本語中文😀\x00\x7f\u0080\u07ff\u0800\uffff\U00010000")

func randomString(r *rand.Rand, maxLen int) string {
	n := r.IntN(maxLen + 1)
	b := make([]rune, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// TestRegexMatchesGoRegexp compares the DFA with Go's regexp (the plain
// reference twin) anchored at both ends, on random strings and on strings
// drawn from the DFA itself (so that matches are exercised, not only
// rejections).
func TestRegexMatchesGoRegexp(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, pat := range regexCases {
		d, err := CompileRegex(pat)
		if err != nil {
			t.Fatalf("%q: %v", pat, err)
		}
		re := regexp.MustCompile(`^(?:` + pat + `)$`)
		matched := 0
		check := func(s string) {
			if got, want := d.Match([]byte(s)), re.MatchString(s); got != want {
				t.Errorf("%q on %q: dfa %v, regexp %v", pat, s, got, want)
			} else if got {
				matched++
			}
		}
		for i := 0; i < 300; i++ {
			check(randomString(r, 6))
			check(string(sampleDFA(r, d, 40)))
		}
		if matched == 0 {
			t.Errorf("%q: no test string matched", pat)
		}
	}
}

// sampleDFA walks random live bytes and stops at an accepting state with
// some probability, or steers to acceptance after maxLen bytes.
func sampleDFA(r *rand.Rand, d *DFA, maxLen int) []byte {
	var out []byte
	s := int32(0)
	for {
		if d.Accepting(s) && (r.IntN(4) == 0 || len(out) >= maxLen) {
			return out
		}
		var live []byte
		for b := 0; b < 256; b++ {
			if n := d.Next(s, byte(b)); n >= 0 && (len(out) < maxLen || d.DistToAccept(n) < d.DistToAccept(s)) {
				live = append(live, byte(b))
			}
		}
		if len(live) == 0 {
			return out // accepting with no continuation
		}
		b := live[r.IntN(len(live))]
		out = append(out, b)
		s = d.Next(s, b)
	}
}

func TestRegexRefused(t *testing.T) {
	for _, pat := range []string{`^a`, `a$`, `a*?`, `a**`, `(?i)a`, `\b`, `\pL`, `a{2`, `a{3,2}`, `a{1001}`, `[]`, `[a`, `(a`, `a)`, `*`, `\1`, `[[:alpha:]]`} {
		if _, err := CompileRegex(pat); err == nil {
			t.Errorf("%q: accepted", pat)
		} else if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%q: %v is neither ErrSyntax nor ErrUnsupported", pat, err)
		}
	}
	if _, err := CompileRegex(`(a|b)*a(a|b){20}`); !errors.Is(err, ErrTooLarge) {
		t.Errorf("exponential DFA: %v, want ErrTooLarge", err)
	}
}

// FuzzRegex compares the DFA with Go's regexp on every pattern both accept
// and valid UTF-8 input (Go's regexp reads invalid bytes as U+FFFD, a
// different language by design).
func FuzzRegex(f *testing.F) {
	for i, pat := range regexCases {
		f.Add(pat, []byte("abc é 12"), uint64(i))
	}
	f.Fuzz(func(t *testing.T, pat string, input []byte, seed uint64) {
		if len(pat) > 40 {
			return
		}
		re, err := regexp.Compile(`^(?:` + pat + `)$`)
		if err != nil {
			return
		}
		d, err := CompileRegex(pat)
		if err != nil {
			return
		}
		if utf8.Valid(input) && d.Match(input) != re.Match(input) {
			t.Fatalf("%q on %q: dfa %v, regexp %v", pat, input, d.Match(input), re.Match(input))
		}
		s := sampleDFA(rand.New(rand.NewPCG(seed, 7)), d, 30)
		if !re.Match(s) {
			t.Fatalf("%q: sampled %q rejected by regexp", pat, s)
		}
	})
}

func TestChoice(t *testing.T) {
	choices := []string{"yes", "no", "y", "a|b.*", ""}
	d, err := CompileChoice(choices)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"yes", "no", "y", "a|b.*", "", "ye", "yess", "a", "ab"} {
		want := false
		for _, c := range choices {
			want = want || c == s
		}
		if d.Match([]byte(s)) != want {
			t.Errorf("%q: got %v", s, !want)
		}
	}
	if _, err := CompileChoice(nil); !errors.Is(err, ErrSyntax) {
		t.Errorf("empty choice: %v", err)
	}
}

// FuzzMask compares the trie mask with the plain per-token walk for
// fuzzed patterns and a fuzzed small vocabulary (pieces split from text).
func FuzzMask(f *testing.F) {
	f.Add(`[a-c]+(d|é)?`, []byte("a b ab abc d é é\xc3 \xa9 cd dd"))
	f.Add(`\d{2,4}`, []byte("1 12 123 1234 12345 a 1a"))
	f.Fuzz(func(t *testing.T, pat string, text []byte) {
		if len(pat) > 30 || len(text) > 200 {
			return
		}
		d, err := CompileRegex(pat)
		if err != nil {
			return
		}
		pieces := bytes.Split(text, []byte(" "))
		v := NewVocab(pieces, []int32{0})
		ix := NewIndex(d, v)
		for s := int32(0); int(s) < d.NumStates() && s < 50; s++ {
			if got, want := ix.ComputeMask(s), ix.referenceMask(s); !equalMasks(got, want) {
				t.Fatalf("%q state %d: mask %b, reference %b", pat, s, got, want)
			}
		}
	})
}

// TestMinimizeKeepsLanguage compares each minimized DFA with the
// unminimized subset construction on random and sampled strings, and
// checks minimization merged states where it should.
func TestMinimizeKeepsLanguage(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, pat := range append(regexCases, `(a|b)(c|d)|(a|b)e`) {
		n, err := parseRegex(pat)
		if err != nil {
			t.Fatal(err)
		}
		m := &nfa{}
		start := m.build(n, m.add(nstate{match: true}))
		full, err := m.determinize(start)
		if err != nil {
			t.Fatal(err)
		}
		min := full.minimize()
		if min.NumStates() > full.NumStates() {
			t.Errorf("%q: %d states after minimizing %d", pat, min.NumStates(), full.NumStates())
		}
		for i := 0; i < 300; i++ {
			for _, s := range [][]byte{[]byte(randomString(r, 6)), sampleDFA(r, full, 20), sampleDFA(r, min, 20)} {
				if full.Match(s) != min.Match(s) {
					t.Fatalf("%q on %q: full %v, minimized %v", pat, s, full.Match(s), min.Match(s))
				}
			}
		}
	}
	d, err := CompileRegex(`(a|b)(c|d)|(a|b)e`)
	if err != nil {
		t.Fatal(err)
	}
	if d.NumStates() != 3 {
		t.Errorf("(a|b)(c|d)|(a|b)e: %d states, want 3", d.NumStates())
	}
}
