package chat

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
	return Vars{Messages: msgs, AddGenerationPrompt: c.AddGenerationPrompt, Specials: sp, Kwargs: kw}
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
