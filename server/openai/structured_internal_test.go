package openai

import (
	"slices"
	"strings"
	"testing"

	"oengine/toolcall"
)

// TestToolTextStreaming: content is sent while it cannot be a call, held
// from a possible marker on, and at the end the parse decides: calls (and
// the content around them not yet sent) or the held text as content.
// Every split of the output into chunks gives the same result.
func TestToolTextStreaming(t *testing.T) {
	cases := []struct {
		parser, out string
		content     string // all content sent
		calls       []toolcall.Call
	}{
		{"hermes", "Checking.\n<tool_call>\n{\"name\":\"f\",\"arguments\":{\"a\":1}}\n</tool_call>", "Checking.\n", []toolcall.Call{{Name: "f", Arguments: `{"a":1}`}}},
		{"hermes", "a < b and <tool is not a call", "a < b and <tool is not a call", nil},
		{"hermes", "<tool_call>broken", "<tool_call>broken", nil},
		{"llama3_json", `{"name":"f","parameters":{}}`, "", []toolcall.Call{{Name: "f", Arguments: `{}`}}},
		{"llama3_json", `Hello {"name":"f"}`, `Hello {"name":"f"}`, nil},
		{"mistral", `[{"name":"f","arguments":{"x":"y"}}]`, "", []toolcall.Call{{Name: "f", Arguments: `{"x":"y"}`}}},
	}
	for _, tc := range cases {
		p := toolcall.ByName(tc.parser)
		for step := 1; step <= len(tc.out); step += 3 {
			c := &choiceState{}
			var sent strings.Builder
			for i := 0; i < len(tc.out); i += step {
				sent.WriteString(c.toolText(p, tc.out[i:min(i+step, len(tc.out))]))
			}
			rest, calls := c.toolFinish(p)
			sent.WriteString(rest)
			if sent.String() != tc.content || !slices.Equal(calls, tc.calls) {
				t.Fatalf("%s %q in chunks of %d: content %q calls %v, want %q %v", tc.parser, tc.out, step, sent.String(), calls, tc.content, tc.calls)
			}
		}
	}
}
