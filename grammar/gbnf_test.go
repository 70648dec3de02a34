package grammar

import (
	"encoding/json"
	"errors"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Independent recognizers for the test grammars: nothing here shares code
// with the GBNF recognizer.

func checkJSON(s string) error {
	if !json.Valid([]byte(s)) {
		return errors.New("encoding/json: not valid JSON")
	}
	return nil
}

// checkArithmetic parses s as a Go expression and accepts only integer
// literals, + - * / and parentheses.
func checkArithmetic(s string) error {
	e, err := goparser.ParseExpr(s)
	if err != nil {
		return err
	}
	var bad error
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case nil, *ast.ParenExpr:
		case *ast.BasicLit:
			if n.Kind != token.INT {
				bad = errors.New("non-integer literal " + n.Value)
			}
		case *ast.BinaryExpr:
			switch n.Op {
			case token.ADD, token.SUB, token.MUL, token.QUO:
			default:
				bad = errors.New("operator " + n.Op.String())
			}
		default:
			bad = errors.New("unexpected node")
		}
		return bad == nil
	})
	return bad
}

var listRE = regexp.MustCompile(`^(?:(?:  )?- [^\x00-\x20][^\n\r]{0,60}\n)+$`)
var answerRE = regexp.MustCompile(`^(?:yes|no|Yes|No)(?:, because "[a-z ]{1,30}")?\.$`)

func checkRE(re *regexp.Regexp) func(string) error {
	return func(s string) error {
		if !re.MatchString(s) {
			return errors.New("regexp " + re.String() + " does not match")
		}
		return nil
	}
}

// checkBalanced checks brackets with a stack.
func checkBalanced(s string) error {
	var st []byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '(', '[':
			st = append(st, c)
		case ')', ']':
			want := byte('(')
			if c == ']' {
				want = '['
			}
			if len(st) == 0 || st[len(st)-1] != want {
				return errors.New("unbalanced")
			}
			st = st[:len(st)-1]
		default:
			return errors.New("not a bracket")
		}
	}
	if len(st) > 0 {
		return errors.New("unclosed")
	}
	return nil
}

var gbnfCases = []struct {
	name  string
	check func(string) error
	// accepted and rejected are hand-written members and non-members.
	accepted, rejected []string
	exact              bool // the check refuses every string the grammar refuses
}{
	{"json", checkJSON,
		[]string{`0`, `-1.5e+3`, `"a\"b\u00e9"`, `{"a": [1, 2, {}], "b": null}`, "[\n  true ,false]", `"日本"`, `[]`, `{}`},
		[]string{``, `01`, `{"a":}`, `[1,]`, `tru`, `"\x"`, "\"a\x01\"", `{a:1}`, `[1 2]`, `"`, `1.`, `--1`, ` 1`}, false},
	{"arithmetic", checkArithmetic,
		[]string{`1`, `1+2*3`, `(1 - 2) / 3`, `((7))`, `0*10`},
		[]string{``, `01`, `-1`, `1++2`, `(1`, `1)`, `1  + 2`, `1 +`, `a`, `1.5`}, false},
	{"list", checkRE(listRE),
		[]string{"- a\n", "- milk\n  - 2 litres\n- bread ☺\n"},
		[]string{"", "- a", "-a\n", "-  a\n", "    - a\n", "- a\n\n", "* a\n"}, true},
	{"balanced", checkBalanced,
		[]string{"", "()", "([])[()()]"},
		[]string{"(", ")", "(]", "([)]", "x"}, true},
	{"answer", checkRE(answerRE),
		[]string{"yes.", `No, because "it rains".`},
		[]string{"yes", "maybe.", `yes, because "".`, `yes, because "A".`}, true},
}

// TestGBNFHandCases checks members and non-members byte by byte, and
// that the independent recognizer agrees on each.
func TestGBNFHandCases(t *testing.T) {
	v := byteVocab()
	for _, tc := range gbnfCases {
		t.Run(tc.name, func(t *testing.T) {
			c := compileGBNFTest(t, readGBNF(t, tc.name), v)
			for _, s := range tc.accepted {
				if !gbnfAccepts(c, s) {
					t.Errorf("%q refused", s)
				}
				if err := tc.check(s); err != nil {
					t.Errorf("%q: the independent check refuses it: %v", s, err)
				}
			}
			for _, s := range tc.rejected {
				if gbnfAccepts(c, s) {
					t.Errorf("%q accepted", s)
				}
				if err := tc.check(s); err == nil && tc.exact {
					t.Errorf("%q: the independent check accepts it", s)
				}
			}
		})
	}
}

// TestGBNFRefusesOutside feeds strings outside a grammar through the
// Guide: Advance refuses the first byte that leaves it, and an end token
// before the output is complete.
func TestGBNFRefusesOutside(t *testing.T) {
	v := byteVocab()
	c := compileGBNFTest(t, readGBNF(t, "json"), v)
	for _, tc := range []struct {
		in  string
		bad int // index of the refused byte
	}{{`{"a":}`, 5}, {`[1,]`, 3}, {`01`, 1}, {"\"\x01", 1}, {`{a`, 1}, {`nul!`, 3}} {
		g := c.Start()
		for i := 0; i < len(tc.in); i++ {
			id := int32(tc.in[i])
			if g.Mask().Has(id) != (i != tc.bad) {
				t.Errorf("%q byte %d: mask says %v", tc.in, i, g.Mask().Has(id))
			}
			err := g.Advance(id)
			if i < tc.bad && err != nil {
				t.Fatalf("%q byte %d: %v", tc.in, i, err)
			}
			if i == tc.bad {
				if !errors.Is(err, ErrTokenRejected) {
					t.Errorf("%q byte %d: %v, want ErrTokenRejected", tc.in, i, err)
				}
				break
			}
		}
	}
	g := c.Start()
	for _, b := range []byte(`[1`) {
		if err := g.Advance(int32(b)); err != nil {
			t.Fatal(err)
		}
	}
	if g.Mask().Has(256) {
		t.Error("end token allowed in [1")
	}
	if err := g.Advance(256); !errors.Is(err, ErrTokenRejected) {
		t.Errorf("end token in [1: %v", err)
	}
	// "[1]" is complete and nothing may follow a JSON value here.
	if err := g.Advance(']'); err != nil || !g.Mask().Has(256) || g.Mask().Count() != 1 || !g.Done() {
		t.Fatalf("[1]: %v, end allowed %v, done %v", err, g.Mask().Has(256), g.Done())
	}
	if err := g.Advance(256); err != nil || !g.Done() || g.Mask().Count() != 0 {
		t.Errorf("end after [1]: %v, done %v, mask %d", err, g.Done(), g.Mask().Count())
	}
	if err := g.Advance('1'); !errors.Is(err, ErrTokenRejected) {
		t.Errorf("token after the end: %v", err)
	}
	// Done without an end token: nothing can extend "yes.".
	a := compileGBNFTest(t, readGBNF(t, "answer"), v).Start()
	for _, b := range []byte("yes.") {
		if a.Done() {
			t.Fatal("done too early")
		}
		if err := a.Advance(int32(b)); err != nil {
			t.Fatal(err)
		}
	}
	if !a.Done() {
		t.Error(`"yes." is complete and final but not done`)
	}
}

// TestGBNFRandomWalks generates seeded outputs over a byte vocabulary and
// two model vocabularies and checks every one with the independent
// recognizer of its grammar.
func TestGBNFRandomWalks(t *testing.T) {
	vocabs := []struct {
		name  string
		v     func(testing.TB) *Vocab
		walks int
	}{
		{"bytes", func(testing.TB) *Vocab { return byteVocab() }, 40},
		{"llama-spm-32k", func(t testing.TB) *Vocab { return loadVocab(t, "ggml-vocab-llama-spm.gguf") }, 15},
		{"qwen3-151k", func(t testing.TB) *Vocab { return loadVocab(t, "ggml-vocab-qwen3.gguf") }, 4},
	}
	if testing.Short() || raceEnabled {
		vocabs = vocabs[:2]
	}
	for _, vc := range vocabs {
		v := vc.v(t)
		for _, tc := range gbnfCases {
			t.Run(vc.name+"/"+tc.name, func(t *testing.T) {
				c := compileGBNFTest(t, readGBNF(t, tc.name), v)
				r := rand.New(rand.NewPCG(20, uint64(len(tc.name))))
				for i := 0; i < vc.walks; i++ {
					out := string(gbnfWalk(t, c, r, 5+r.IntN(40), nil))
					if t.Failed() {
						return
					}
					if err := tc.check(out); err != nil {
						t.Errorf("generated %q: %v", out, err)
					}
					if !gbnfAccepts(compileGBNFTest(t, readGBNF(t, tc.name), byteVocab()), out) {
						t.Errorf("generated %q is not accepted byte by byte", out)
					}
				}
			})
		}
	}
}

// TestGBNFMaskMatchesReference compares the trie walk with the plain
// per-token twin on the states of random walks.
func TestGBNFMaskMatchesReference(t *testing.T) {
	vocabs := []*Vocab{byteVocab(), loadVocab(t, "ggml-vocab-llama-spm.gguf"),
		mixedVocab()}
	for vi, v := range vocabs {
		for _, tc := range gbnfCases {
			c := compileGBNFTest(t, readGBNF(t, tc.name), v)
			r := rand.New(rand.NewPCG(uint64(vi), 9))
			var states [][]int32
			for i := 0; i < 3; i++ {
				gbnfWalk(t, c, r, 10, &states)
			}
			if tc.name == "json" { // nested states, byte by byte
				g := c.Start().(*gbnfGuide)
				for _, b := range []byte(`{"a": [1, {"b": "xy\n", "c": [true]}, "`) {
					states = append(states, g.state)
					if err := g.Advance(tokenOf(v, b)); err != nil {
						t.Fatalf("vocab %d: %q: %v", vi, b, err)
					}
				}
			}
			keep := 80
			if raceEnabled {
				keep = 10
			}
			if len(states) > keep {
				states = states[len(states)-keep:]
			}
			for _, s := range states {
				got := c.computeMask(&recognizer{g: c.g}, s)
				if want := c.referenceMask(s); !equalMasks(got, want) {
					t.Fatalf("vocab %d %s state %v: mask has %d tokens, reference %d", vi, tc.name, s, got.Count(), want.Count())
				}
			}
			if tc.name == "json" && c.splits.Load() == 0 {
				t.Errorf("vocab %d json: no mask was split", vi)
			}
		}
	}
}

// TestGBNFSplitNearBounds compares the mask with the reference on states
// nested close to maxGBNFDepth, where a split would cut differently from
// the whole walk and must step aside.
func TestGBNFSplitNearBounds(t *testing.T) {
	for _, v := range []*Vocab{mixedVocab()} {
		for _, tc := range []struct{ grammar, open string }{{"balanced", "(["}, {"json", `[{"a":`}} {
			c := compileGBNFTest(t, readGBNF(t, tc.grammar), v)
			g := c.Start().(*gbnfGuide)
			var states [][]int32
			for i := 0; ; i++ {
				b := tc.open[i%len(tc.open)]
				if !g.Mask().Has(int32(b)) && !g.Mask().Has(tokenOf(v, b)) {
					break
				}
				states = append(states, g.state)
				if err := g.Advance(tokenOf(v, b)); err != nil {
					t.Fatal(err)
				}
			}
			if len(states) < 300 {
				t.Fatalf("%s: nesting stopped after %d bytes", tc.grammar, len(states))
			}
			for _, s := range append(states[:5], states[len(states)-30:]...) {
				if got, want := c.computeMask(&recognizer{g: c.g}, s), c.referenceMask(s); !equalMasks(got, want) {
					t.Fatalf("%s at depth %d: %d tokens, reference %d", tc.grammar, len(s), got.Count(), want.Count())
				}
			}
		}
	}
}

// tokenOf is the id of the single-byte token b.
func tokenOf(v *Vocab, b byte) int32 {
	for id, p := range v.pieces {
		if len(p) == 1 && p[0] == b {
			return int32(id)
		}
	}
	return -1
}

// mixedVocab has tokens that span terminals and split runes, every
// single byte (so that any output can be finished) and an end token.
func mixedVocab() *Vocab {
	pieces := [][]byte{nil} // 0: the end token
	for _, p := range strings.Fields("ab abc {\" \": \":[ ], -1 12 00 () (( )) )+ *( /( e+ fals true null \\u \"a\" ,\" é\" 日本 \xe6\x97 \xa5 \n- \n\n") {
		pieces = append(pieces, []byte(p))
	}
	pieces = append(pieces, []byte("- "), []byte(" - "), []byte(" 1 + "), []byte("  "))
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
	}
	return NewVocab(pieces, []int32{0})
}

// TestGBNFConcurrent shares one constraint among goroutines (run with
// -race): the mask cache is the shared state.
func TestGBNFConcurrent(t *testing.T) {
	c := compileGBNFTest(t, readGBNF(t, "json"), loadVocab(t, "ggml-vocab-llama-spm.gguf"))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 4))
			for range 3 {
				if out := gbnfWalk(t, c, r, 20, nil); !json.Valid(out) {
					t.Errorf("%q is not JSON", out)
				}
			}
		}()
	}
	wg.Wait()
	if c.cache.len() == 0 {
		t.Error("no mask cached")
	}
}

func TestGBNFMaskCacheEvicts(t *testing.T) {
	var mc maskCache
	mc.init(16)
	for i := range 40 {
		mc.put(string(rune('a'+i)), Mask{uint64(i)})
	}
	if mc.len() != 16 {
		t.Errorf("%d entries, want 16", mc.len())
	}
	if _, ok := mc.get("a"); ok {
		t.Error("oldest entry kept")
	}
	if m, ok := mc.get(string(rune('a' + 39))); !ok || m[0] != 39 {
		t.Error("newest entry lost")
	}
	if m := mc.put(string(rune('a'+39)), Mask{7}); m[0] != 39 {
		t.Error("put replaced an existing mask")
	}
}
