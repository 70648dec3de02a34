package chat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderTools: the templates of the Qwen3 and Llama 3.1 families
// render the request's tools (their `tools` variable), and a render
// without tools prints none of the tool preamble.
func TestRenderTools(t *testing.T) {
	const tools = `[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	cases := []struct {
		file, vocab string
		want        []string // substrings of the render with tools
		toolsOnly   string   // printed only when tools are given
	}{
		{"Qwen-Qwen3-0.6B.jinja", "qwen3", []string{
			`<tools>` + "\n" + `{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}` + "\n</tools>",
			"<tool_call>"}, "# Tools"},
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3", []string{
			`"name": "get_weather"`, `"parameters": {`, `Respond in the format {"name": function name, "parameters"`}, "Environment: ipython"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", "templates", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			enc, err := NewEncoder(loadVocab(t, tc.vocab), string(src))
			if err != nil {
				t.Fatal(err)
			}
			tv, err := DecodeTools([]byte(tools))
			if err != nil {
				t.Fatal(err)
			}
			msgs := []Message{{Role: RoleUser, Content: "Weather in Paris?"}}
			with, err := enc.Render(msgs, Options{AddGenerationPrompt: true, Tools: tv})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(with.Text, w) {
					t.Errorf("render with tools lacks %q:\n%s", w, with.Text)
				}
			}
			without, err := enc.Render(msgs, Options{AddGenerationPrompt: true})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(with.Text, tc.toolsOnly) || strings.Contains(without.Text, tc.toolsOnly) {
				t.Errorf("%q: with tools %v, without %v", tc.toolsOnly, strings.Contains(with.Text, tc.toolsOnly), strings.Contains(without.Text, tc.toolsOnly))
			}
		})
	}
}

func TestDecodeToolsRefusesNonList(t *testing.T) {
	if _, err := DecodeTools([]byte(`{"type":"function"}`)); err == nil {
		t.Fatal("an object was accepted as a tool list")
	}
	if v, err := DecodeTools([]byte(` null `)); err != nil || v != nil {
		t.Fatalf("null: %v, %v", v, err)
	}
}
