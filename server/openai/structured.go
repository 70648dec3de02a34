package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"oengine/grammar"
	"oengine/model/chat"
	"oengine/server"
	"oengine/toolcall"

	"github.com/ardanlabs/jinja"
)

// responseFormat is the request's response_format (docs/api.md,
// "Structured outputs").
type responseFormat struct {
	Type       string            `json:"type"`
	JSONSchema *jsonSchemaFormat `json:"json_schema"`
}

// jsonSchemaFormat is response_format's json_schema.
type jsonSchemaFormat struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict *bool           `json:"strict"`
}

// spec maps response_format to a constraint; nil: free text.
func (rf *responseFormat) spec() (*grammar.Spec, *apiError) {
	if rf == nil {
		return nil, nil
	}
	switch rf.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		return &grammar.Spec{Kind: grammar.KindJSONObject}, nil
	case "json_schema":
		js := rf.JSONSchema
		if js == nil || len(bytes.TrimSpace(js.Schema)) == 0 || string(bytes.TrimSpace(js.Schema)) == "null" {
			return nil, invalid("response_format.json_schema.schema", "response_format json_schema needs json_schema.schema")
		}
		// strict or not, the output follows the schema: generation is
		// constrained to it (a schema outside the subset is refused).
		return &grammar.Spec{Kind: grammar.KindJSONSchema, Source: string(js.Schema)}, nil
	}
	return nil, invalid("response_format.type", "unknown response_format type %q (text, json_object or json_schema)", rf.Type)
}

// constraint compiles spec for the model; a spec the compiler refuses is
// a 400 naming field.
func constraint(m *server.Model, spec *grammar.Spec, field string) (grammar.Constraint, *apiError) {
	if spec == nil {
		return nil, nil
	}
	c, err := m.Constraint(*spec)
	if err != nil {
		f := server.GuidedFailure(field, err)
		return nil, &apiError{status: f.Status, code: f.Code, msg: f.Message, reason: f.Reason, param: field}
	}
	return c, nil
}

// toolDef is one entry of tools.
type toolDef struct {
	Type     string        `json:"type"`
	Function *toolFunction `json:"function"`
}

// toolFunction is a function tool's definition.
type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// functionTools is chat's tools for fns: the form the Responses and
// Messages APIs' own tool lists are converted to.
func functionTools(fns []toolFunction) (json.RawMessage, *apiError) {
	if len(fns) == 0 {
		return nil, nil
	}
	defs := make([]toolDef, len(fns))
	for i := range fns {
		defs[i] = toolDef{Type: "function", Function: &fns[i]}
	}
	b, err := json.Marshal(defs)
	if err != nil {
		return nil, invalid("tools", "%v", err)
	}
	return b, nil
}

// namedToolChoice is chat's tool_choice forcing the function name.
func namedToolChoice(name string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": name}})
	return b
}

// toolPlan is what a chat request's tools ask of the generation.
type toolPlan struct {
	render []jinja.Value    // tools for the template; nil: none
	parser *toolcall.Parser // nil: the output is not parsed
	forced *grammar.Spec    // required / named: the call constraint
	tools  []toolcall.Tool  // the offered tools
}

// planTools decodes tools and tool_choice (docs/api.md, "Tool calling"):
// none renders no tools and parses nothing; auto renders them and parses
// the output; required and a named function also constrain the output to
// one call (of any tool / of that one) in the model family's syntax.
func planTools(m *server.Model, rawTools, rawChoice json.RawMessage, harmony bool) (toolPlan, *apiError) {
	var p toolPlan
	var defs []toolDef
	if t := bytes.TrimSpace(rawTools); len(t) > 0 && string(t) != "null" {
		if err := json.Unmarshal(t, &defs); err != nil {
			return p, invalid("tools", "tools must be a list of function tools: %v", err)
		}
	}
	for i, d := range defs {
		if d.Type != "function" || d.Function == nil || d.Function.Name == "" {
			return p, invalid(fmt.Sprintf("tools[%d]", i), "tools[%d] must be {\"type\": \"function\", \"function\": {\"name\": ...}}", i)
		}
		p.tools = append(p.tools, toolcall.Tool{Name: d.Function.Name, Parameters: d.Function.Parameters})
	}
	choice, named := "auto", ""
	if c := bytes.TrimSpace(rawChoice); len(c) > 0 && string(c) != "null" {
		var s string
		var obj struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(c, &s) == nil:
			choice = s
		case json.Unmarshal(c, &obj) == nil && obj.Type == "function" && obj.Function.Name != "":
			choice, named = "function", obj.Function.Name
		default:
			return p, invalid("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}")
		}
	}
	switch choice {
	case "none", "auto", "required", "function":
	default:
		return p, invalid("tool_choice", "unknown tool_choice %q", choice)
	}
	if len(p.tools) == 0 {
		if choice == "required" || choice == "function" {
			return p, invalid("tool_choice", "tool_choice %s needs tools", choice)
		}
		return p, nil
	}
	if choice == "none" {
		return p, nil
	}
	if harmony { // the calls come out of the reply's channels (chat.HarmonyParser)
		if choice != "auto" {
			return p, unsupported("tool_choice", "model %q writes the harmony format: tool_choice %s is not supported (auto or none)", m.Name, choice)
		}
		var err error
		if p.render, err = chat.DecodeTools(rawTools); err != nil {
			return p, invalid("tools", "%v", err)
		}
		return p, nil
	}
	p.parser = m.ToolParser()
	if p.parser == nil {
		return p, unsupported("tools", "model %q has no tool-call syntax in its chat template (no tool-call parser)", m.Name)
	}
	var err error
	if p.render, err = chat.DecodeTools(rawTools); err != nil {
		return p, invalid("tools", "%v", err)
	}
	forced := p.tools
	if choice == "function" {
		forced = nil
		for _, t := range p.tools {
			if t.Name == named {
				forced = []toolcall.Tool{t}
				break
			}
		}
		if forced == nil {
			return p, invalid("tool_choice", "tool_choice names %q, which is not among the tools", named)
		}
	}
	if choice == "required" || choice == "function" {
		schema, prefix, suffix, err := p.parser.Forced(forced)
		if err != nil {
			return p, invalid("tool_choice", "%v", err)
		}
		p.forced = &grammar.Spec{Kind: grammar.KindJSONSchema, Source: string(schema), Prefix: prefix, Suffix: suffix}
	}
	return p, nil
}

// toolCallJSON is one tool call as the API writes it: in a response
// (whole or a stream delta, with Index) and in an assistant message of a
// request (Index absent).
type toolCallJSON struct {
	Index    *int   `json:"index,omitempty"` // stream deltas only
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toolCallsOut gives parsed calls their ids (call_ + 96 random bits).
func toolCallsOut(calls []toolcall.Call, indexed bool) []toolCallJSON {
	out := make([]toolCallJSON, len(calls))
	for i, c := range calls {
		o := toolCallJSON{ID: newID("call_"), Type: "function"}
		o.Function.Name, o.Function.Arguments = c.Name, c.Arguments
		if indexed {
			k := i
			o.Index = &k
		}
		out[i] = o
	}
	return out
}

// toolText handles a choice's content when its output is parsed for tool
// calls: what may still become a call is held back (c.raw keeps it all).
func (c *choiceState) toolText(p *toolcall.Parser, content string) string {
	c.raw = append(c.raw, content...)
	safe := p.SafePrefix(string(c.raw))
	if safe <= c.sent {
		return ""
	}
	out := string(c.raw[c.sent:safe])
	c.sent = safe
	return out
}

// toolFinish parses the whole output: the content not yet sent and the
// calls.
func (c *choiceState) toolFinish(p *toolcall.Parser) (string, []toolcall.Call) {
	content, calls := p.Parse(string(c.raw))
	sent := string(c.raw[:c.sent])
	if len(calls) == 0 {
		return string(c.raw[c.sent:]), nil
	}
	if rest, ok := strings.CutPrefix(content, strings.TrimSpace(sent)); ok {
		return strings.TrimLeft(rest, " \t\r\n"), calls
	}
	return "", calls
}
