package server

import (
	"errors"
	"fmt"

	"oengine/engine"
	"oengine/model/tokenizer"
	"oengine/toolcall"
)

// Model is one served model: the names it answers to, what runs it, and
// what the protocol surfaces need of it. The server is built from a list
// of them (New; the first is the default model); sessions, streaming input,
// the SSE route and the HTTP APIs all read the same value.
type Model struct {
	// Name is the served model name; "": Backend.ModelName().
	Name string
	// Aliases are other names clients may use.
	Aliases []string
	// ID is ModelInfo.model_id: what a router hands its tokenizer loader
	// (`--model-id`; the CLI defaults it to the GGUF file's absolute path,
	// docs/deploy.md); "": Backend.ModelName().
	ID string
	// Auxiliary marks a helper model (the --fast-model of the SSE route):
	// it answers by name, but is not listed in supported_models, and
	// capacity, GetLoad and KV events describe the listed models only
	// (docs/api.md, "KV events for external routers").
	Auxiliary bool
	// Backend runs Generate, Abort, load figures and KV events; nil: the
	// Engine (FromEngine).
	Backend Backend
	// Engine is the in-process engine behind Backend. Sessions (KV pins),
	// streaming input (open input) and the SSE route need it; nil: the
	// model answers those as unsupported (token-level test fakes).
	Engine *engine.Engine
	// Tokenizer turns text into tokens for streamed text input and chat
	// templates and names token ids; nil: token ids only.
	Tokenizer *tokenizer.Tokenizer
	// ChatTemplate is the Jinja chat template (the GGUF's
	// tokenizer.chat_template or an override); "": prompts are plain text.
	ChatTemplate string
	// ToolCallParser names the tool-call parser (toolcall.Names); "":
	// the one the chat template's syntax shows (docs/api.md, "Tool
	// calling").
	ToolCallParser string

	// guided is the constraint cache, built on first use (guided.go).
	guided *guidedState
}

// NewModel is the served model of an engine with its tokenizer (nil: token
// ids only) and the tokenizer's GGUF chat template, under the engine's
// model name.
func NewModel(e *engine.Engine, tok *tokenizer.Tokenizer) Model {
	m := Model{Name: e.ModelName(), Engine: e, Tokenizer: tok}
	if tok != nil {
		m.ChatTemplate = tok.ChatTemplate()
	}
	return m
}

// Limits are the model's fixed figures.
func (m *Model) Limits() engine.Limits { return m.Backend.Limits() }

// Names are the served name followed by the aliases.
func (m *Model) Names() []string { return append([]string{m.Name}, m.Aliases...) }

// TokenText is the text of one token id ("" if unknown): the tokenizer's
// piece, made valid UTF-8, without a decoder per call.
func (m *Model) TokenText(id int32) string {
	if m.Tokenizer != nil {
		if int(id) >= m.Tokenizer.VocabSize() || id < 0 {
			return ""
		}
		return validUTF8(string(m.Tokenizer.Piece(id)))
	}
	return m.Backend.TokenText(id)
}

// normalize fills the defaults of a model given to New and checks it.
func (m Model) normalize(i int) (*Model, error) {
	if m.Backend == nil {
		if m.Engine == nil {
			return nil, fmt.Errorf("server: model %d has neither a backend nor an engine", i)
		}
		m.Backend = FromEngine(m.Engine)
	}
	if m.Name == "" {
		m.Name = m.Backend.ModelName()
	}
	if m.ID == "" {
		m.ID = m.Backend.ModelName()
	}
	if i == 0 && m.Auxiliary {
		return nil, errors.New("server: the default (first) model cannot be auxiliary")
	}
	m.Aliases = append([]string(nil), m.Aliases...)
	if m.ToolCallParser != "" && toolcall.ByName(m.ToolCallParser) == nil {
		return nil, fmt.Errorf("server: model %q: unknown tool-call parser %q (one of %v)", m.Name, m.ToolCallParser, toolcall.Names())
	}
	m.guided = &guidedState{}
	for _, n := range m.Names() {
		if n == "" {
			return nil, fmt.Errorf("server: model %d has an empty name", i)
		}
	}
	return &m, nil
}

// indexModels builds the name index of the served models.
func indexModels(models []Model) ([]*Model, map[string]*Model, error) {
	if len(models) == 0 {
		return nil, nil, errors.New("server: no model")
	}
	out := make([]*Model, 0, len(models))
	byName := map[string]*Model{}
	for i, in := range models {
		m, err := in.normalize(i)
		if err != nil {
			return nil, nil, err
		}
		for _, n := range m.Names() {
			if _, dup := byName[n]; dup {
				return nil, nil, fmt.Errorf("server: model name %q used twice", n)
			}
			byName[n] = m
		}
		out = append(out, m)
	}
	return out, byName, nil
}

// Models are the served models; the first is the default.
func (s *Server) Models() []*Model { return s.models }

// listed are the models announced in supported_models and covered by
// GetLoad and the metrics of the router-facing views: every model but the
// auxiliary ones. The first (default) model is always listed.
func (s *Server) listed() []*Model {
	out := make([]*Model, 0, len(s.models))
	for _, m := range s.models {
		if !m.Auxiliary {
			out = append(out, m)
		}
	}
	return out
}

// Lookup finds a served model by name or alias; "" is the default model.
func (s *Server) Lookup(name string) (*Model, bool) {
	if name == "" {
		return s.models[0], true
	}
	m, ok := s.byName[name]
	return m, ok
}
