package openai

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"oengine/engine"
	"oengine/model/tokenizer"
	"oengine/sampling"
)

// familyTemplate reads a real chat template of the model/chat test set.
func familyTemplate(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "model", "chat", "testdata", "templates", file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// compileSchema compiles a JSON Schema with an independent validator.
func compileSchema(t *testing.T, schema map[string]any) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", schema); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validateJSON(t *testing.T, s *jsonschema.Schema, text string) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%q is not JSON: %v", text, err)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("%q does not validate: %v", text, err)
	}
}

var personSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"name":  map[string]any{"type": "string", "minLength": 1, "maxLength": 8},
		"age":   map[string]any{"type": "integer", "minimum": 0, "maximum": 150},
		"email": map[string]any{"type": []any{"string", "null"}, "maxLength": 12},
		"tags":  map[string]any{"type": "array", "items": map[string]any{"enum": []any{"x", "y"}}, "maxItems": 2},
	},
	"required":             []any{"name", "age"},
	"additionalProperties": false,
}

var weatherParams = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"city": map[string]any{"type": "string", "minLength": 1, "maxLength": 10},
		"unit": map[string]any{"enum": []any{"celsius", "fahrenheit"}},
	},
	"required": []any{"city", "unit"},
}

var timeParams = map[string]any{
	"type":       "object",
	"properties": map[string]any{"zone": map[string]any{"type": "string", "maxLength": 6}},
	"required":   []any{"zone"},
}

func weatherTools() []oa.ChatCompletionToolUnionParam {
	return []oa.ChatCompletionToolUnionParam{
		oa.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Description: oa.String("Current weather of a city"),
			Parameters: weatherParams}),
		oa.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time", Parameters: timeParams}),
	}
}

// TestResponseFormat: response_format json_schema and json_object through
// the official SDK give outputs that validate (seeded, temperature 1),
// streamed and not; schemas outside the subset are a 400.
func TestResponseFormat(t *testing.T) {
	h := startHarness(t, harnessOpts{template: familyTemplate(t, "Qwen-Qwen3-0.6B.jinja"), modelFile: "tiny-qwen3-q4_k_m.gguf"})
	c := h.client()
	sch := compileSchema(t, personSchema)
	rf := oa.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: personSchema, Strict: oa.Bool(true)}}}
	params := func(seed int64) oa.ChatCompletionNewParams {
		return oa.ChatCompletionNewParams{Model: "tiny", MaxCompletionTokens: oa.Int(200), N: oa.Int(3), Seed: oa.Int(seed), Temperature: oa.Float(1),
			Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("Describe a person as JSON.")}, ResponseFormat: rf}
	}
	t.Run("json_schema", func(t *testing.T) {
		for seed := int64(1); seed <= 3; seed++ {
			r, err := c.Chat.Completions.New(ctxT(t), params(seed))
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range r.Choices {
				if ch.FinishReason != "stop" {
					t.Fatalf("seed %d finish %q after %q", seed, ch.FinishReason, ch.Message.Content)
				}
				validateJSON(t, sch, ch.Message.Content)
			}
		}
	})
	t.Run("json_schema streamed", func(t *testing.T) {
		st := c.Chat.Completions.NewStreaming(ctxT(t), params(9))
		var acc oa.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 3 {
			t.Fatalf("%d choices", len(acc.Choices))
		}
		for _, ch := range acc.Choices {
			validateJSON(t, sch, ch.Message.Content)
		}
	})
	t.Run("json_object", func(t *testing.T) {
		p := params(4)
		p.MaxCompletionTokens = oa.Int(48)
		p.ResponseFormat = oa.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
		r, err := c.Chat.Completions.New(ctxT(t), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range r.Choices {
			if ch.FinishReason != "stop" {
				continue // a free string may run to the limit
			}
			var obj map[string]any
			if err := json.Unmarshal([]byte(ch.Message.Content), &obj); err != nil {
				t.Fatalf("%q: %v", ch.Message.Content, err)
			}
		}
	})
	t.Run("schema outside the subset is a 400", func(t *testing.T) {
		p := params(1)
		p.ResponseFormat = oa.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "x", Schema: map[string]any{"type": "string", "format": "ipv6"}}}}
		_, err := c.Chat.Completions.New(ctxT(t), p)
		var ae *oa.Error
		if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Code != "invalid_request" || ae.Param != "response_format" || !strings.Contains(ae.Message, "format") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("completions take response_format too", func(t *testing.T) {
		r, err := c.Completions.New(ctxT(t), oa.CompletionNewParams{Model: "tiny", Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String("JSON:")},
			MaxTokens: oa.Int(200), Seed: oa.Int(2)},
			option.WithJSONSet("response_format", map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "p", "schema": personSchema}}))
		if err != nil {
			t.Fatal(err)
		}
		validateJSON(t, sch, r.Choices[0].Text)
	})
	h.idle(t, false)
}

// TestToolCalls: on the tiny qwen3 (hermes syntax) and tiny llama (Llama
// 3.1 JSON syntax) models with their families' templates, tool_choice
// required and a named function return tool_calls that parse and follow
// the tool's parameters (finish_reason tool_calls, ids call_...),
// streamed as indexed deltas too; the round trip (the call and its
// result sent back) is accepted; bad choices are 400s.
func TestToolCalls(t *testing.T) {
	families := []struct {
		name, model, template, parser string
	}{
		{"qwen3", "tiny-qwen3-q4_k_m.gguf", "Qwen-Qwen3-0.6B.jinja", "hermes"},
		{"llama", "tiny-llama-f16.gguf", "meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3_json"},
	}
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			h := startHarness(t, harnessOpts{template: familyTemplate(t, fam.template), modelFile: fam.model})
			c := h.client()
			validators := map[string]*jsonschema.Schema{"get_weather": compileSchema(t, weatherParams), "get_time": compileSchema(t, timeParams)}
			base := func(seed int64) oa.ChatCompletionNewParams {
				return oa.ChatCompletionNewParams{Model: "tiny", MaxCompletionTokens: oa.Int(120), Seed: oa.Int(seed), Temperature: oa.Float(1),
					Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("What is the weather in Paris?")}, Tools: weatherTools()}
			}
			checkCalls := func(t *testing.T, ch oa.ChatCompletionChoice, only string) {
				t.Helper()
				if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) == 0 {
					t.Fatalf("finish %q, calls %+v, content %q", ch.FinishReason, ch.Message.ToolCalls, ch.Message.Content)
				}
				for _, tc := range ch.Message.ToolCalls {
					v, ok := validators[tc.Function.Name]
					if !ok || (only != "" && tc.Function.Name != only) {
						t.Fatalf("call of %q", tc.Function.Name)
					}
					if !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" {
						t.Fatalf("call %+v", tc)
					}
					validateJSON(t, v, tc.Function.Arguments)
				}
			}

			t.Run("model lists its parser", func(t *testing.T) {
				resp, err := http.Get(h.base + "/v1/models/tiny")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var m struct {
					Parser string `json:"tool_call_parser"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.Parser != fam.parser {
					t.Fatalf("/v1/models/tiny tool_call_parser %q (%v), want %s", m.Parser, err, fam.parser)
				}
			})
			var first oa.ChatCompletionMessage
			t.Run("required", func(t *testing.T) {
				names := map[string]bool{}
				for seed := int64(1); seed <= 4; seed++ {
					p := base(seed)
					p.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oa.String("required")}
					r, err := c.Chat.Completions.New(ctxT(t), p)
					if err != nil {
						t.Fatal(err)
					}
					checkCalls(t, r.Choices[0], "")
					names[r.Choices[0].Message.ToolCalls[0].Function.Name] = true
					first = r.Choices[0].Message
				}
				if len(names) == 0 {
					t.Fatal("no calls")
				}
			})
			t.Run("named function", func(t *testing.T) {
				for seed := int64(1); seed <= 3; seed++ {
					p := base(seed)
					p.ToolChoice = oa.ToolChoiceOptionFunctionToolChoice(oa.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_time"})
					r, err := c.Chat.Completions.New(ctxT(t), p)
					if err != nil {
						t.Fatal(err)
					}
					checkCalls(t, r.Choices[0], "get_time")
				}
			})
			t.Run("named function streamed", func(t *testing.T) {
				p := base(5)
				p.ToolChoice = oa.ToolChoiceOptionFunctionToolChoice(oa.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})
				st := c.Chat.Completions.NewStreaming(ctxT(t), p)
				var acc oa.ChatCompletionAccumulator
				sawIndexed := false
				for st.Next() {
					ck := st.Current()
					for _, ch := range ck.Choices {
						for _, d := range ch.Delta.ToolCalls {
							sawIndexed = sawIndexed || (d.Index == 0 && d.ID != "")
						}
					}
					acc.AddChunk(ck)
				}
				if err := st.Err(); err != nil {
					t.Fatal(err)
				}
				if !sawIndexed || len(acc.Choices) != 1 {
					t.Fatalf("indexed delta %v, choices %+v", sawIndexed, acc.Choices)
				}
				checkCalls(t, acc.Choices[0], "get_weather")
			})
			t.Run("round trip", func(t *testing.T) {
				if len(first.ToolCalls) == 0 {
					t.Skip("no call from the required case")
				}
				p := base(6)
				p.MaxCompletionTokens = oa.Int(8)
				p.Messages = append(p.Messages, first.ToParam(), oa.ToolMessage(`{"temperature": 21}`, first.ToolCalls[0].ID))
				r, err := c.Chat.Completions.New(ctxT(t), p)
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Choices) != 1 || !slices.Contains([]string{"stop", "length", "tool_calls"}, string(r.Choices[0].FinishReason)) {
					t.Fatalf("choices %+v", r.Choices)
				}
			})
			t.Run("none renders no tools and parses nothing", func(t *testing.T) {
				p := base(1)
				p.MaxCompletionTokens = oa.Int(6)
				p.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oa.String("none")}
				r, err := c.Chat.Completions.New(ctxT(t), p, option.WithJSONSet("ignore_eos", true))
				if err != nil {
					t.Fatal(err)
				}
				withTools, err := c.Chat.Completions.New(ctxT(t), base(1), option.WithJSONSet("ignore_eos", true))
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Choices[0].Message.ToolCalls) != 0 || r.Usage.PromptTokens >= withTools.Usage.PromptTokens {
					t.Fatalf("none: %d prompt tokens (auto: %d), calls %v", r.Usage.PromptTokens, withTools.Usage.PromptTokens, r.Choices[0].Message.ToolCalls)
				}
			})
			t.Run("bad choices", func(t *testing.T) {
				for _, tc := range []struct {
					name string
					p    func() oa.ChatCompletionNewParams
				}{
					{"unknown function", func() oa.ChatCompletionNewParams {
						p := base(1)
						p.ToolChoice = oa.ToolChoiceOptionFunctionToolChoice(oa.ChatCompletionNamedToolChoiceFunctionParam{Name: "nope"})
						return p
					}},
					{"required without tools", func() oa.ChatCompletionNewParams {
						p := base(1)
						p.Tools = nil
						p.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oa.String("required")}
						return p
					}},
					{"required with response_format", func() oa.ChatCompletionNewParams {
						p := base(1)
						p.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oa.String("required")}
						p.ResponseFormat = oa.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
						return p
					}},
				} {
					_, err := c.Chat.Completions.New(ctxT(t), tc.p())
					var ae *oa.Error
					if !errors.As(err, &ae) || ae.StatusCode != 400 {
						t.Fatalf("%s: %v", tc.name, err)
					}
				}
			})
			h.idle(t, false)
		})
	}
}

// TestLogitBias: logit_bias through the official SDK forces (+100) or bans
// (-100) tokens in what the engine generates, and refuses bad maps.
func TestLogitBias(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	c := h.client()
	const prompt = "Once upon a time"
	plain, err := c.Completions.New(ctxT(t), oa.CompletionNewParams{Model: "tiny", MaxTokens: oa.Int(4), Temperature: oa.Float(0),
		Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String(prompt)}, Logprobs: oa.Int(0)}, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	force := h.tok.Encode(" cat", tokenizer.EncodeOptions{})
	if len(force) == 0 {
		t.Fatal("no token for the forced text")
	}
	id := force[len(force)-1]
	forced, err := c.Completions.New(ctxT(t), oa.CompletionNewParams{Model: "tiny", MaxTokens: oa.Int(4), Temperature: oa.Float(1), Seed: oa.Int(5),
		Prompt:    oa.CompletionNewParamsPromptUnion{OfString: oa.String(prompt)},
		LogitBias: map[string]int64{strconv.Itoa(int(id)): 100}}, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	piece := string(h.tok.Piece(id))
	if want := strings.Repeat(piece, 4); forced.Choices[0].Text != want {
		t.Fatalf("+100 on token %d (%q): %q, want %q", id, piece, forced.Choices[0].Text, want)
	}
	// Banning the greedy first token (its id from the engine itself)
	// changes the first token.
	first := plain.Choices[0].Logprobs.Tokens[0]
	zero := 0.0
	st, err := h.e.Submit(ctxT(t), engine.Request{Prompt: prompt, MaxTokens: 1, Sampling: sampling.Options{Temperature: &zero}})
	if err != nil {
		t.Fatal(err)
	}
	ban := int32(-1)
	for ban < 0 {
		ev, err := st.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == engine.EventTokens && len(ev.Tokens) > 0 {
			ban = ev.Tokens[0].ID
		}
	}
	st.Cancel()
	banned, err := c.Completions.New(ctxT(t), oa.CompletionNewParams{Model: "tiny", MaxTokens: oa.Int(1), Temperature: oa.Float(0),
		Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String(prompt)}, LogitBias: map[string]int64{strconv.Itoa(int(ban)): -100}},
		option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	if banned.Choices[0].Text == first || banned.Choices[0].Text == "" {
		t.Fatalf("-100 on the greedy first token %d (%q): got %q", ban, first, banned.Choices[0].Text)
	}
	for _, c := range []struct{ bias, want string }{
		{`{"abc":1}`, "not a token id"},
		{`{"5":101}`, "[-100, 100]"},
		{`{"32000":1}`, "outside the vocabulary"},
	} {
		status, body := h.post(t, "/v1/completions", `{"model":"tiny","prompt":"a","max_tokens":1,"logit_bias":`+c.bias+`}`)
		if status != 400 || !strings.Contains(string(body), c.want) || !strings.Contains(string(body), "invalid_request") {
			t.Fatalf("logit_bias %s: %d %s", c.bias, status, body)
		}
	}
	h.idle(t, false)
}
