package grammar

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

// byteVocab is a vocabulary of the 256 single bytes plus an end token
// (id 256): small enough to compile anything quickly.
func byteVocab() *Vocab {
	pieces := make([][]byte, 257)
	for i := 0; i < 256; i++ {
		pieces[i] = []byte{byte(i)}
	}
	return NewVocab(pieces, []int32{256})
}

func TestCompileKinds(t *testing.T) {
	v := byteVocab()
	cases := []struct {
		name     string
		spec     Spec
		accept   []string
		refuse   []string
		wantErr  error
		errMatch string
	}{
		{name: "schema", spec: Spec{Kind: KindJSONSchema, Source: testSchemas["person"]},
			accept: []string{`{"name":"Ann","age":30}`}, refuse: []string{`{"age":30}`, `[]`}},
		{name: "json_object", spec: Spec{Kind: KindJSONObject},
			accept: []string{`{}`, `{"a":[1,"x"],"b":{"c":null}}`}, refuse: []string{`[1]`, `1`, `"x"`, `{"a":}`}},
		{name: "any_json", spec: Spec{Kind: KindAnyJSON},
			accept: []string{`[1]`, `1`, `{"a":true}`}, refuse: []string{`{`, `tru`}},
		{name: "regex", spec: Spec{Kind: KindRegex, Source: `[a-c]{2}\d`},
			accept: []string{"ab1", "cc9"}, refuse: []string{"ab", "abc1"}},
		{name: "choice", spec: Spec{Kind: KindChoice, Choices: []string{"yes", "no"}},
			accept: []string{"yes", "no"}, refuse: []string{"y", "yesno", "maybe"}},
		{name: "prefix and suffix", spec: Spec{Kind: KindJSONSchema, Source: `{"type":"object","properties":{"n":{"const":1}},"required":["n"]}`, Prefix: "<call>\n", Suffix: "\n</call>"},
			accept: []string{"<call>\n{\"n\":1}\n</call>"}, refuse: []string{`{"n":1}`, "<call>\n{\"n\":1}"}},
		{name: "prefix around gbnf", spec: Spec{Kind: KindGBNF, Source: `root ::= "a"`, Prefix: "x"}, wantErr: ErrUnsupported},
		{name: "unknown kind", spec: Spec{Kind: "xml"}, wantErr: ErrUnsupported},
		{name: "bad regex", spec: Spec{Kind: KindRegex, Source: `a(`}, wantErr: ErrSyntax},
		{name: "unsupported schema keyword", spec: Spec{Kind: KindJSONSchema, Source: `{"type":"string","format":"ipv6"}`},
			wantErr: ErrUnsupported, errMatch: "format"},
		{name: "empty choice", spec: Spec{Kind: KindChoice}, wantErr: ErrSyntax},
		{name: "source too large", spec: Spec{Kind: KindRegex, Source: strings.Repeat("a", 64<<10+1)},
			wantErr: ErrTooLarge, errMatch: "bytes"},
		{name: "choices too large", spec: Spec{Kind: KindChoice, Choices: []string{strings.Repeat("a", 40<<10), strings.Repeat("b", 40<<10)}},
			wantErr: ErrTooLarge},
		{name: "too many states", spec: Spec{Kind: KindRegex, Source: `([a-z]{1000}){17}`},
			wantErr: ErrTooLarge, errMatch: "states"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compile(tc.spec, v, Limits{})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errMatch) {
					t.Fatalf("err = %v, want %v containing %q", err, tc.wantErr, tc.errMatch)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.VocabSize() != v.Size() {
				t.Fatalf("VocabSize %d, want %d", c.VocabSize(), v.Size())
			}
			d := c.(*Index).DFA()
			for _, s := range tc.accept {
				if !d.Match([]byte(s)) {
					t.Errorf("%q refused", s)
				}
			}
			for _, s := range tc.refuse {
				if d.Match([]byte(s)) {
					t.Errorf("%q accepted", s)
				}
			}
		})
	}
}

// TestCompileGBNFRoute: the gbnf kind is CompileGBNF's answer, not a
// regex or schema compile.
func TestCompileGBNFRoute(t *testing.T) {
	v := byteVocab()
	const src = `root ::= "a"`
	want, wantErr := CompileGBNF(src, v)
	got, err := Compile(Spec{Kind: KindGBNF, Source: src}, v, Limits{})
	if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("err = %v, CompileGBNF says %v", err, wantErr)
	}
	if (got == nil) != (want == nil) {
		t.Fatalf("constraint %v, CompileGBNF gives %v", got, want)
	}
}

func TestCacheLimitsStates(t *testing.T) {
	c := NewCacheLimits(byteVocab(), 4, Limits{MaxStates: 5})
	if _, err := c.Get(Spec{Kind: KindRegex, Source: "abc"}); err != nil {
		t.Fatalf("4 states under a bound of 5: %v", err)
	}
	if _, err := c.Get(Spec{Kind: KindRegex, Source: "abcdefgh"}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("9 states under a bound of 5: err = %v", err)
	}
}

func TestCacheReuseAndLRU(t *testing.T) {
	c := NewCache(byteVocab(), 2)
	a := Spec{Kind: KindChoice, Choices: []string{"x", "y"}}
	b := Spec{Kind: KindChoice, Choices: []string{"xy"}} // same bytes joined: a different spec
	d := Spec{Kind: KindRegex, Source: "x|y"}
	get := func(s Spec) Constraint {
		t.Helper()
		k, err := c.Get(s)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	ca, cb := get(a), get(b)
	if ca == cb {
		t.Fatal("two specs share one constraint")
	}
	if get(a) != ca {
		t.Fatal("the same spec compiled twice")
	}
	get(d) // evicts b, the least recently used
	if c.Len() != 2 {
		t.Fatalf("Len = %d, want 2", c.Len())
	}
	if get(a) != ca {
		t.Fatal("a (recently used) was evicted")
	}
	if get(b) == cb {
		t.Fatal("b was not evicted")
	}
}

func TestCacheRemembersErrors(t *testing.T) {
	c := NewCache(byteVocab(), 0)
	s := Spec{Kind: KindRegex, Source: "(("}
	_, err1 := c.Get(s)
	_, err2 := c.Get(s)
	if err1 == nil || err1 != err2 {
		t.Fatalf("errors %v / %v, want one remembered error", err1, err2)
	}
}

// TestCacheSingleFlight: concurrent Gets of one spec all receive the one
// compiled constraint (a second compile would be a second Index).
func TestCacheSingleFlight(t *testing.T) {
	c := NewCache(byteVocab(), 8)
	s := Spec{Kind: KindJSONSchema, Source: testSchemas["refs"]}
	const n = 16
	got := make([]Constraint, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k, err := c.Get(s)
			if err != nil {
				t.Error(err)
			}
			got[i] = k
		}(i)
	}
	wg.Wait()
	for i := 1; i < n; i++ {
		if got[i] != got[0] {
			t.Fatalf("Get %d returned another constraint", i)
		}
	}
}

// BenchmarkCacheCompile is the first-use cost of a typical schema through
// the cache front door (DFA compile + Index, masks filled lazily), and
// BenchmarkCacheHit a later request's.
func BenchmarkCacheCompile(b *testing.B) {
	v := loadVocab(b, "ggml-vocab-qwen3.gguf")
	for _, name := range []string{"person", "refs", "nested"} {
		b.Run(name, func(b *testing.B) {
			s := Spec{Kind: KindJSONSchema, Source: testSchemas[name]}
			for i := 0; i < b.N; i++ {
				if _, err := NewCache(v, 1).Get(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCacheHit(b *testing.B) {
	c := NewCache(byteVocab(), 0)
	s := Spec{Kind: KindJSONSchema, Source: testSchemas["person"]}
	if _, err := c.Get(s); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Get(s); err != nil {
			b.Fatal(err)
		}
	}
}
