// Package toolcall finds the function calls in a model's output, in the
// syntax of the model's family, and states that syntax as a constraint
// so that a call can be forced (docs/api.md, "Tool calling"). Parsers:
//
//   - hermes: Qwen2.5, Qwen3 and Hermes, `<tool_call>{"name": ..,
//     "arguments": {..}}</tool_call>`, one block per call;
//   - llama3_json: Llama 3.x, a bare `{"name": .., "parameters": {..}}`
//     (several separated by `;`);
//   - mistral: `[TOOL_CALLS][{"name": .., "arguments": {..}}, ..]` (the
//     marker is a control token, so the text may start at the list).
package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Call is one parsed function call; Arguments is a JSON object's text.
type Call struct {
	Name      string
	Arguments string
}

// Tool is a function tool offered to the model.
type Tool struct {
	Name string
	// Parameters is the JSON Schema of the arguments (an object schema);
	// empty: any JSON object.
	Parameters json.RawMessage
}

// ErrNoTools: a forced call needs at least one tool.
var ErrNoTools = errors.New("toolcall: no tool to call")

// Parser reads one family's tool-call syntax.
type Parser struct {
	name string
	// open starts a call in the text ("" for llama3_json: a JSON object
	// at the start of the output); close ends it.
	open, close string
	// argsKey is the arguments' key in the call object.
	argsKey string
	// list: the calls are one JSON list after open (mistral).
	list bool
}

var parsers = map[string]*Parser{
	"hermes":      {name: "hermes", open: "<tool_call>", close: "</tool_call>", argsKey: "arguments"},
	"llama3_json": {name: "llama3_json", argsKey: "parameters"},
	"mistral":     {name: "mistral", open: "[TOOL_CALLS]", argsKey: "arguments", list: true},
}

// Names are the parser names.
func Names() []string { return []string{"hermes", "llama3_json", "mistral"} }

// ByName returns the named parser, or nil.
func ByName(name string) *Parser { return parsers[name] }

// ForTemplate picks the parser of a chat template's family from the
// syntax it teaches the model; nil when it shows none.
func ForTemplate(tmpl string) *Parser {
	switch {
	case strings.Contains(tmpl, "<tool_call>"):
		return parsers["hermes"]
	case strings.Contains(tmpl, "[TOOL_CALLS]"):
		return parsers["mistral"]
	case strings.Contains(tmpl, `"parameters"`) && (strings.Contains(tmpl, "<|python_tag|>") || strings.Contains(tmpl, "ipython")):
		return parsers["llama3_json"]
	}
	return nil
}

// Name is the parser's name (ModelInfo.tool_call_parser).
func (p *Parser) Name() string { return p.name }

// Parse splits a whole output into its content (text outside the calls)
// and its calls. Text that is not a well-formed call stays content: a
// model that writes `<tool_call>` and then prose has made no call.
func (p *Parser) Parse(text string) (content string, calls []Call) {
	switch {
	case p.list:
		return p.parseList(text)
	case p.open == "":
		return p.parseBare(text)
	}
	var b strings.Builder
	rest := text
	for {
		i := strings.Index(rest, p.open)
		if i < 0 {
			break
		}
		body := rest[i+len(p.open):]
		j := strings.Index(body, p.close)
		end := len(body)
		if j >= 0 {
			end = j
		}
		c, ok := p.call([]byte(strings.TrimSpace(body[:end])))
		if !ok {
			break
		}
		b.WriteString(rest[:i])
		calls = append(calls, c)
		if j < 0 {
			rest = ""
			break
		}
		rest = body[j+len(p.close):]
	}
	b.WriteString(rest)
	if len(calls) == 0 {
		return text, nil
	}
	return strings.TrimSpace(b.String()), calls
}

// parseBare reads llama3_json: the whole output is one or more call
// objects separated by `;` (whitespace around them allowed).
func (p *Parser) parseBare(text string) (string, []Call) {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "{") {
		return text, nil
	}
	dec := json.NewDecoder(strings.NewReader(t))
	var calls []Call
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return text, nil
		}
		c, ok := p.call(raw)
		if !ok {
			return text, nil
		}
		calls = append(calls, c)
		rest := strings.TrimSpace(t[dec.InputOffset():])
		if rest == "" {
			return "", calls
		}
		if !strings.HasPrefix(rest, ";") {
			return text, nil
		}
		t = strings.TrimSpace(rest[1:])
		if t == "" {
			return "", calls
		}
		dec = json.NewDecoder(strings.NewReader(t))
	}
}

// parseList reads mistral: optional content, the marker (or, with the
// marker lost as a control token, the output's start), a JSON list.
func (p *Parser) parseList(text string) (string, []Call) {
	content, body := "", strings.TrimSpace(text)
	if i := strings.Index(text, p.open); i >= 0 {
		content, body = strings.TrimSpace(text[:i]), strings.TrimSpace(text[i+len(p.open):])
	}
	if !strings.HasPrefix(body, "[") {
		return text, nil
	}
	var items []json.RawMessage
	dec := json.NewDecoder(strings.NewReader(body))
	if err := dec.Decode(&items); err != nil || len(items) == 0 || strings.TrimSpace(body[dec.InputOffset():]) != "" {
		return text, nil
	}
	calls := make([]Call, 0, len(items))
	for _, it := range items {
		c, ok := p.call(it)
		if !ok {
			return text, nil
		}
		calls = append(calls, c)
	}
	return content, calls
}

// call decodes one call object: a name and an arguments object (under
// the parser's key, or the other common one).
func (p *Parser) call(raw []byte) (Call, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return Call{}, false
	}
	var name string
	if err := json.Unmarshal(obj["name"], &name); err != nil || name == "" {
		return Call{}, false
	}
	args, ok := obj[p.argsKey]
	if !ok {
		for _, k := range []string{"arguments", "parameters"} {
			if args, ok = obj[k]; ok {
				break
			}
		}
	}
	if !ok || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	// Arguments given as a JSON string holding the object are unwrapped.
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = json.RawMessage(s)
	}
	var check map[string]any
	if json.Unmarshal(args, &check) != nil || check == nil {
		return Call{}, false
	}
	var b bytes.Buffer
	if err := json.Compact(&b, args); err != nil {
		return Call{}, false
	}
	return Call{Name: name, Arguments: b.String()}, true
}

// SafePrefix is how much of text (an output so far) can be sent as
// content now: everything before what may still become a call (a marker,
// a part of one at the end, or a call object or list at the start of
// the output). A streamed response holds the rest back until the output
// ends and Parse decides.
func (p *Parser) SafePrefix(text string) int {
	t := strings.TrimLeft(text, " \t\r\n")
	if p.open == "" || p.list {
		switch {
		case t == "":
			return 0
		case p.open == "" && t[0] == '{', p.list && t[0] == '[':
			return 0
		case p.open == "":
			return len(text)
		}
	}
	if i := strings.Index(text, p.open); i >= 0 {
		return i
	}
	for k := min(len(p.open)-1, len(text)); k > 0; k-- {
		if strings.HasPrefix(p.open, text[len(text)-k:]) {
			return len(text) - k
		}
	}
	return len(text)
}

// CallSchema is the JSON Schema of one call object of tool t in this
// family's syntax: {"name": const, args key: t's parameters}.
func (p *Parser) CallSchema(t Tool) (json.RawMessage, error) {
	params := t.Parameters
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		params = json.RawMessage(`{"type":"object"}`)
	}
	name, _ := json.Marshal(t.Name)
	key, _ := json.Marshal(p.argsKey)
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"name":{"const":%s},%s:%s},"required":["name",%s]}`, name, key, params, key)), nil
}

// Forced is the constraint that makes the output exactly one call of one
// of tools: a JSON Schema (anyOf over the tools' call objects) and the
// literal text around it in this family's syntax.
func (p *Parser) Forced(tools []Tool) (schema json.RawMessage, prefix, suffix string, err error) {
	if len(tools) == 0 {
		return nil, "", "", ErrNoTools
	}
	alts := make([]string, len(tools))
	for i, t := range tools {
		s, err := p.CallSchema(t)
		if err != nil {
			return nil, "", "", err
		}
		alts[i] = string(s)
	}
	schema = json.RawMessage(alts[0])
	if len(alts) > 1 {
		schema = json.RawMessage(`{"anyOf":[` + strings.Join(alts, ",") + `]}`)
	}
	switch {
	case p.list:
		// The marker is a control token the text cannot hold: the list.
		return schema, "[", "]", nil
	case p.open == "":
		return schema, "", "", nil
	}
	return schema, p.open + "\n", "\n" + p.close, nil
}
