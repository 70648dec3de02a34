package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"
)

// The reference test data: real chat templates (testdata/templates, each
// file as the model's tokenizer_config.json ships it, copied from
// llama.cpp's models/templates, which records the Hugging Face repository
// of each), the conversations they are rendered for
// (testdata/conversations.json), and @huggingface/jinja's output for them
// (testdata/expected.json, written by testdata/render.mjs).

type refSpec struct {
	Templates    map[string]Specials `json:"templates"`
	CommonKwargs json.RawMessage     `json:"common_kwargs"`
	Cases        []refCase           `json:"cases"`
}

// UnmarshalJSON of Specials reads the bos_token / eos_token names.
func (s *Specials) UnmarshalJSON(b []byte) error {
	var v struct {
		BOS string `json:"bos_token"`
		EOS string `json:"eos_token"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	s.BOS, s.EOS = v.BOS, v.EOS
	return nil
}

type refCase struct {
	Name                string          `json:"name"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	Kwargs              json.RawMessage `json:"kwargs"`
	Messages            []oaMessage     `json:"messages"`
	Tools               json.RawMessage `json:"tools"` // OpenAI's tool list, the `tools` variable when set
}

// oaMessage is an OpenAI chat message as the test data writes it.
type oaMessage struct {
	Role             string  `json:"role"`
	Content          *string `json:"content"`
	ReasoningContent string  `json:"reasoning_content"`
	Name             string  `json:"name"`
	ToolCallID       string  `json:"tool_call_id"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (m oaMessage) message() Message {
	out := Message{Role: m.Role, ReasoningContent: m.ReasoningContent, Name: m.Name, ToolCallID: m.ToolCallID}
	if m.Content != nil {
		out.Content = *m.Content
	}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return out
}

type refResult struct {
	Text  *string `json:"text"`
	Error *string `json:"error"`
}

func loadRefSpec(t *testing.T) refSpec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "conversations.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec refSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	if len(spec.Templates) < 6 || len(spec.Cases) < 5 {
		t.Fatalf("test data too small: %d templates, %d cases", len(spec.Templates), len(spec.Cases))
	}
	return spec
}

// caseVars merges the common and per-case kwargs (per-case wins).
func caseVars(t *testing.T, spec refSpec, c refCase, sp Specials) Vars {
	t.Helper()
	kw, err := DecodeKwargs(spec.CommonKwargs)
	if err != nil {
		t.Fatal(err)
	}
	extra, err := DecodeKwargs(c.Kwargs)
	if err != nil {
		t.Fatal(err)
	}
	if kw == nil {
		kw = extra
	} else {
		for k, v := range extra {
			kw[k] = v
		}
	}
	var msgs []Message
	for _, m := range c.Messages {
		msgs = append(msgs, m.message())
	}
	tools, err := DecodeTools(c.Tools)
	if err != nil {
		t.Fatal(err)
	}
	return Vars{Messages: msgs, AddGenerationPrompt: c.AddGenerationPrompt, Specials: sp, Kwargs: kw, Tools: tools}
}

// TestTemplatesMatchReference renders every template for every conversation
// and compares the text byte for byte with @huggingface/jinja's. A case the
// reference refuses (the template raises) must fail here too.
func TestTemplatesMatchReference(t *testing.T) {
	spec := loadRefSpec(t)
	b, err := os.ReadFile(filepath.Join("testdata", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]map[string]refResult
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	texts := 0
	for file, sp := range spec.Templates {
		src, err := os.ReadFile(filepath.Join("testdata", "templates", file))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := CompileTemplate(string(src), Limits{})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		tmpl.now = referenceDay // render.mjs fixes the reference's clock to this day
		for _, c := range spec.Cases {
			t.Run(file+"/"+c.Name, func(t *testing.T) {
				w, ok := want[file][c.Name]
				if !ok {
					t.Fatal("no expected output: regenerate testdata/expected.json (see render.mjs)")
				}
				got, err := tmpl.Render(caseVars(t, spec, c, sp))
				switch {
				case w.Error != nil:
					if err == nil {
						t.Fatalf("rendered %q; the reference fails with %q", got, *w.Error)
					}
				case err != nil:
					t.Fatalf("render: %v", err)
				case got != *w.Text:
					t.Fatalf("text differs from @huggingface/jinja\n got %q\nwant %q", got, *w.Text)
				default:
					texts++
				}
			})
		}
	}
	if texts < 50 {
		t.Fatalf("only %d texts compared", texts)
	}
}

// TestReferenceScriptUpToDate re-runs testdata/render.mjs and checks that
// expected.json is what the reference renderer writes today. It needs node
// and testdata/node_modules (npm ci in testdata); without them it skips,
// unless OENGINE_REQUIRE_NODE=1 (CI) makes it fail.
func TestReferenceScriptUpToDate(t *testing.T) {
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join("testdata", "node_modules", "@huggingface", "jinja"))
	if err != nil || modErr != nil {
		msg := "node or testdata/node_modules missing (run npm ci in model/chat/testdata)"
		if os.Getenv("OENGINE_REQUIRE_NODE") == "1" {
			t.Fatal(msg + " and OENGINE_REQUIRE_NODE=1")
		}
		t.Skip(msg)
	}
	cmd := exec.Command(node, "render.mjs")
	cmd.Dir = "testdata"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render.mjs: %v\n%s", err, stderr.String())
	}
	want, err := os.ReadFile(filepath.Join("testdata", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Fatal("testdata/expected.json is stale: regenerate it with node render.mjs > expected.json")
	}
}

// referenceDay is the clock of strftime_now in the reference renders
// (render.mjs): 2024-07-26 12:00 UTC.
func referenceDay() time.Time { return time.Date(2024, 7, 26, 12, 0, 0, 0, time.UTC) }

// TestStrftime: the directives against Python's strftime output for
// 2024-07-06 09:05:03 UTC (a Saturday), and an unknown directive kept.
func TestStrftime(t *testing.T) {
	at := time.Date(2024, 7, 6, 9, 5, 3, 0, time.UTC)
	for format, want := range map[string]string{
		"%Y-%m-%d":          "2024-07-06",
		"%d %b %Y":          "06 Jul 2024",
		"%A, %B %e, %y":     "Saturday, July  6, 24",
		"%a %h %j %I%p %Z":  "Sat Jul 188 09AM UTC",
		"%H:%M:%S %z %%":    "09:05:03 +0000 %",
		"%F %T %D %R":       "2024-07-06 09:05:03 07/06/24 09:05",
		"%Q and trailing %": "%Q and trailing %",
	} {
		if got := strftime(at, format); got != want {
			t.Errorf("strftime(%q) = %q, want %q", format, got, want)
		}
	}
}

// TestStrftimeNow: templates get strftime_now with the template's clock
// (gpt-oss's "Current date"), a request cannot replace it, and a bad call
// is a template error.
func TestStrftimeNow(t *testing.T) {
	tmpl, err := CompileTemplate(`{{ strftime_now("%Y-%m-%d") }}`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl.now = referenceDay
	if got, err := tmpl.Render(Vars{}); err != nil || got != "2024-07-26" {
		t.Fatalf("render = %q, %v", got, err)
	}
	if _, err := tmpl.Render(Vars{Kwargs: map[string]jinja.Value{"strftime_now": jinja.NewString("x")}}); !errors.Is(err, ErrReservedKwarg) {
		t.Fatalf("kwarg strftime_now: %v, want ErrReservedKwarg", err)
	}
	bad, err := CompileTemplate(`{{ strftime_now(3) }}`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Render(Vars{}); !errors.Is(err, ErrTemplate) {
		t.Fatalf("strftime_now(3): %v, want ErrTemplate", err)
	}
}

// TestRecursiveMacros: a template whose macros recurse renders (the
// recursion bounded by its data, as gpt-oss's over a tool's schema), and
// its macro calls are counted against Limits.MaxMacroCalls; the counting
// calls guardMacros inserts leave every template's text as it was, with
// either whitespace control on the macro tag.
func TestRecursiveMacros(t *testing.T) {
	src := `{% macro f(n) %}{% if n > 0 %}{{ n }},{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(30) }}`
	tmpl, err := CompileTemplate(src, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for n := 30; n > 0; n-- {
		want += strconv.Itoa(n) + ","
	}
	if got, err := tmpl.Render(Vars{}); err != nil || got != want {
		t.Fatalf("render = %q, %v; want %q", got, err, want)
	}
	small, err := CompileTemplate(src, Limits{MaxMacroCalls: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.Render(Vars{}); !errors.Is(err, ErrTemplateLimit) {
		t.Fatalf("31 calls under a limit of 10: %v, want ErrTemplateLimit", err)
	}
	for _, s := range []string{
		"{% macro g(x) %}\n  <{{ x }}>\n{% endmacro %}[{{ g(1) }}]",
		"{%- macro g(x) -%}\n  <{{ x }}>\n{%- endmacro -%}\n[{{ g(1) }}]",
		"{%- macro g(x) %}\n\t<{{ x }}>{% endmacro %} [{{ g(2) }}] {%- macro h() -%}  h {%- endmacro %}{{ h() }}",
	} {
		plain, err := jinja.Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		want, err := plain.RenderValues(nil)
		if err != nil {
			t.Fatal(err)
		}
		guarded, err := jinja.Compile(guardMacros(s))
		if err != nil {
			t.Fatal(err)
		}
		got, err := guarded.RenderValues(map[string]jinja.Value{macroGuard: jinja.NewCallable(macroGuard, func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
			return jinja.NewString(""), nil
		})})
		if err != nil || got != want {
			t.Fatalf("%q guarded renders %q, %v; want %q", s, got, err, want)
		}
	}
}

// TestRecursiveMacrosClientSchema: a client's tool schema drives gpt-oss's
// recursive macro; a deep one (9000 nested arrays, near encoding/json's
// nesting limit) renders without exhausting the stack, a lower macro
// budget turns it into ErrTemplateLimit, and a request cannot replace the
// counting call (a reserved kwarg).
func TestRecursiveMacrosClientSchema(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "templates", "openai-gpt-oss-120b.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	deep := func(n int) []jinja.Value {
		schema := strings.Repeat(`{"type":"array","items":`, n) + `{"type":"object"}` + strings.Repeat(`}`, n)
		tools, err := DecodeTools([]byte(`[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"x":` + schema + `}}}}]`))
		if err != nil {
			t.Fatal(err)
		}
		return tools
	}
	msgs := []Message{{Role: "user", Content: "hi"}}
	tmpl, err := CompileTemplate(string(src), Limits{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tmpl.now = referenceDay
	out, err := tmpl.Render(Vars{Messages: msgs, AddGenerationPrompt: true, Tools: deep(9000)})
	if err != nil || !strings.Contains(out, "type f = (_: {") {
		t.Fatalf("deep schema: %v (%d bytes)", err, len(out))
	}
	small, err := CompileTemplate(string(src), Limits{MaxMacroCalls: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.Render(Vars{Messages: msgs, AddGenerationPrompt: true, Tools: deep(500)}); !errors.Is(err, ErrTemplateLimit) {
		t.Fatalf("500 levels under a budget of 100 calls: %v, want ErrTemplateLimit", err)
	}
	if _, err := small.Render(Vars{Messages: msgs, Kwargs: map[string]jinja.Value{macroGuard: jinja.NewString("")}}); !errors.Is(err, ErrReservedKwarg) {
		t.Fatalf("kwarg %s: %v, want ErrReservedKwarg", macroGuard, err)
	}
}
