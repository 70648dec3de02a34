package toolcall

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"oengine/grammar"
)

func TestParse(t *testing.T) {
	cases := []struct {
		parser, text string
		content      string
		calls        []Call
	}{
		{"hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
			[]Call{{"get_weather", `{"city":"Paris"}`}}},
		{"hermes", "Let me check.\n<tool_call>\n{\"name\":\"a\",\"arguments\":{}}\n</tool_call>\n<tool_call>{\"name\":\"b\",\"arguments\":{\"x\":[1,2]}}</tool_call>", "Let me check.",
			[]Call{{"a", `{}`}, {"b", `{"x":[1,2]}`}}},
		{"hermes", "<tool_call>{\"name\":\"a\",\"arguments\":\"{\\\"k\\\":1}\"}</tool_call>", "", []Call{{"a", `{"k":1}`}}},
		{"hermes", "<tool_call>{\"name\":\"a\",\"arguments\":{\"k\":1}}", "", []Call{{"a", `{"k":1}`}}}, // unclosed at the end
		{"hermes", "no call here", "no call here", nil},
		{"hermes", "<tool_call>not json</tool_call>", "<tool_call>not json</tool_call>", nil},
		{"hermes", "<tool_call>{\"arguments\":{}}</tool_call>", "<tool_call>{\"arguments\":{}}</tool_call>", nil}, // no name
		{"llama3_json", `{"name": "get_weather", "parameters": {"city": "Paris"}}`, "", []Call{{"get_weather", `{"city":"Paris"}`}}},
		{"llama3_json", ` {"name":"a","parameters":{}}; {"name":"b","arguments":{"x":1}} `, "", []Call{{"a", `{}`}, {"b", `{"x":1}`}}},
		{"llama3_json", `The answer is {"name":"a"}`, `The answer is {"name":"a"}`, nil},
		{"llama3_json", `{"name":"a","parameters":{}} and more`, `{"name":"a","parameters":{}} and more`, nil},
		{"llama3_json", `{"foo":1}`, `{"foo":1}`, nil},
		{"mistral", `[TOOL_CALLS][{"name":"a","arguments":{"x":1}},{"name":"b","arguments":{}}]`, "", []Call{{"a", `{"x":1}`}, {"b", `{}`}}},
		{"mistral", ` [{"name":"a","arguments":{"x":1}}]`, "", []Call{{"a", `{"x":1}`}}}, // marker lost as a control token
		{"mistral", `Sure. [TOOL_CALLS] [{"name":"a","arguments":{}}]`, "Sure.", []Call{{"a", `{}`}}},
		{"mistral", `[1, 2, 3]`, `[1, 2, 3]`, nil},
		{"mistral", `plain text`, `plain text`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.parser+"/"+tc.text, func(t *testing.T) {
			content, calls := ByName(tc.parser).Parse(tc.text)
			if content != tc.content || !slices.Equal(calls, tc.calls) {
				t.Fatalf("got %q %v, want %q %v", content, calls, tc.content, tc.calls)
			}
		})
	}
}

func TestSafePrefix(t *testing.T) {
	cases := []struct {
		parser, text string
		want         int
	}{
		{"hermes", "Hello", 5},
		{"hermes", "Hello <tool", 6},
		{"hermes", "Hello <tool_call>{\"na", 6},
		{"hermes", "a < b", 5},
		{"llama3_json", "  {\"name\"", 0},
		{"llama3_json", "  ", 0},
		{"llama3_json", "Sure {", 6},
		{"mistral", "[{", 0},
		{"mistral", "Hi [TOOL_C", 3},
		{"mistral", "Hi [TOOL_CALLS][", 3},
	}
	for _, tc := range cases {
		if got := ByName(tc.parser).SafePrefix(tc.text); got != tc.want {
			t.Errorf("%s SafePrefix(%q) = %d, want %d", tc.parser, tc.text, got, tc.want)
		}
	}
}

func TestForTemplate(t *testing.T) {
	cases := map[string]string{
		`{{- "<tool_call>\n" }}`: "hermes",
		`{{ '[TOOL_CALLS]' }}`:   "mistral",
		`Environment: ipython {"name": function name, "parameters": ...}`: "llama3_json",
		`{{ messages }}`: "",
	}
	for tmpl, want := range cases {
		p := ForTemplate(tmpl)
		if got := map[bool]string{true: ""}[p == nil]; p != nil {
			got = p.Name()
			if got != want {
				t.Errorf("ForTemplate(%q) = %q, want %q", tmpl, got, want)
			}
		} else if want != "" {
			t.Errorf("ForTemplate(%q) = nil, want %q", tmpl, want)
		}
	}
}

// byteVocab is the 256 single bytes plus an end token (id 256).
func byteVocab() *grammar.Vocab {
	pieces := make([][]byte, 257)
	for i := range 256 {
		pieces[i] = []byte{byte(i)}
	}
	return grammar.NewVocab(pieces, []int32{256})
}

// TestForcedParses: every output the forced constraint allows (seeded
// random walks through its automaton) parses into exactly one call of one
// of the tools, with arguments that follow the tool's parameters.
func TestForcedParses(t *testing.T) {
	tools := []Tool{
		{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":8},"unit":{"enum":["c","f"]}},"required":["city"]}`)},
		{Name: "noop"},
	}
	v := byteVocab()
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p := ByName(name)
			schema, prefix, suffix, err := p.Forced(tools)
			if err != nil {
				t.Fatal(err)
			}
			c, err := grammar.Compile(grammar.Spec{Kind: grammar.KindJSONSchema, Source: string(schema), Prefix: prefix, Suffix: suffix}, v, grammar.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			seen := map[string]bool{}
			for walk := 0; walk < 40; walk++ {
				out := walkOut(t, c, r)
				content, calls := p.Parse(out)
				if content != "" || len(calls) != 1 {
					t.Fatalf("%q parsed to %q %v", out, content, calls)
				}
				seen[calls[0].Name] = true
				var args map[string]any
				if err := json.Unmarshal([]byte(calls[0].Arguments), &args); err != nil {
					t.Fatalf("arguments %q: %v", calls[0].Arguments, err)
				}
				if calls[0].Name == "get_weather" {
					if city, ok := args["city"].(string); !ok || utf8.RuneCountInString(city) > 8 {
						t.Fatalf("arguments %q do not follow the parameters", calls[0].Arguments)
					}
				}
			}
			if !seen["get_weather"] || !seen["noop"] {
				t.Fatalf("walks called only %v", seen)
			}
		})
	}
	if _, _, _, err := ByName("hermes").Forced(nil); err != ErrNoTools {
		t.Fatalf("no tools: %v", err)
	}
}

// walkOut samples uniformly among the allowed tokens, preferring to end
// after 60 steps, until the guide is done.
func walkOut(t *testing.T, c grammar.Constraint, r *rand.Rand) string {
	t.Helper()
	g := c.Start()
	var b strings.Builder
	for step := 0; !g.Done(); step++ {
		if step > 5000 {
			t.Fatalf("walk did not end: %q", b.String())
		}
		m := g.Mask()
		var ids []int32
		for id := int32(0); id < 257; id++ {
			if m.Has(id) {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			t.Fatalf("dead end after %q", b.String())
		}
		id := ids[r.IntN(len(ids))]
		if step > 60 && m.Has(256) {
			id = 256
		} else if step > 60 {
			// Prefer closing characters to finish.
			for _, x := range ids {
				if x == '}' || x == ']' || x == '"' || x == '\n' || x == '<' || x == '/' {
					id = x
					break
				}
			}
		}
		if err := g.Advance(id); err != nil {
			t.Fatal(err)
		}
		if id < 256 {
			b.WriteByte(byte(id))
		}
	}
	return b.String()
}

// FuzzParse: no input panics a parser; every call has a name and
// arguments that are a compact JSON object; SafePrefix stays in range.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>",
		`{"name":"a","parameters":{"x":1}};{"name":"b"}`,
		`[TOOL_CALLS][{"name":"a","arguments":"{\"k\":[1]}"}]`,
		"<tool_call><tool_call>", "[", "{", "",
		`<tool_call>{"name":"a","arguments":"null"}</tool_call>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, n := range Names() {
			p := ByName(n)
			_, calls := p.Parse(text)
			for _, c := range calls {
				var obj map[string]any
				if c.Name == "" || json.Unmarshal([]byte(c.Arguments), &obj) != nil || obj == nil {
					t.Fatalf("%s: call %+v from %q", n, c, text)
				}
			}
			if k := p.SafePrefix(text); k < 0 || k > len(text) {
				t.Fatalf("%s: SafePrefix %d of %d bytes", n, k, len(text))
			}
		}
	})
}
