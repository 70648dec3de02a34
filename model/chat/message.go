package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ardanlabs/jinja"
)

// Roles of conversation messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of a conversation in OpenAI's chat format. Every
// string in it is the client's text: Encoder never parses special tokens
// in it.
type Message struct {
	Role    string
	Content string
	// ReasoningContent is an assistant turn's reasoning (Qwen3-style
	// templates render it; others ignore it).
	ReasoningContent string
	Name             string
	ToolCallID       string
	ToolCalls        []ToolCall
}

// ToolCall is one function call of an assistant turn.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the JSON text of the arguments, as OpenAI sends it. A
	// JSON object is passed to the template as an object (key order kept),
	// anything else as the string.
	Arguments string
}

// value is the message as a template sees it (docs/api.md, "Chat
// templates"): role and content always (content "" when absent); the
// other fields only when non-empty.
func (m Message) value() jinja.Value {
	v := jinja.NewDict()
	d := v.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	d.Set("content", jinja.NewString(m.Content))
	if m.ReasoningContent != "" {
		d.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
	}
	if m.Name != "" {
		d.Set("name", jinja.NewString(m.Name))
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			cv := jinja.NewDict()
			cd := cv.AsDict()
			if c.ID != "" {
				cd.Set("id", jinja.NewString(c.ID))
			}
			cd.Set("type", jinja.NewString("function"))
			fv := jinja.NewDict()
			fd := fv.AsDict()
			fd.Set("name", jinja.NewString(c.Name))
			args := jinja.NewString(c.Arguments)
			if a, err := decodeJSON([]byte(c.Arguments)); err == nil && a.IsDict() {
				args = a
			}
			fd.Set("arguments", args)
			cd.Set("function", fv)
			calls[i] = cv
		}
		d.Set("tool_calls", jinja.NewList(calls))
	}
	return v
}

// DecodeKwargs decodes a JSON object of template variables (a request's
// chat_template_kwargs), keeping the key order of nested objects. Empty
// input gives no variables.
func DecodeKwargs(raw []byte) (map[string]jinja.Value, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("chat: chat_template_kwargs: %w", err)
	}
	if !v.IsDict() {
		return nil, errors.New("chat: chat_template_kwargs must be a JSON object")
	}
	d := v.AsDict()
	out := make(map[string]jinja.Value, d.Len())
	for _, k := range d.OrderedKeys() {
		if reserved[k] {
			return nil, fmt.Errorf("%w: %q", ErrReservedKwarg, k)
		}
		out[k], _ = d.Get(k)
	}
	return out, nil
}

// DecodeTools decodes a JSON list of tool definitions (a request's
// tools) into template values, keeping key order.
func DecodeTools(raw []byte) ([]jinja.Value, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("chat: tools: %w", err)
	}
	if !v.IsList() {
		return nil, errors.New("chat: tools must be a JSON list")
	}
	return v.AsList().Items, nil
}

// decodeJSON decodes one JSON value into a template value, objects keeping
// their key order and integers staying integers.
func decodeJSON(raw []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := jinja.NewDict()
			d := v.AsDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				k, _ := kt.(string)
				ev, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.Set(k, ev)
			}
			if _, err := dec.Token(); err != nil { // '}'
				return jinja.Undefined(), err
			}
			return v, nil
		case '[':
			var items []jinja.Value
			for dec.More() {
				ev, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, ev)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return jinja.Undefined(), err
			}
			return jinja.NewList(items), nil
		}
		return jinja.Undefined(), fmt.Errorf("unexpected %v", t)
	default:
		return jinja.FromGoValue(tok), nil
	}
}
