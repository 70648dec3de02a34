package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"oengine/toolcall"
)

// RouteMessages is the route label of POST /v1/messages.
const RouteMessages = "/v1/messages"

// Anthropic's Messages API (POST /v1/messages and
// /v1/messages/count_tokens, docs/api.md "Anthropic Messages"), run as a
// chat request, so Anthropic's SDKs and the tools built on them reach the
// engine as they are.

// anthropicWriter marks the response of an Anthropic route: writeError
// answers in Anthropic's form, {"type": "error", "error": {type, message}}.
type anthropicWriter struct{ http.ResponseWriter }

// Unwrap lets http.ResponseController reach the connection's flusher and
// deadlines (the streamed reply needs them).
func (w anthropicWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// anthropicBody is e in Anthropic's form.
func (e *apiError) anthropicBody() map[string]any {
	kind := "invalid_request_error"
	switch {
	case e.status == http.StatusUnauthorized:
		kind = "authentication_error"
	case e.status == http.StatusForbidden:
		kind = "permission_error"
	case e.status == http.StatusNotFound:
		kind = "not_found_error"
	case e.status == http.StatusRequestEntityTooLarge:
		kind = "request_too_large"
	case e.status == http.StatusTooManyRequests:
		kind = "rate_limit_error"
	case e.status == http.StatusServiceUnavailable:
		kind = "overloaded_error"
	case e.status >= 500:
		kind = "api_error"
	}
	return map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": e.msg}}
}

// messagesRequest is POST /v1/messages.
type messagesRequest struct {
	Model     string `json:"model"`
	MaxTokens *int   `json:"max_tokens"`
	// System is a string or a list of text blocks.
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools      []json.RawMessage `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
	Temperature   *float64 `json:"temperature"`
	TopP          *float64 `json:"top_p"`
	TopK          *int32   `json:"top_k"`
	StopSequences []string `json:"stop_sequences"`
	Stream        bool     `json:"stream"`
	// OutputConfig.Format (a JSON schema) is enforced as response_format
	// is; Effort, like Thinking, is accepted and not used: how much a
	// model reasons is its own. Metadata is accepted.
	OutputConfig *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
	Thinking json.RawMessage `json:"thinking"`
	Metadata json.RawMessage `json:"metadata"`
}

func (q *messagesRequest) modelName() string { return q.Model }

// chat is q as the chat request it runs; counting (count_tokens) needs no
// max_tokens.
func (q *messagesRequest) chat(counting bool) (*chatRequest, *apiError) {
	c := &chatRequest{}
	switch {
	case !counting && q.MaxTokens == nil:
		return nil, invalid("max_tokens", "max_tokens: field required")
	case !counting && *q.MaxTokens < 1:
		return nil, invalid("max_tokens", "max_tokens must be at least 1, got %d", *q.MaxTokens)
	case len(q.Messages) == 0:
		return nil, invalid("messages", "messages: at least one message is required")
	}
	c.Model, c.MaxCompletionTokens, c.Temperature, c.TopP, c.TopK, c.Stream = q.Model, q.MaxTokens, q.Temperature, q.TopP, q.TopK, q.Stream
	if len(q.StopSequences) > 0 {
		c.Stop, _ = json.Marshal(q.StopSequences)
	}
	if len(q.System) > 0 && string(q.System) != "null" {
		text, aerr := blocksText(q.System, "system")
		if aerr != nil {
			return nil, aerr
		}
		c.Messages = append(c.Messages, chatMessage{Role: "system", Content: jsonText(text)})
	}
	for i, m := range q.Messages {
		msgs, aerr := anthropicMessage(m.Role, m.Content, fmt.Sprintf("messages[%d]", i))
		if aerr != nil {
			return nil, aerr
		}
		c.Messages = append(c.Messages, msgs...)
	}
	var aerr *apiError
	if c.Tools, aerr = anthropicTools(q.Tools); aerr != nil {
		return nil, aerr
	}
	if tc := q.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "none":
			c.ToolChoice = jsonText(tc.Type)
		case "any":
			c.ToolChoice = jsonText("required")
		case "tool":
			c.ToolChoice = namedToolChoice(tc.Name)
		default:
			return nil, invalid("tool_choice", "tool_choice.type %q: want auto, any, tool or none", tc.Type)
		}
	}
	if oc := q.OutputConfig; oc != nil && oc.Format != nil {
		if oc.Format.Type != "json_schema" {
			return nil, unsupported("output_config.format", "output_config.format.type %q: want json_schema", oc.Format.Type)
		}
		c.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: &jsonSchemaFormat{Name: "output", Schema: oc.Format.Schema}}
	}
	return c, nil
}

// anthropicBlock is one content block of a message.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// anthropicMessage converts one message: a user's text and tool results
// (each a chat tool message), an assistant's text, thinking (its
// reasoning_content) and tool uses (its tool_calls).
func anthropicMessage(role string, raw json.RawMessage, field string) ([]chatMessage, *apiError) {
	if role != "user" && role != "assistant" {
		return nil, invalid(field+".role", "%s.role %q: want user or assistant", field, role)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []chatMessage{{Role: role, Content: jsonText(s)}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, invalid(field+".content", "%s.content must be a string or a list of content blocks", field)
	}
	var out []chatMessage
	var text, thinking strings.Builder
	var calls []toolCallJSON
	for j, b := range blocks {
		bf := fmt.Sprintf("%s.content[%d]", field, j)
		switch {
		case b.Type == "text" && b.Text != nil:
			text.WriteString(*b.Text)
		case b.Type == "thinking" && role == "assistant":
			thinking.WriteString(b.Thinking)
		case b.Type == "redacted_thinking" && role == "assistant":
		case b.Type == "tool_use" && role == "assistant":
			if b.ID == "" || b.Name == "" {
				return nil, invalid(bf, "%s: a tool_use block needs id and name", bf)
			}
			tc := toolCallJSON{ID: b.ID, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = b.Name, "{}"
			if len(b.Input) > 0 && string(b.Input) != "null" {
				tc.Function.Arguments = string(b.Input)
			}
			calls = append(calls, tc)
		case b.Type == "tool_result" && role == "user":
			if b.ToolUseID == "" {
				return nil, invalid(bf, "%s: a tool_result block needs tool_use_id", bf)
			}
			result := ""
			if len(b.Content) > 0 && string(b.Content) != "null" {
				var aerr *apiError
				if result, aerr = blocksText(b.Content, bf+".content"); aerr != nil {
					return nil, aerr
				}
			}
			out = append(out, chatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: jsonText(result)})
		default:
			return nil, unsupported(bf, "%s: a %s block of a %s message is not served (text, tool_use, tool_result and thinking are)", bf, b.Type, role)
		}
	}
	if role == "assistant" {
		return []chatMessage{{Role: role, Content: jsonText(text.String()), ReasoningContent: thinking.String(), ToolCalls: calls}}, nil
	}
	if text.Len() > 0 || len(out) == 0 {
		out = append(out, chatMessage{Role: role, Content: jsonText(text.String())})
	}
	return out, nil
}

// blocksText is a string, or the text of a list of text blocks joined.
func blocksText(raw json.RawMessage, field string) (string, *apiError) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", invalid(field, "%s must be a string or a list of text blocks", field)
	}
	var b strings.Builder
	for j, bl := range blocks {
		if bl.Type != "text" || bl.Text == nil {
			return "", unsupported(field, "%s[%d]: a %s block; only text is served here", field, j, bl.Type)
		}
		b.WriteString(*bl.Text)
	}
	return b.String(), nil
}

// anthropicTools converts client tools ({name, description, input_schema})
// to chat's function tools; Anthropic's server tools (web search, code
// execution, ...) are refused.
func anthropicTools(tools []json.RawMessage) (json.RawMessage, *apiError) {
	fns := make([]toolFunction, len(tools))
	for i, raw := range tools {
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, invalid("tools", "tools[%d]: %v", i, err)
		}
		if t.Type != "" && t.Type != "custom" {
			return nil, unsupported("tools", "tools[%d].type %q: only client tools (name, input_schema) are served", i, t.Type)
		}
		fns[i] = toolFunction{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}
	}
	return functionTools(fns)
}

// anthropicMessages serves POST /v1/messages.
func (a *api) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	w = anthropicWriter{w}
	start := time.Now()
	var q messagesRequest
	ms, ok := a.begin(w, r, &q)
	if !ok {
		return
	}
	req, aerr := q.chat(false)
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	var sk sink = &anthBodySink{bodySink: bodySink{w: w}}
	if q.Stream {
		sk = &anthStreamSink{streamSink: newStreamSink(w, a.cfg.WriteTimeout)}
	}
	a.serveChat(w, r, ms, req, chatServing{start: start, idPrefix: "msg_", route: RouteMessages, sink: sk})
}

// countTokens serves POST /v1/messages/count_tokens: the input tokens the
// same request would prompt the model with.
func (a *api) countTokens(w http.ResponseWriter, r *http.Request) {
	w = anthropicWriter{w}
	var q messagesRequest
	ms, ok := a.begin(w, r, &q)
	if !ok {
		return
	}
	req, aerr := q.chat(true)
	var ids []int32
	if aerr == nil {
		ids, aerr = a.renderChat(ms, &tokenizeRequest{Messages: req.Messages, Tools: req.Tools})
	}
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(ids)})
}

// stopReason is Anthropic's stop_reason and stop_sequence of the choice.
func stopReason(c *choiceState) (string, *string) {
	switch {
	case c.finish == "length":
		return "max_tokens", nil
	case c.finish == "tool_calls":
		return "tool_use", nil
	case c.stop != "":
		s := c.stop
		return "stop_sequence", &s
	}
	return "end_turn", nil
}

// anthropicUsage is the reply's usage: input_tokens are those not read
// from the prefix cache (Anthropic's count beside cache_read_input_tokens).
func anthropicUsage(u usage) map[string]int {
	cached := u.PromptTokensDetails.CachedTokens
	return map[string]int{"input_tokens": u.PromptTokens - cached, "output_tokens": u.CompletionTokens,
		"cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}
}

func toolUseBlock(tc toolCallJSON) map[string]any {
	input := json.RawMessage(tc.Function.Arguments)
	if !json.Valid(input) {
		input = json.RawMessage("{}")
	}
	return map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name, "input": input}
}

// anthBodySink answers the whole message (stream: false).
type anthBodySink struct{ bodySink }

func (b *anthBodySink) end(r *runner) error {
	c := r.choices[0]
	content := []map[string]any{}
	if len(c.reason) > 0 {
		content = append(content, map[string]any{"type": "thinking", "thinking": string(c.reason), "signature": ""})
	}
	if len(c.text) > 0 || len(c.calls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": string(c.text)})
	}
	for _, tc := range c.calls {
		content = append(content, toolUseBlock(tc))
	}
	reason, seq := stopReason(c)
	writeJSON(b.w, http.StatusOK, map[string]any{"id": r.o.id, "type": "message", "role": "assistant", "model": r.o.model.Name,
		"content": content, "stop_reason": reason, "stop_sequence": seq, "usage": anthropicUsage(r.usage)})
	return nil
}

// anthStreamSink writes Anthropic's server-sent events: message_start,
// then per content block (thinking, text, tool_use, in that order)
// content_block_start, its deltas and content_block_stop, then
// message_delta (stop_reason, usage) and message_stop; a failure after the
// start ends the stream with an error event.
type anthStreamSink struct {
	*streamSink
	block int    // index of the next block
	cur   string // type of the open block; "": none
	said  bool   // a text block or a tool use was streamed
}

// event writes one Anthropic event: its type repeated in the data.
func (s *anthStreamSink) event(typ string, fields map[string]any) error {
	fields["type"] = typ
	return s.named(typ, fields)
}

func (s *anthStreamSink) begin(r *runner) error {
	s.open()
	return s.event("message_start", map[string]any{"message": map[string]any{"id": r.o.id, "type": "message", "role": "assistant",
		"model": r.o.model.Name, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(usage{})}})
}

// openBlock makes a block of kind ("thinking" or "text") the open one.
func (s *anthStreamSink) openBlock(kind string) error {
	if s.cur == kind {
		return nil
	}
	if err := s.closeBlock(); err != nil {
		return err
	}
	s.cur = kind
	block := map[string]any{"type": "text", "text": ""}
	if kind == "thinking" {
		block = map[string]any{"type": "thinking", "thinking": "", "signature": ""}
	} else {
		s.said = true
	}
	return s.event("content_block_start", map[string]any{"index": s.block, "content_block": block})
}

func (s *anthStreamSink) closeBlock() error {
	if s.cur == "" {
		return nil
	}
	if s.cur == "thinking" {
		if err := s.event("content_block_delta", map[string]any{"index": s.block, "delta": map[string]string{"type": "signature_delta", "signature": ""}}); err != nil {
			return err
		}
	}
	s.cur = ""
	s.block++
	return s.event("content_block_stop", map[string]any{"index": s.block - 1})
}

func (s *anthStreamSink) delta(r *runner, idx int, content, reasoning string, lps []tokenLogprob) error {
	if reasoning != "" {
		if err := s.openBlock("thinking"); err != nil {
			return err
		}
		if err := s.event("content_block_delta", map[string]any{"index": s.block, "delta": map[string]string{"type": "thinking_delta", "thinking": reasoning}}); err != nil {
			return err
		}
	}
	if content == "" {
		return nil
	}
	if err := s.openBlock("text"); err != nil {
		return err
	}
	return s.event("content_block_delta", map[string]any{"index": s.block, "delta": map[string]string{"type": "text_delta", "text": content}})
}

func (s *anthStreamSink) toolCalls(r *runner, idx int, calls []toolcall.Call) error {
	if err := s.closeBlock(); err != nil {
		return err
	}
	for _, tc := range toolCallsOut(calls, false) {
		s.said = true
		if err := s.event("content_block_start", map[string]any{"index": s.block,
			"content_block": map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name, "input": map[string]any{}}}); err != nil {
			return err
		}
		if err := s.event("content_block_delta", map[string]any{"index": s.block,
			"delta": map[string]string{"type": "input_json_delta", "partial_json": tc.Function.Arguments}}); err != nil {
			return err
		}
		s.block++
		if err := s.event("content_block_stop", map[string]any{"index": s.block - 1}); err != nil {
			return err
		}
	}
	return nil
}

func (s *anthStreamSink) finish(r *runner, idx int) error {
	if !s.said {
		if err := s.openBlock("text"); err != nil { // an empty reply still has its text block
			return err
		}
	}
	return s.closeBlock()
}

func (s *anthStreamSink) end(r *runner) error {
	reason, seq := stopReason(r.choices[0])
	if err := s.event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq},
		"usage": anthropicUsage(r.usage)}); err != nil {
		return err
	}
	if err := s.event("message_stop", map[string]any{}); err != nil {
		return err
	}
	s.finished()
	return nil
}

// fail ends a started stream with Anthropic's error event.
func (s *anthStreamSink) fail(r *runner, e *apiError) error {
	body := e.anthropicBody()
	delete(body, "type")
	return s.event("error", body)
}
