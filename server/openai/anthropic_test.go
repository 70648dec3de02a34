package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

const aliceKey = "alice-secret-0123456789"

// anthropicError is Anthropic's error body.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// anthropicClient is Anthropic's official Go SDK pointed at the harness,
// authenticating as alice (it sends X-Api-Key).
func (h *harness) anthropicClient() anthropic.Client {
	return anthropic.NewClient(aopt.WithBaseURL(h.base+"/"), aopt.WithAPIKey(aliceKey), aopt.WithMaxRetries(0))
}

// TestAnthropicSDK: POST /v1/messages driven by Anthropic's official Go
// SDK (its X-Api-Key accepted as the API key) answers what the same
// conversation gets from /v1/chat/completions: the same text at
// temperature 0 and the same token counts, whole and streamed as
// Anthropic's events, with stop_reason and stop_sequence; count_tokens
// counts the same input; bad requests get Anthropic's error form.
func TestAnthropicSDK(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	h.twoKeys(t)
	c, ac := h.client(option.WithAPIKey(aliceKey)), h.anthropicClient()
	const system, prompt = "You tell short stories.", "Once upon a time"
	greedy := aopt.WithJSONSet("temperature", 0)
	chat, err := c.Chat.Completions.New(ctxT(t), oa.ChatCompletionNewParams{Model: "tiny", MaxCompletionTokens: oa.Int(12), Temperature: oa.Float(0),
		Messages: []oa.ChatCompletionMessageParamUnion{oa.SystemMessage(system), oa.UserMessage(prompt)}})
	if err != nil {
		t.Fatal(err)
	}
	want, wantStop := chat.Choices[0].Message.Content, anthropic.StopReasonEndTurn
	if chat.Choices[0].FinishReason == "length" {
		wantStop = anthropic.StopReasonMaxTokens
	}
	params := anthropic.MessageNewParams{Model: "tiny", MaxTokens: 12, System: []anthropic.TextBlockParam{{Text: system}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}}
	msg, err := ac.Messages.New(ctxT(t), params, greedy)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != want || msg.StopReason != wantStop ||
		!strings.HasPrefix(msg.ID, "msg_") || msg.Role != "assistant" || string(msg.Model) != "tiny" ||
		msg.Usage.InputTokens+msg.Usage.CacheReadInputTokens != chat.Usage.PromptTokens || msg.Usage.OutputTokens != chat.Usage.CompletionTokens {
		t.Fatalf("message %s\nchat completion %q (%s), usage %+v", msg.RawJSON(), want, chat.Choices[0].FinishReason, chat.Usage)
	}

	st := ac.Messages.NewStreaming(ctxT(t), params, greedy)
	var acc anthropic.Message
	var types []string
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) < 5 || types[0] != "message_start" || types[1] != "content_block_start" ||
		strings.Join(types[len(types)-3:], " ") != "content_block_stop message_delta message_stop" {
		t.Fatalf("event types %v", types)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != want || acc.StopReason != wantStop || acc.Usage.OutputTokens != chat.Usage.CompletionTokens {
		t.Fatalf("streamed message %+v; want %q", acc, want)
	}

	// A stop sequence cuts the text and is named: two characters of the
	// reply that first occur after its start.
	k := 1
	for k+2 <= len(want) && (strings.Index(want, want[k:k+2]) != k || !utf8.ValidString(want[k:k+2])) {
		k++
	}
	if k+2 > len(want) {
		t.Fatalf("no stop sequence to try in %q", want)
	}
	p := params
	p.StopSequences = []string{want[k : k+2]}
	msg, err = ac.Messages.New(ctxT(t), p, greedy)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != want[:k] || msg.StopReason != anthropic.StopReasonStopSequence || msg.StopSequence != want[k:k+2] {
		t.Fatalf("stop %q: %s", want[k:k+2], msg.RawJSON())
	}

	// count_tokens counts what the message was prompted with.
	count, err := ac.Messages.CountTokens(ctxT(t), anthropic.MessageCountTokensParams{Model: "tiny",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: []anthropic.TextBlockParam{{Text: system}}},
		Messages: params.Messages})
	if err != nil || count.InputTokens != chat.Usage.PromptTokens {
		t.Fatalf("count_tokens %+v (%v), the chat's prompt %d", count, err, chat.Usage.PromptTokens)
	}

	// An earlier tool use and its result are chat's tool call and tool
	// message: the same prompt.
	turns := []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?")),
		anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{"city": "Paris"}, "get_weather")),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", `{"celsius":21}`, false)),
	}
	msg, err = ac.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "tiny", MaxTokens: 4, Messages: turns}, greedy)
	if err != nil {
		t.Fatal(err)
	}
	chat, err = c.Chat.Completions.New(ctxT(t), oa.ChatCompletionNewParams{Model: "tiny", MaxCompletionTokens: oa.Int(4), Temperature: oa.Float(0),
		Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("What is the weather in Paris?"),
			{OfAssistant: &oa.ChatCompletionAssistantMessageParam{ToolCalls: []oa.ChatCompletionMessageToolCallUnionParam{{
				OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{ID: "toolu_1",
					Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}}}},
			oa.ToolMessage(`{"celsius":21}`, "toolu_1")}})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Usage.InputTokens+msg.Usage.CacheReadInputTokens != chat.Usage.PromptTokens || msg.Content[0].Text != chat.Choices[0].Message.Content {
		t.Fatalf("tool turns: %s; the chat form: %d tokens, %q", msg.RawJSON(), chat.Usage.PromptTokens, chat.Choices[0].Message.Content)
	}

	post := func(key, body string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, h.base+"/v1/messages", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for _, key := range []string{"", "mallory-secret-0123456789"} {
		if status, body := post(key, `{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`); status != http.StatusUnauthorized {
			t.Fatalf("key %q: status %d, %s", key, status, body)
		}
	}
	for _, c := range []struct{ body, want string }{
		{`{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{`{"model":"tiny","max_tokens":4,"messages":[]}`, "messages"},
		{`{"model":"tiny","max_tokens":4,"messages":[{"role":"system","content":"hi"}]}`, "messages[0].role"},
		{`{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, "image"},
		{`{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "client tools"},
		{`{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"some"}}`, "tool_choice"},
	} {
		status, body := post(aliceKey, c.body)
		var e anthropicError
		if status != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Type != "error" ||
			e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, c.want) {
			t.Fatalf("%s: status %d, %s (want 400 naming %q)", c.body, status, body, c.want)
		}
	}
	h.idle(t, false)
}

// TestAnthropicToolUse: client tools with tool_choice {type: tool} give a
// tool_use block whose input matches the tool's schema and stop_reason
// tool_use, whole and streamed (input_json_delta).
func TestAnthropicToolUse(t *testing.T) {
	h := startHarness(t, harnessOpts{template: familyTemplate(t, "Qwen-Qwen3-0.6B.jinja"), modelFile: "tiny-qwen3-q4_k_m.gguf"})
	h.twoKeys(t)
	ac := h.anthropicClient()
	v := compileSchema(t, weatherParams)
	params := anthropic.MessageNewParams{Model: "tiny", MaxTokens: 120,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))},
		Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
			Properties: weatherParams["properties"], Required: []string{"city", "unit"}}, "get_weather")},
		ToolChoice: anthropic.ToolChoiceParamOfTool("get_weather")}
	greedy := aopt.WithJSONSet("temperature", 0)
	msg, err := ac.Messages.New(ctxT(t), params, greedy)
	if err != nil {
		t.Fatal(err)
	}
	var input string
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			if b.Name != "get_weather" || !strings.HasPrefix(b.ID, "call_") {
				t.Fatalf("tool use %s", b.RawJSON())
			}
			input = string(b.Input)
		}
	}
	if input == "" || msg.StopReason != anthropic.StopReasonToolUse {
		t.Fatalf("no tool use: %s", msg.RawJSON())
	}
	validateJSON(t, v, input)

	st := ac.Messages.NewStreaming(ctxT(t), params, greedy)
	var acc anthropic.Message
	var partial string
	for st.Next() {
		ev := st.Current()
		if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" {
			partial += ev.Delta.PartialJSON
		}
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if partial == "" || acc.StopReason != anthropic.StopReasonToolUse {
		t.Fatalf("streamed: %q, %+v", partial, acc)
	}
	var got, whole any
	if json.Unmarshal([]byte(partial), &got) != nil || json.Unmarshal([]byte(input), &whole) != nil || !jsonEqual(got, whole) {
		t.Fatalf("streamed input %s, whole %s", partial, input)
	}
	h.idle(t, false)
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestAnthropicFailure: an engine failure after acceptance answers
// Anthropic's error form: the whole reply a 500 api_error, a stream one
// error event after message_start and nothing after it.
func TestAnthropicFailure(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	boom := errors.New("injected device failure")
	h.model.fail.Store(&boom)
	defer h.model.fail.Store(nil)
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"tiny","max_tokens":8,"stream":%v,"messages":[{"role":"user","content":"go"}]}`, stream)
		status, raw := h.post(t, "/v1/messages", body)
		var e anthropicError
		data := raw
		if stream {
			events := strings.Split(strings.TrimSpace(string(raw)), "\n\n")
			last := events[len(events)-1]
			if status != 200 || !strings.HasPrefix(events[0], "event: message_start\n") || !strings.HasPrefix(last, "event: error\n") {
				t.Fatalf("stream: status %d\n%s", status, raw)
			}
			data = []byte(strings.TrimPrefix(last[strings.Index(last, "\n")+1:], "data: "))
		} else if status != http.StatusInternalServerError {
			t.Fatalf("status %d, %s", status, raw)
		}
		if json.Unmarshal(data, &e) != nil || e.Type != "error" || e.Error.Type != "api_error" || !strings.Contains(e.Error.Message, "injected device failure") {
			t.Fatalf("stream %v: %s", stream, raw)
		}
	}
	h.idle(t, false)
}

// TestChatRoutesAbortIsolation: a Responses or Messages request is its
// client's: another API key cannot abort it by its id (it completes), its
// owner can (the reply then ends normally, cut short).
func TestChatRoutesAbortIsolation(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	abort := h.twoKeys(t)
	routes := []struct{ path, body string }{
		{"/v1/responses", `{"model":"tiny","input":"go","max_output_tokens":6}`},
		{"/v1/messages", `{"model":"tiny","max_tokens":6,"messages":[{"role":"user","content":"go"}]}`},
	}
	for _, rt := range routes {
		for _, tc := range []struct {
			key     string
			aborted bool
		}{{"bob-secret-0123456789", false}, {aliceKey, true}} {
			release := h.model.hold()
			before := h.e.Stats().Requests
			type reply struct {
				status int
				err    error
			}
			done := make(chan reply, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, h.base+rt.path, strings.NewReader(rt.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Api-Key", aliceKey)
				req.Header.Set("X-Request-Id", "chat-shared")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					done <- reply{0, err}
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				done <- reply{resp.StatusCode, nil}
			}()
			eventually(t, "request admitted", func() bool { return h.e.Stats().Requests > before })
			got := abort(tc.key, "chat-shared")
			release()
			r := <-done
			if got != tc.aborted || r.err != nil || r.status != 200 {
				t.Fatalf("%s: %s aborting alice's request: %v (want %v); alice got %d %v", rt.path, tc.key, got, tc.aborted, r.status, r.err)
			}
			h.idle(t, false)
		}
	}
}
