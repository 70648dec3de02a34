package openai

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"oengine/model/tokenizer"
)

// harmonyTemplate is a chat template in gpt-oss's harmony format (enough
// of it: messages as <|start|>ROLE<|message|>...<|end|>, the generation
// prompt <|start|>assistant, and the channels it declares).
const harmonyTemplate = `{#- channels: <|channel|>analysis, <|channel|>final #}` +
	`{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}` +
	`{% if add_generation_prompt %}<|start|>assistant{% endif %}`

// TestHarmonyReplies: a model whose template writes harmony has its reply
// parsed: the analysis channel goes to reasoning_content, the final
// channel to content, a commentary message to a function to tool_calls
// (finish_reason tool_calls), whole and streamed; split_reasoning: false
// returns the reply as generated, control tokens included
// (engine.Request.SpecialText). The tiny model's vocabulary has no harmony
// tokens, so the scripted replies spell the markers in ordinary tokens:
// the parser reads text either way.
func TestHarmonyReplies(t *testing.T) {
	h := startHarness(t, harnessOpts{template: harmonyTemplate})
	script := func(text string) {
		ids := h.tok.Encode(text, tokenizer.EncodeOptions{})
		h.model.setScript(ids, h.tok.EOS())
	}
	t.Cleanup(func() { h.model.script.Store(nil) })
	ask := func(extra string) map[string]any {
		t.Helper()
		code, body := h.do(t, "POST", "/v1/chat/completions",
			`{"model":"tiny","max_tokens":80,"temperature":0,"messages":[{"role":"user","content":"hi"}]`+extra+`}`)
		if code != 200 {
			t.Fatalf("%d %v", code, body)
		}
		return body["choices"].([]any)[0].(map[string]any)
	}

	script("<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>final<|message|>Hello there!")
	c := ask("")
	msg := c["message"].(map[string]any)
	if msg["content"] != "Hello there!" || msg["reasoning_content"] != "The user greets." || c["finish_reason"] != "stop" {
		t.Fatalf("reply %v, finish %v", msg, c["finish_reason"])
	}

	// Streamed: reasoning deltas, then content deltas.
	script("<|channel|>analysis<|message|>Short.<|end|><|start|>assistant<|channel|>final<|message|>Yes.")
	req, _ := http.NewRequest("POST", h.base+"/v1/chat/completions", bytes.NewReader([]byte(
		`{"model":"tiny","max_tokens":80,"temperature":0,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var content, reasoning strings.Builder
	for _, d := range chatDeltas(t, raw) {
		if d.content != "" && reasoning.Len() == 0 {
			t.Fatalf("content %q before the reasoning", d.content)
		}
		content.WriteString(d.content)
		reasoning.WriteString(d.reasoning)
	}
	if content.String() != "Yes." || reasoning.String() != "Short." {
		t.Fatalf("streamed content %q, reasoning %q", content.String(), reasoning.String())
	}

	// A tool call.
	script(`<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}`)
	c = ask(`,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`)
	msg = c["message"].(map[string]any)
	calls, _ := msg["tool_calls"].([]any)
	if c["finish_reason"] != "tool_calls" || len(calls) != 1 || msg["reasoning_content"] != "Need the weather." {
		t.Fatalf("tool reply %v, finish %v", msg, c["finish_reason"])
	}
	fn := calls[0].(map[string]any)["function"].(map[string]any)
	if fn["name"] != "get_weather" || fn["arguments"] != `{"city":"Paris"}` {
		t.Fatalf("call %v", fn)
	}

	// tool_choice required has no harmony form here.
	code, body := h.do(t, "POST", "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"tool_choice":"required",`+
		`"tools":[{"type":"function","function":{"name":"f"}}]}`)
	if code != 400 || !strings.Contains(body["error"].(map[string]any)["message"].(string), "harmony") {
		t.Fatalf("tool_choice required: %d %v", code, body)
	}

	// Unsplit: the text as generated, the vocabulary's control token
	// (BOS) rendered as its text.
	h.model.setScript([]int32{h.tok.BOS()}, h.tok.EOS())
	c = ask(`,"split_reasoning":false`)
	if got := c["message"].(map[string]any)["content"]; got != h.tok.TokenText(h.tok.BOS()) {
		t.Fatalf("unsplit content %q, want the BOS token's text %q", got, h.tok.TokenText(h.tok.BOS()))
	}
	h.idle(t, false)
}
