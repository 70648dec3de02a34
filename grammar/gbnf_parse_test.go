package grammar

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGBNFSyntax checks each construct of the format on strings it must
// accept and refuse (byte by byte through the recognizer).
func TestGBNFSyntax(t *testing.T) {
	for _, tc := range []struct {
		name, src      string
		accept, refuse []string
	}{
		{"escapes", `root ::= "a\n\t\r\"\\\x41\u00e9\U0001F600\[\]\-\/"`,
			[]string{"a\n\t\r\"\\Aé😀[]-/"}, []string{"a", "a\\n"}},
		{"raw utf8", `root ::= "日本" [é-ü]`, []string{"日本é", "日本ü", "日本ñ"}, []string{"日本e", "日本ÿ", "日"}},
		{"classes", `root ::= [a-c0-9]+ [^x-z] [\x41-\x43\]\-]`,
			[]string{"a0!A", "cc9éC", "bw]", "b1w-"}, []string{"x!A", "axA", "a0!D", "a0xA", "b1x-"}},
		{"class edge dash", `root ::= [-a] [a-]`, []string{"-a", "a-", "--"}, []string{"b-", "a"}},
		{"any", `root ::= . .`, []string{"ab", "é😀", "\n\x00"}, []string{"a", "abc", "\xff\xfe", "\xed\xa0\x80a"}},
		{"groups", `root ::= ("ab" | "c")* "d"`, []string{"d", "abd", "cabcd"}, []string{"", "ad", "abc"}},
		{"repetitions", `root ::= "a"{2} "b"{1,} "c"{0,2} "d"{ 1 , 3 } "e"?`,
			[]string{"aabd", "aabbbccddde", "aabcdd"}, []string{"abd", "aad", "aabcccd", "aabdddd", "aabdee"}},
		{"repeat of a group", `root ::= ("x" [0-9]){2,3}`, []string{"x1x2", "x1x2x3"}, []string{"x1", "x1x2x3x4", "x1x"}},
		{"plus of a literal", `root ::= "ab"+`, []string{"ab", "abab"}, []string{"", "aba"}},
		{"comments and multi-line rules", "# a greeting\nroot ::= greeting\n   \" \" name   # trailing comment\ngreeting ::= \"hi\"\n  | \"hello\"\nname ::= [A-Z] [a-z]*\n",
			[]string{"hi Ann", "hello B"}, []string{"hi ann", "hey Ann", "hiAnn"}},
		{"recursion", `root ::= "(" root ")" | ""`, []string{"", "()", "((()))"}, []string{"(", "())", "(()"}},
		{"empty alternative", `root ::= "a" | `, []string{"", "a"}, []string{"aa"}},
		{"names", "root ::= my-rule_2\nmy-rule_2 ::= \"z\"", []string{"z"}, []string{""}},
		{"forward references", "root ::= b a\na ::= \"a\"\nb ::= \"b\"", []string{"ba"}, []string{"ab"}},
		{"right recursion", "root ::= item\nitem ::= \"x\" item | \"x\"", []string{"x", strings.Repeat("x", 2000)}, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compileGBNFTest(t, tc.src, byteVocab())
			for _, s := range tc.accept {
				if !gbnfAccepts(c, s) {
					t.Errorf("%q refused", s)
				}
			}
			for _, s := range tc.refuse {
				if gbnfAccepts(c, s) {
					t.Errorf("%q accepted", s)
				}
			}
		})
	}
}

// TestGBNFErrors checks that every refused grammar gets a clear error of
// the right kind.
func TestGBNFErrors(t *testing.T) {
	for _, tc := range []struct {
		src  string
		kind error
		msg  string
	}{
		{``, ErrUnsupported, "no root rule"},
		{`rot ::= "a"`, ErrUnsupported, "no root rule"},
		{"root ::= foo\n", ErrUnsupported, `rule "foo" (used on line 1) is not defined`},
		{"\n\nroot ::= \"abc", ErrSyntax, "line 3 column 10: unterminated string"},
		{`root ::= [a`, ErrSyntax, "[ without ]"},
		{`root ::= ("a"`, ErrSyntax, "( without )"},
		{"root ::= \"a\"\nroot ::= \"b\"", ErrSyntax, `line 2 column 1: rule "root" defined twice`},
		{`root = "a"`, ErrSyntax, "::= expected"},
		{`root ::= "\q"`, ErrSyntax, `unknown escape \q`},
		{`root ::= "\x4"`, ErrSyntax, `bad \x escape`},
		{`root ::= "\uD800"`, ErrSyntax, `bad \u escape`},
		{`root ::= [z-a]`, ErrSyntax, "reversed"},
		{`root ::= []`, ErrSyntax, "class matches nothing"},
		{`root ::= [^\x00-\U0010FFFF]`, ErrSyntax, "class matches nothing"},
		{`root ::= *`, ErrSyntax, "without an item"},
		{`root ::= "a"{3,2}`, ErrSyntax, "out of range"},
		{`root ::= "a"{1001}`, ErrSyntax, "out of range"},
		{`root ::= "a"{x}`, ErrSyntax, "count expected"},
		{`root ::= "a"{2`, ErrSyntax, "} expected"},
		{`root ::= "a" )`, ErrSyntax, `unexpected ')'`},
		{`root ::= "a" ! "b"`, ErrSyntax, `unexpected '!'`},
		{"root ::= \"\xff\"", ErrSyntax, "not UTF-8"},
		{"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", ErrUnsupported, `left recursion through rule "expr"`},
		{"root ::= a\na ::= b \"x\"\nb ::= a | \"y\"", ErrUnsupported, "left recursion"},
		{"root ::= e root \"x\" | \"y\"\ne ::= \"e\"?", ErrUnsupported, `left recursion through rule "root"`},
		{`root ::= ("a"?)*`, ErrUnsupported, "left recursion"},
		{`root ::= "a"**`, ErrUnsupported, "left recursion"},
		{`root ::= "a" root`, ErrUnsupported, `rule "root" produces no finite string`},
		{`root ::= <[1234]>`, ErrUnsupported, "token references"},
		{"root ::= " + strings.Repeat(`"a"{0,1000} `, 400), ErrTooLarge, "symbols"},
	} {
		_, err := CompileGBNF(tc.src, byteVocab())
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%.40q: %v, want %v containing %q", tc.src, err, tc.kind, tc.msg)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "grammar: ") {
			t.Errorf("%.40q: %v lacks the package prefix", tc.src, err)
		}
	}
	if _, err := CompileGBNF(`root ::= "a"`, nil); err == nil {
		t.Error("nil vocabulary accepted")
	}
}

// TestGBNFBounds checks the recognizer's bounds: a prefix with more
// parses than maxGBNFStacks is refused (ErrTooLarge, and absent from the
// mask), and nesting deeper than maxGBNFDepth is refused while closing
// stays allowed.
func TestGBNFBounds(t *testing.T) {
	v := byteVocab()
	g := compileGBNFTest(t, `root ::= "a"{0,600} "a"{0,600} "b"`, v).Start()
	n := 0
	for ; n < 600; n++ {
		if !g.Mask().Has('a') {
			break
		}
		if err := g.Advance('a'); err != nil {
			t.Fatalf("a %d: %v", n, err)
		}
	}
	if n < 100 || n >= 600 {
		t.Fatalf("%d a's allowed, want a refusal past %d parses", n, maxGBNFStacks)
	}
	if err := g.Advance('a'); !errors.Is(err, ErrTokenRejected) || !errors.Is(err, ErrTooLarge) {
		t.Errorf("a past the bound: %v", err)
	}
	if err := g.Advance('b'); err != nil || !g.Done() {
		t.Errorf("b: %v, done %v", err, g.Done())
	}

	g = compileGBNFTest(t, readGBNF(t, "balanced"), v).Start()
	depth := 0
	for ; depth < 2*maxGBNFDepth; depth++ {
		if !g.Mask().Has('(') {
			break
		}
		if err := g.Advance('('); err != nil {
			t.Fatal(err)
		}
	}
	if depth < maxGBNFDepth/4 || depth >= maxGBNFDepth {
		t.Fatalf("nesting stopped at %d", depth)
	}
	// The stacks that would open one more level were dropped when the
	// last one opened: "(" is now simply not allowed.
	if err := g.Advance('('); !errors.Is(err, ErrTokenRejected) {
		t.Errorf("( past the depth: %v", err)
	}
	for i := 0; i < depth; i++ {
		if err := g.Advance(')'); err != nil {
			t.Fatalf(") %d: %v", i, err)
		}
	}
	if !g.Mask().Has(256) {
		t.Error("balanced output: end not allowed")
	}
}

// TestGBNFMemoFull runs mask and walk with a memo too small for the
// grammar, so the arena fallback does the work, against the reference.
func TestGBNFMemoFull(t *testing.T) {
	saved := maxMemoStates
	maxMemoStates = 3
	defer func() { maxMemoStates = saved }()
	c := compileGBNFTest(t, readGBNF(t, "json"), mixedVocab())
	r := rand.New(rand.NewPCG(3, 3))
	var states [][]int32
	for range 5 {
		if out := gbnfWalk(t, c, r, 15, &states); checkJSON(string(out)) != nil {
			t.Errorf("%q is not JSON", out)
		}
	}
	for _, s := range states {
		if got, want := c.computeMask(&recognizer{g: c.g}, s), c.referenceMask(s); !equalMasks(got, want) {
			t.Fatalf("state %v: %d tokens, reference %d", s, got.Count(), want.Count())
		}
	}
}

// FuzzGBNF compiles fuzzed grammars; for each one that compiles, a short
// random walk over a byte vocabulary must be accepted byte by byte and the
// trie mask must equal the reference on the states it met.
func FuzzGBNF(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join("testdata", "gbnf", "*.gbnf"))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), uint64(1))
	}
	f.Add(`root ::= ("a" | [b-d]{1,3} x)* "."`+"\nx ::= \"é\"?", uint64(2))
	v := byteVocab()
	f.Fuzz(func(t *testing.T, src string, seed uint64) {
		if len(src) > 2000 {
			return
		}
		c0, err := CompileGBNF(src, v)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error of no known kind: %v", err)
			}
			return
		}
		c := c0.(*gbnfConstraint)
		var states [][]int32
		out := gbnfWalk(t, c, rand.New(rand.NewPCG(seed, 5)), 20, &states)
		if t.Failed() {
			return
		}
		if !gbnfAccepts(c, string(out)) {
			t.Fatalf("walk output %q refused", out)
		}
		for _, s := range states[:min(len(states), 5)] {
			if !equalMasks(c.computeMask(&recognizer{g: c.g}, s), c.referenceMask(s)) {
				t.Fatalf("state %v: mask differs from the reference", s)
			}
		}
	})
}

// TestGBNFLongChain compiles a chain of rules each defined before the one
// it refers to (the order that makes a naive fixpoint quadratic) and
// checks the shortest output length the recognizer steers by.
func TestGBNFLongChain(t *testing.T) {
	const n = 20000
	var b strings.Builder
	b.WriteString("root ::= r1\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "r%d ::= \"a\" r%d | \"bb\" r%d\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "r%d ::= \"y\"\n", n)
	c := compileGBNFTest(t, b.String(), byteVocab())
	if d := c.Start().(*gbnfGuide).distance(); d != n {
		t.Errorf("shortest output %d bytes, want %d", d, n)
	}
}
