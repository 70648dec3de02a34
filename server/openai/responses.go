package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"oengine/toolcall"
)

// RouteResponses is the route label of POST /v1/responses.
const RouteResponses = "/v1/responses"

// responsesRequest is POST /v1/responses, OpenAI's Responses API
// (docs/api.md, "Responses"): run as a chat request (responsesRequest.chat)
// and answered as a response object or its stream of typed events.
// Responses are not stored, so nothing refers to an earlier one.
type responsesRequest struct {
	Model           string            `json:"model"`
	Input           json.RawMessage   `json:"input"`
	Instructions    *string           `json:"instructions"`
	MaxOutputTokens *int              `json:"max_output_tokens"`
	Temperature     *float64          `json:"temperature"`
	TopP            *float64          `json:"top_p"`
	Tools           []json.RawMessage `json:"tools"`
	ToolChoice      json.RawMessage   `json:"tool_choice"`
	// ParallelToolCalls, Metadata and User are echoed; Reasoning (effort,
	// summary) is accepted and not used: how much a model reasons is its
	// own. Store is answered false: nothing is stored.
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	Metadata          map[string]string `json:"metadata"`
	User              string            `json:"user"`
	Reasoning         json.RawMessage   `json:"reasoning"`
	Store             *bool             `json:"store"`
	Text              *struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
	Stream bool `json:"stream"`
	// Refused: they need stored responses or conversations, or runs that
	// outlive the request.
	PreviousResponseID *string         `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Background         bool            `json:"background"`
	TopLogprobs        *int            `json:"top_logprobs"`
	Include            []string        `json:"include"`
	// Sampling as on the other routes (oengine, vLLM).
	Seed *int64 `json:"seed"`
	TopK *int32 `json:"top_k"`
}

func (q *responsesRequest) modelName() string { return q.Model }

// chat is q as the chat request it runs.
func (q *responsesRequest) chat() (*chatRequest, *apiError) {
	switch {
	case q.PreviousResponseID != nil && *q.PreviousResponseID != "":
		return nil, unsupported("previous_response_id", "responses are not stored here: send the conversation so far as input")
	case len(q.Conversation) > 0 && string(q.Conversation) != "null":
		return nil, unsupported("conversation", "conversations are not stored here: send the conversation so far as input")
	case q.Background:
		return nil, unsupported("background", "background responses are not served: the response is answered while the request is open")
	case q.TopLogprobs != nil && *q.TopLogprobs > 0:
		return nil, unsupported("top_logprobs", "logprobs are not served on /v1/responses: use /v1/chat/completions")
	case len(q.Include) > 0:
		return nil, unsupported("include", "include %q: no additional output data is served", q.Include[0])
	}
	c := &chatRequest{}
	c.Model, c.MaxCompletionTokens, c.Temperature, c.TopP = q.Model, q.MaxOutputTokens, q.Temperature, q.TopP
	c.User, c.Stream, c.Seed, c.TopK = q.User, q.Stream, q.Seed, q.TopK
	if q.Instructions != nil && *q.Instructions != "" {
		c.Messages = append(c.Messages, chatMessage{Role: "system", Content: jsonText(*q.Instructions)})
	}
	msgs, aerr := responsesInput(q.Input)
	if aerr != nil {
		return nil, aerr
	}
	c.Messages = append(c.Messages, msgs...)
	if c.Tools, aerr = responsesTools(q.Tools); aerr != nil {
		return nil, aerr
	}
	if c.ToolChoice, aerr = responsesToolChoice(q.ToolChoice); aerr != nil {
		return nil, aerr
	}
	if q.Text != nil {
		if c.ResponseFormat, aerr = responsesFormat(q.Text.Format); aerr != nil {
			return nil, aerr
		}
	}
	return c, nil
}

// responsesInput converts input, a string (one user message) or a list of
// items, to chat messages: messages (developer as system), the model's
// earlier function calls and their outputs (function_call,
// function_call_output); earlier reasoning items are dropped, as chat
// templates drop earlier turns' reasoning.
func responsesInput(raw json.RawMessage) ([]chatMessage, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("input", "input is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []chatMessage{{Role: "user", Content: jsonText(s)}}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil || len(items) == 0 {
		return nil, invalid("input", "input must be a string or a non-empty list of items")
	}
	var msgs []chatMessage
	for i, it := range items {
		field := fmt.Sprintf("input[%d]", i)
		var item struct {
			Type      string          `json:"type"`
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			CallID    string          `json:"call_id"`
			Name      string          `json:"name"`
			Arguments string          `json:"arguments"`
			Output    json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(it, &item); err != nil {
			return nil, invalid(field, "%s: %v", field, err)
		}
		switch item.Type {
		case "", "message":
			role := item.Role
			switch role {
			case "user", "system", "assistant":
			case "developer":
				role = "system"
			default:
				return nil, invalid(field+".role", "%s.role %q: want user, system, developer or assistant", field, item.Role)
			}
			text, aerr := itemText(item.Content, field+".content")
			if aerr != nil {
				return nil, aerr
			}
			msgs = append(msgs, chatMessage{Role: role, Content: jsonText(text)})
		case "function_call":
			if item.CallID == "" || item.Name == "" {
				return nil, invalid(field, "%s: a function_call needs call_id and name", field)
			}
			tc := toolCallJSON{ID: item.CallID, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = item.Name, item.Arguments
			// Calls of one turn are one assistant message.
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" && (len(msgs[n-1].ToolCalls) > 0 || isEmptyText(msgs[n-1].Content)) {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, tc)
			} else {
				msgs = append(msgs, chatMessage{Role: "assistant", Content: jsonText(""), ToolCalls: []toolCallJSON{tc}})
			}
		case "function_call_output":
			if item.CallID == "" {
				return nil, invalid(field, "%s: a function_call_output needs call_id", field)
			}
			text, aerr := itemText(item.Output, field+".output")
			if aerr != nil {
				return nil, aerr
			}
			msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: item.CallID, Content: jsonText(text)})
		case "reasoning":
		default:
			return nil, unsupported(field+".type", "%s.type %q: message, function_call, function_call_output and reasoning items are served", field, item.Type)
		}
	}
	return msgs, nil
}

// itemText is an item's content: a string, or a list of text parts
// (input_text, output_text, text) joined; images and files are refused.
func itemText(raw json.RawMessage, field string) (string, *apiError) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", invalid(field, "%s must be a string or a list of text parts", field)
	}
	var b strings.Builder
	for j, p := range parts {
		switch {
		case p.Type != "input_text" && p.Type != "output_text" && p.Type != "text":
			return "", unsupported(field, "%s[%d].type %q: only text parts are served", field, j, p.Type)
		case p.Text == nil:
			return "", invalid(field, "%s[%d] has no text", field, j)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// jsonText is s as a JSON string.
func jsonText(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func isEmptyText(raw json.RawMessage) bool {
	var s string
	return len(raw) == 0 || string(raw) == "null" || (json.Unmarshal(raw, &s) == nil && s == "")
}

// responsesTools converts the Responses API's function tools ({type,
// name, description, parameters, strict}) to chat's form; other tool
// types (web search, files, ...) are refused.
func responsesTools(tools []json.RawMessage) (json.RawMessage, *apiError) {
	fns := make([]toolFunction, len(tools))
	for i, raw := range tools {
		var t struct {
			Type string `json:"type"`
			toolFunction
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, invalid("tools", "tools[%d]: %v", i, err)
		}
		if t.Type != "function" {
			return nil, unsupported("tools", "tools[%d].type %q: only function tools are served", i, t.Type)
		}
		fns[i] = t.toolFunction
	}
	return functionTools(fns)
}

// responsesToolChoice converts tool_choice: "auto", "none" and "required"
// as they are, {"type": "function", "name"} to chat's named function.
func responsesToolChoice(raw json.RawMessage) (json.RawMessage, *apiError) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return raw, nil
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(t, &c); err != nil || c.Type != "function" || c.Name == "" {
		return nil, unsupported("tool_choice", "tool_choice: want auto, none, required or {\"type\": \"function\", \"name\": ...}")
	}
	return namedToolChoice(c.Name), nil
}

// responsesFormat converts text.format ({type: text | json_object |
// json_schema, name, schema, strict}) to chat's response_format.
func responsesFormat(raw json.RawMessage) (*responseFormat, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var f struct {
		Type   string          `json:"type"`
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, invalid("text.format", "text.format: %v", err)
	}
	rf := &responseFormat{Type: f.Type}
	if f.Type == "json_schema" {
		rf.JSONSchema = &jsonSchemaFormat{f.Name, f.Schema, f.Strict}
	}
	return rf, nil
}

// responses serves POST /v1/responses.
func (a *api) responses(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var q responsesRequest
	ms, ok := a.begin(w, r, &q)
	if !ok {
		return
	}
	req, aerr := q.chat()
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	out := &respOutput{q: &q}
	var sk sink = &respBodySink{bodySink: bodySink{w: w}, out: out}
	if q.Stream {
		sk = &respStreamSink{streamSink: newStreamSink(w, a.cfg.WriteTimeout), out: out}
	}
	a.serveChat(w, r, ms, req, chatServing{start: start, idPrefix: "resp_", route: RouteResponses, sink: sk})
}

// respOutput builds a response object: the request's settings echoed and
// the output items.
type respOutput struct {
	q     *responsesRequest
	items []map[string]any
}

// object is the response object with status and, once known, usage.
func (o *respOutput) object(r *runner, status string, u *usage) map[string]any {
	q := o.q
	format := json.RawMessage(`{"type":"text"}`)
	if q.Text != nil && len(q.Text.Format) > 0 && string(q.Text.Format) != "null" {
		format = q.Text.Format
	}
	tools := q.Tools
	if tools == nil {
		tools = []json.RawMessage{}
	}
	var choice any = "auto"
	if len(q.ToolChoice) > 0 {
		choice = q.ToolChoice
	}
	meta := q.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	items := o.items
	if items == nil {
		items = []map[string]any{}
	}
	obj := map[string]any{
		"id": r.o.id, "object": "response", "created_at": r.o.created, "status": status, "model": r.o.model.Name,
		"output": items, "error": nil, "incomplete_details": nil, "instructions": q.Instructions,
		"max_output_tokens": q.MaxOutputTokens, "temperature": q.Temperature, "top_p": q.TopP,
		"tools": tools, "tool_choice": choice, "parallel_tool_calls": q.ParallelToolCalls == nil || *q.ParallelToolCalls,
		"text": map[string]any{"format": format}, "store": false, "metadata": meta, "previous_response_id": nil,
		"reasoning": nil, "truncation": "disabled", "usage": nil,
	}
	if q.User != "" {
		obj["user"] = q.User
	}
	if status == "incomplete" {
		obj["incomplete_details"] = map[string]string{"reason": "max_output_tokens"}
	}
	if u != nil {
		obj["usage"] = map[string]any{
			"input_tokens": u.PromptTokens, "input_tokens_details": map[string]int{"cached_tokens": u.PromptTokensDetails.CachedTokens},
			"output_tokens": u.CompletionTokens, "output_tokens_details": map[string]int{"reasoning_tokens": 0},
			"total_tokens": u.TotalTokens,
		}
	}
	return obj
}

// itemStatus is the status of the response and of its last output item
// from its one choice's finish: incomplete when the token limit cut it.
func itemStatus(r *runner) string {
	if r.choices[0].finish == "length" {
		return "incomplete"
	}
	return "completed"
}

func reasoningItem(id, status, text string) map[string]any {
	content := []map[string]string{}
	if text != "" || status != "in_progress" {
		content = append(content, map[string]string{"type": "reasoning_text", "text": text})
	}
	return map[string]any{"type": "reasoning", "id": id, "status": status, "summary": []any{}, "content": content}
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func messageItem(id, status string, content []map[string]any) map[string]any {
	return map[string]any{"type": "message", "id": id, "status": status, "role": "assistant", "content": content}
}

func callItem(id, callID, name, args, status string) map[string]any {
	return map[string]any{"type": "function_call", "id": id, "call_id": callID, "name": name, "arguments": args, "status": status}
}

// respBodySink answers the whole response object (stream: false); the
// choice is collected as for chat completions.
type respBodySink struct {
	bodySink
	out *respOutput
}

func (b *respBodySink) end(r *runner) error {
	c, status := r.choices[0], itemStatus(r)
	if len(c.reason) > 0 {
		b.out.items = append(b.out.items, reasoningItem(newID("rs_"), status, string(c.reason)))
	}
	if len(c.text) > 0 || len(c.calls) == 0 {
		b.out.items = append(b.out.items, messageItem(newID("msg_"), status, []map[string]any{outputText(string(c.text))}))
	}
	for _, tc := range c.calls {
		b.out.items = append(b.out.items, callItem(newID("fc_"), tc.ID, tc.Function.Name, tc.Function.Arguments, "completed"))
	}
	u := r.usage
	writeJSON(b.w, http.StatusOK, b.out.object(r, itemStatus(r), &u))
	return nil
}

// respStreamSink writes the Responses API's server-sent events: each
// `event: TYPE` with `data: {type, sequence_number, ...}`, from
// response.created to response.completed (response.incomplete at the
// token limit, response.failed after a failure), with one output item at
// a time open (reasoning, then the message) and function calls whole.
type respStreamSink struct {
	*streamSink
	out  *respOutput
	seq  int
	item map[string]any // the output item being streamed; nil: none
	text strings.Builder
	// said: a message item or a function call was streamed (else the
	// finish adds an empty message, as the body has one).
	said bool
}

// event writes one Responses API event: its type repeated in the data,
// numbered from 0.
func (s *respStreamSink) event(typ string, fields map[string]any) error {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	return s.named(typ, fields)
}

func (s *respStreamSink) begin(r *runner) error {
	s.open()
	if err := s.event("response.created", map[string]any{"response": s.out.object(r, "in_progress", nil)}); err != nil {
		return err
	}
	return s.event("response.in_progress", map[string]any{"response": s.out.object(r, "in_progress", nil)})
}

// openItem makes an item of kind ("reasoning" or "message") the open one,
// closing another.
func (s *respStreamSink) openItem(kind string) error {
	if s.item != nil && s.item["type"] == kind {
		return nil
	}
	if err := s.closeItem("completed"); err != nil {
		return err
	}
	idx := len(s.out.items)
	if kind == "reasoning" {
		s.item = reasoningItem(newID("rs_"), "in_progress", "")
		return s.event("response.output_item.added", map[string]any{"output_index": idx, "item": s.item})
	}
	s.item, s.said = messageItem(newID("msg_"), "in_progress", []map[string]any{}), true
	if err := s.event("response.output_item.added", map[string]any{"output_index": idx, "item": s.item}); err != nil {
		return err
	}
	return s.event("response.content_part.added", map[string]any{"item_id": s.item["id"], "output_index": idx,
		"content_index": 0, "part": outputText("")})
}

// closeItem ends the open item with its done events and keeps it, with
// status completed or (cut by the token limit) incomplete.
func (s *respStreamSink) closeItem(status string) error {
	if s.item == nil {
		return nil
	}
	idx, id, text := len(s.out.items), s.item["id"], s.text.String()
	var item map[string]any
	if s.item["type"] == "reasoning" {
		item = reasoningItem(id.(string), status, text)
		if err := s.event("response.reasoning_text.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "text": text}); err != nil {
			return err
		}
	} else {
		part := outputText(text)
		item = messageItem(id.(string), status, []map[string]any{part})
		if err := s.event("response.output_text.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0,
			"text": text, "logprobs": []any{}}); err != nil {
			return err
		}
		if err := s.event("response.content_part.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "part": part}); err != nil {
			return err
		}
	}
	s.item = nil
	s.text.Reset()
	s.out.items = append(s.out.items, item)
	return s.event("response.output_item.done", map[string]any{"output_index": idx, "item": item})
}

func (s *respStreamSink) delta(r *runner, idx int, content, reasoning string, lps []tokenLogprob) error {
	if reasoning != "" {
		if err := s.openItem("reasoning"); err != nil {
			return err
		}
		s.text.WriteString(reasoning)
		if err := s.event("response.reasoning_text.delta", map[string]any{"item_id": s.item["id"], "output_index": len(s.out.items),
			"content_index": 0, "delta": reasoning}); err != nil {
			return err
		}
	}
	if content == "" {
		return nil
	}
	if err := s.openItem("message"); err != nil {
		return err
	}
	s.text.WriteString(content)
	return s.event("response.output_text.delta", map[string]any{"item_id": s.item["id"], "output_index": len(s.out.items),
		"content_index": 0, "delta": content, "logprobs": []any{}})
}

func (s *respStreamSink) toolCalls(r *runner, idx int, calls []toolcall.Call) error {
	if err := s.closeItem("completed"); err != nil {
		return err
	}
	for _, tc := range toolCallsOut(calls, false) {
		i, id := len(s.out.items), newID("fc_")
		s.said = true
		if err := s.event("response.output_item.added", map[string]any{"output_index": i,
			"item": callItem(id, tc.ID, tc.Function.Name, "", "in_progress")}); err != nil {
			return err
		}
		if err := s.event("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": tc.Function.Arguments}); err != nil {
			return err
		}
		if err := s.event("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i,
			"name": tc.Function.Name, "arguments": tc.Function.Arguments}); err != nil {
			return err
		}
		item := callItem(id, tc.ID, tc.Function.Name, tc.Function.Arguments, "completed")
		s.out.items = append(s.out.items, item)
		if err := s.event("response.output_item.done", map[string]any{"output_index": i, "item": item}); err != nil {
			return err
		}
	}
	return nil
}

func (s *respStreamSink) finish(r *runner, idx int) error {
	if !s.said {
		// No text and no call: an empty message, as the body has.
		if err := s.openItem("message"); err != nil {
			return err
		}
	}
	return s.closeItem(itemStatus(r))
}

func (s *respStreamSink) end(r *runner) error {
	status := itemStatus(r)
	u := r.usage
	if err := s.event("response."+status, map[string]any{"response": s.out.object(r, status, &u)}); err != nil {
		return err
	}
	s.finished()
	return nil
}

// fail ends a started stream with response.failed, the error in the
// response object.
func (s *respStreamSink) fail(r *runner, e *apiError) error {
	obj := s.out.object(r, "failed", nil)
	obj["error"] = map[string]string{"code": e.code, "message": e.msg}
	return s.event("response.failed", map[string]any{"response": obj})
}
