package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var testSchemas = map[string]string{
	"person": `{"type":"object","properties":{
		"name":{"type":"string","minLength":1,"maxLength":12},
		"age":{"type":"integer"},
		"height":{"type":"number"},
		"email":{"type":["string","null"],"maxLength":20},
		"admin":{"type":"boolean"},
		"role":{"enum":["user","admin",3,null]}},
		"required":["name","age"],"additionalProperties":false}`,
	"list": `{"type":"array","items":{"type":"string","maxLength":5},"minItems":2,"maxItems":4}`,
	"refs": `{"$defs":{"point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}},
		"type":"object","properties":{
			"kind":{"const":"shape"},
			"points":{"type":"array","items":{"$ref":"#/$defs/point"},"maxItems":3},
			"label":{"anyOf":[{"type":"string","maxLength":8},{"type":"integer"},{"type":"null"}]}},
		"required":["kind","points"]}`,
	"optional": `{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"array","maxItems":0}}}`,
	"free":     `{"title":"anything","description":"any JSON of depth 2"}`,
	"nested":   `{"type":"object","properties":{"count":{"type":"integer","minimum":-5,"exclusiveMaximum":1000},"meta":{"type":"object","properties":{"tags":{"type":"array","items":{"enum":["a","b"]}},"extra":{}},"required":["extra"]}},"required":["meta"]}`,
	"empty":    `{"type":"object","required":[]}`,
	"pattern": `{"type":"object","properties":{
		"code":{"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"},
		"near":{"type":"string","pattern":"a.b"},
		"quoted":{"type":"string","pattern":"^(\"|\\\\|\n|[^x])+$"},
		"word":{"type":"string","pattern":"^\\S+ \\w*$"}},
		"required":["code","near","quoted","word"]}`,
}

func compileValidator(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func validate(sch *jsonschema.Schema, out []byte) error {
	if !json.Valid(out) {
		return errors.New("not JSON")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// TestSchemaRandomWalks samples outputs token by token through the masks
// of a real 32k vocabulary and validates every one with
// santhosh-tekuri/jsonschema, an independent validator.
func TestSchemaRandomWalks(t *testing.T) {
	for _, vocab := range []struct {
		file  string
		walks int
	}{{"ggml-vocab-llama-spm.gguf", 20}, {"ggml-vocab-qwen3.gguf", 6}} {
		v := loadVocab(t, vocab.file)
		for name, schema := range testSchemas {
			t.Run(vocab.file+"/"+name, func(t *testing.T) {
				schemaWalks(t, v, name, schema, vocab.walks)
			})
		}
	}
}

func schemaWalks(t *testing.T, v *Vocab, name, schema string, walks int) {
	d, err := CompileSchema([]byte(schema), SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sch := compileValidator(t, schema)
	ix := NewIndex(d, v)
	r := rand.New(rand.NewPCG(20, 1))
	distinct := map[string]bool{}
	for i := 0; i < walks; i++ {
		out := randomWalk(t, ix, r, 40)
		if err := validate(sch, out); err != nil {
			t.Fatalf("walk %d: %q does not validate: %v", i, out, err)
		}
		distinct[string(out)] = true
	}
	if len(distinct) < walks/4 && name != "empty" {
		t.Errorf("only %d distinct outputs in %d walks", len(distinct), walks)
	}
}

// TestSchemaExamples checks the DFA on hand-written instances, valid and
// invalid, against the independent validator (so that the DFA is not
// merely a subset that rejects everything).
func TestSchemaExamples(t *testing.T) {
	cases := []struct {
		schema, inst string
		want         bool
	}{
		{"person", `{"name":"Ann","age":30}`, true},
		{"person", `{"name":"Ann","age":30,"height":1.5e2,"email":null,"admin":true,"role":3}`, true},
		{"person", `{"name":"Ann","age":-0}`, true},
		{"person", `{"name":"","age":30}`, false},
		{"person", `{"age":30}`, false},
		{"person", `{"name":"Ann","age":3.5}`, false},
		{"person", `{"name":"Ann","age":30,"role":"guest"}`, false},
		{"person", `{"name":"Ann\u00e9\"","age":30}`, true},
		{"list", `["a","bc"]`, true},
		{"list", `["a"]`, false},
		{"list", `["a","b","c","d","e"]`, false},
		{"list", `["abcdef","b"]`, false},
		{"refs", `{"kind":"shape","points":[{"x":1,"y":2}],"label":7}`, true},
		{"refs", `{"kind":"shape","points":[{"x":1}]}`, false},
		{"optional", `{}`, true},
		{"optional", `{"b":null,"c":[]}`, true},
		{"optional", `{"c":[1]}`, false},
		{"free", `[{"a":1,"b":"x"},null,[2]]`, true},
		{"free", `[[[1]]]`, false}, // deeper than AnyDepth 2
		{"empty", `{}`, true},
		{"pattern", `{"code":"AB-123","near":"xxaébz","quoted":"\"\\\n","word":"aé! b_1"}`, true},
		// Valid, but pattern strings are produced with raw runes only
		// (a \u escape of a printable rune is not in the DFA's subset).
		{"pattern", `{"code":"AB-123","near":"xxa\u00e9bz","quoted":"\"\\\n","word":"a\u00e9! b_1"}`, false},
		{"pattern", `{"code":"AB-1234","near":"ab","quoted":"y","word":"a "}`, false},
		{"pattern", `{"code":"AB-123","near":"acb","quoted":"y","word":"a "}`, true},
	}
	for _, c := range cases {
		d, err := CompileSchema([]byte(testSchemas[c.schema]), SchemaOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Match([]byte(c.inst)); got != c.want {
			t.Errorf("%s on %s: dfa %v, want %v", c.schema, c.inst, got, c.want)
		}
		if valid := validate(compileValidator(t, testSchemas[c.schema]), []byte(c.inst)) == nil; c.want && !valid {
			t.Errorf("%s on %s: the validator disagrees with the test table", c.schema, c.inst)
		}
	}
}

func TestSchemaRefused(t *testing.T) {
	for _, s := range []string{
		`{"type":"string","pattern":"a^b"}`,
		`{"type":"string","pattern":"a$b"}`,
		`{"type":"string","pattern":"a","maxLength":3}`,
		`{"type":"string","pattern":"(?i)a"}`,
		`{"type":"string","format":"ipv6"}`,
		`{"type":"string","format":"date","maxLength":10}`,
		`{"type":"integer","minimum":0.5}`,
		`{"type":"number","minimum":0.2,"maximum":0.7}`, // no integer, no whole unit
		`{"type":"number","minimum":1e300}`,
		`{"type":"number","exclusiveMinimum":1,"exclusiveMaximum":2}`,
		`{"type":"number","minimum":9.5,"exclusiveMaximum":10}`,
		`{"type":"integer","minimum":3,"maximum":2}`,
		`{"oneOf":[{"type":"string"}]}`,
		`{"allOf":[{"type":"string"}]}`,
		`{"not":{"type":"string"}}`,
		`{"type":"object","patternProperties":{"a":{}}}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`,
		`{"properties":{"a":{}}}`,
		`{"$defs":{"n":{"type":"array","items":{"$ref":"#/$defs/n"}}},"$ref":"#/$defs/n"}`,
		`{"$ref":"#/$defs/missing"}`,
		`{"$ref":"http://example.com/s.json"}`,
		`{"type":"uuid"}`,
		`{"enum":["a",1],"type":"string"}`,
		`{"type":"array","uniqueItems":true}`,
		`false`,
		`{"type":"string"`,
	} {
		_, err := CompileSchema([]byte(s), SchemaOptions{})
		if err == nil {
			t.Errorf("%s: accepted", s)
		} else if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrSyntax) {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// TestRegexRandomWalks is TestSchemaRandomWalks for regexes, checked with
// Go's regexp, on a byte-level BPE vocabulary too.
func TestRegexRandomWalks(t *testing.T) {
	pats := []string{`\d{3}-\d{4}`, `(yes|no|maybe)`, `[a-z]+@[a-z]+\.(com|org)`, `[^"\n]{2,10}`, `(ab|c)*d?é`}
	for _, vocabName := range []string{"ggml-vocab-llama-spm.gguf", "ggml-vocab-qwen3.gguf"} {
		v := loadVocab(t, vocabName)
		for _, pat := range pats {
			t.Run(fmt.Sprintf("%s/%s", vocabName, pat), func(t *testing.T) {
				d, err := CompileRegex(pat)
				if err != nil {
					t.Fatal(err)
				}
				re := regexp.MustCompile(`^(?:` + pat + `)$`)
				ix := NewIndex(d, v)
				r := rand.New(rand.NewPCG(9, 9))
				for i := 0; i < 20; i++ {
					if out := randomWalk(t, ix, r, 20); !re.Match(out) {
						t.Fatalf("%q does not match", out)
					}
				}
			})
		}
	}
}

// TestMaskMatchesReference compares the trie walk with the plain per-token
// walk in every state reached by a few random walks.
func TestMaskMatchesReference(t *testing.T) {
	v := loadVocab(t, "ggml-vocab-qwen3.gguf")
	d, err := CompileSchema([]byte(testSchemas["refs"]), SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ix := NewIndex(d, v)
	for s := int32(0); int(s) < d.NumStates() && s < 200; s++ {
		got, want := ix.ComputeMask(s), ix.referenceMask(s)
		if !equalMasks(got, want) {
			t.Fatalf("state %d: %d tokens, reference %d", s, got.Count(), want.Count())
		}
	}
	if n := ix.Mask(0).Count(); n == 0 || n == v.Size() {
		t.Errorf("start state allows %d of %d tokens", n, v.Size())
	}
}

func equalMasks(a, b Mask) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestMatcherRefusesAndEnds checks Advance on forbidden tokens, the end
// token before completion, and Done on an output with no continuation.
func TestMatcherRefusesAndEnds(t *testing.T) {
	pieces := [][]byte{[]byte("a"), []byte("b"), []byte("ab"), nil, []byte("c")}
	v := NewVocab(pieces, []int32{3})
	d, err := CompileRegex(`ab?`)
	if err != nil {
		t.Fatal(err)
	}
	ix := NewIndex(d, v)
	m := ix.NewMatcher()
	if err := m.Advance(3); !errors.Is(err, ErrTokenRejected) {
		t.Fatalf("end token at start: %v", err)
	}
	if err := m.Advance(1); !errors.Is(err, ErrTokenRejected) {
		t.Fatalf("b at start: %v", err)
	}
	if mask := m.Mask(); !mask.Has(0) || !mask.Has(2) || mask.Has(1) || mask.Has(3) || mask.Has(4) {
		t.Fatalf("start mask %b", mask)
	}
	if err := m.Advance(0); err != nil || !m.Accepting() || m.Done() {
		t.Fatalf("after a: %v accepting %v done %v", err, m.Accepting(), m.Done())
	}
	if mask := m.Mask(); !mask.Has(1) || !mask.Has(3) || mask.Has(0) {
		t.Fatalf("mask after a %b", mask)
	}
	if err := m.Advance(1); err != nil || !m.Done() {
		t.Fatalf("after ab: %v done %v", err, m.Done())
	}
}

// FuzzSchema: any schema CompileSchema accepts must be honoured, so every
// output sampled from its DFA validates with the independent validator.
func FuzzSchema(f *testing.F) {
	for _, s := range testSchemas {
		f.Add(s, uint64(1))
	}
	f.Add(`{"type":"array","items":{"enum":[1,"a",{"b":[true]}]},"minItems":1}`, uint64(2))
	f.Add(`{"anyOf":[{"type":"integer"},{"type":"string","minLength":3}]}`, uint64(3))
	f.Add(`{"type":"integer","minimum":-12,"maximum":340}`, uint64(4))
	f.Add(`{"type":"string","pattern":"^[^a-c]\\S.(x|\"){2,3}"}`, uint64(5))
	f.Fuzz(func(t *testing.T, schema string, seed uint64) {
		if len(schema) > 400 {
			return
		}
		d, err := CompileSchema([]byte(schema), SchemaOptions{AnyDepth: 1})
		if err != nil {
			return
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
		if err != nil {
			t.Fatalf("accepted a schema that is not JSON: %v", err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("mem://schema.json", doc); err != nil {
			return
		}
		sch, err := c.Compile("mem://schema.json")
		if err != nil {
			return // invalid against the metaschema: the validator refuses it too
		}
		r := rand.New(rand.NewPCG(seed, 3))
		for i := 0; i < 5; i++ {
			out := sampleDFA(r, d, 30)
			if err := validate(sch, out); err != nil {
				t.Fatalf("%s: sampled %q does not validate: %v", schema, out, err)
			}
		}
	})
}

// TestIndexConcurrent shares one Index (and its lazily filled cache)
// between goroutines, as sequences of a batch would; run with -race.
func TestIndexConcurrent(t *testing.T) {
	v := loadVocab(t, "ggml-vocab-llama-spm.gguf")
	d, err := CompileSchema([]byte(testSchemas["refs"]), SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ix := NewIndex(d, v)
	sch := compileValidator(t, testSchemas["refs"])
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 4))
			for i := 0; i < 3; i++ {
				if err := validate(sch, randomWalk(t, ix, r, 30)); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestIntegerBounds checks bounded integers exhaustively on [-1300, 1300]
// against plain comparison, for bounds of every sign and digit count.
func TestIntegerBounds(t *testing.T) {
	bounds := []string{
		`"minimum":0`, `"minimum":7`, `"minimum":-15`, `"maximum":0`, `"maximum":99`, `"maximum":-100`,
		`"minimum":3,"maximum":1000`, `"minimum":-1001,"maximum":-9`, `"minimum":-57,"maximum":208`,
		`"exclusiveMinimum":9,"exclusiveMaximum":100`, `"minimum":5,"maximum":5`, `"minimum":190,"maximum":1210`,
	}
	for _, b := range bounds {
		schema := `{"type":"integer",` + b + `}`
		d, err := CompileSchema([]byte(schema), SchemaOptions{})
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		sch := compileValidator(t, schema)
		for x := -1300; x <= 1300; x++ {
			s := fmt.Sprint(x)
			want := validate(sch, []byte(s)) == nil
			if got := d.Match([]byte(s)); got != want {
				t.Fatalf("%s on %s: dfa %v, validator %v", schema, s, got, want)
			}
		}
		for _, s := range []string{"007", "-0", "+1", "1.0", "", "-"} {
			if d.Match([]byte(s)) {
				t.Errorf("%s accepts %q", schema, s)
			}
		}
		// Beyond the exhaustive window: far values on the allowed side.
		r := rand.New(rand.NewPCG(4, 4))
		for i := 0; i < 20; i++ {
			if out := sampleDFA(r, d, 25); validate(sch, out) != nil {
				t.Fatalf("%s: sampled %q does not validate", schema, out)
			}
		}
	}
}

// TestLongStringBound covers a DFA past the minimization budget (kept
// unminimized): the bound must still be exact.
func TestLongStringBound(t *testing.T) {
	d, err := CompileSchema([]byte(`{"type":"string","minLength":998,"maxLength":1000}`), SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for n := 990; n <= 1005; n++ {
		s := `"` + strings.Repeat("é", n-1) + `\n"`
		if got, want := d.Match([]byte(s)), n >= 998 && n <= 1000; got != want {
			t.Errorf("length %d: %v", n, got)
		}
	}
}

// TestAnyJSON: sampled outputs are valid JSON, and documents within the
// depth bound are accepted, deeper ones refused.
func TestAnyJSON(t *testing.T) {
	d, err := CompileAnyJSON(3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(6, 1))
	for i := 0; i < 300; i++ {
		if out := sampleDFA(r, d, 60); !json.Valid(out) {
			t.Fatalf("sampled %q is not JSON", out)
		}
	}
	for _, s := range []string{`[]`, `{}`, `[1,[2,{"a":3}],"x"]`, `{"a":{"b":[null,true,false,-1.5e3]},"c":"\u00e9\n"}`, `"é"`, `0`} {
		if !d.Match([]byte(s)) {
			t.Errorf("refuses %s", s)
		}
	}
	for _, s := range []string{`[[[[1]]]]`, `[1,]`, `{"a"}`, `[1 ]`, `01`, `"\x"`, "\"\x01\""} {
		if d.Match([]byte(s)) {
			t.Errorf("accepts %s", s)
		}
	}
}

// TestNumberBounds: numbers under every kind of bound, walked at random
// over bytes, all validate with the independent validator; and the walks
// reach both integers and fractions.
func TestNumberBounds(t *testing.T) {
	v := byteVocab()
	for _, schema := range []string{
		`{"type":"number","minimum":0}`,
		`{"type":"number","minimum":0,"maximum":1}`,
		`{"type":"number","minimum":-2.5,"maximum":3.25}`,
		`{"type":"number","exclusiveMinimum":-3,"exclusiveMaximum":0}`,
		`{"type":"number","exclusiveMinimum":0,"maximum":100}`,
		`{"type":"number","minimum":-2,"exclusiveMaximum":-0.5}`,
		`{"type":"number","maximum":-7.5}`,
		`{"type":"number","exclusiveMaximum":12,"maximum":13,"minimum":9.5}`,
		`{"type":"number","minimum":0.5,"maximum":0.75,"exclusiveMinimum":0}`,
		`{"type":["number","null"],"minimum":1.5,"maximum":1000}`,
	} {
		t.Run(schema, func(t *testing.T) {
			d, err := CompileSchema([]byte(schema), SchemaOptions{})
			if strings.Contains(schema, `"minimum":0.5,"maximum":0.75`) {
				if !errors.Is(err, ErrUnsupported) {
					t.Fatalf("a range narrower than a unit with no integer: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sch := compileValidator(t, schema)
			ix := NewIndex(d, v)
			r := rand.New(rand.NewPCG(7, uint64(len(schema))))
			var ints, fracs int
			for range 300 {
				out := randomWalk(t, ix, r, 2+r.IntN(8))
				if err := validate(sch, out); err != nil {
					t.Fatalf("%s: %v", out, err)
				}
				if bytes.Contains(out, []byte(".")) {
					fracs++
				} else if string(out) != "null" {
					ints++
				}
			}
			if ints == 0 || fracs == 0 {
				t.Fatalf("walks gave %d integers and %d fractions: both should occur", ints, fracs)
			}
		})
	}
}

// TestStringFormats: walks under every supported format validate with the
// independent validator asserting formats (not as annotations).
func TestStringFormats(t *testing.T) {
	v := byteVocab()
	for _, name := range formatNames() {
		t.Run(name, func(t *testing.T) {
			schema := `{"type":"string","format":"` + name + `"}`
			d, err := CompileSchema([]byte(schema), SchemaOptions{})
			if err != nil {
				t.Fatal(err)
			}
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
			if err != nil {
				t.Fatal(err)
			}
			c := jsonschema.NewCompiler()
			c.AssertFormat()
			if err := c.AddResource("mem://f.json", doc); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("mem://f.json")
			if err != nil {
				t.Fatal(err)
			}
			if validate(sch, []byte(`"not a `+name+`"`)) == nil {
				t.Fatalf("the validator does not assert %s", name)
			}
			ix := NewIndex(d, v)
			r := rand.New(rand.NewPCG(11, uint64(len(name))))
			for range 200 {
				out := randomWalk(t, ix, r, 4+r.IntN(60))
				if err := validate(sch, out); err != nil {
					t.Fatalf("%s: %v", out, err)
				}
			}
		})
	}
}
