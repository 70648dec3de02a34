package server

import (
	"errors"
	"fmt"
	"sync"

	"oengine/grammar"
	pb "oengine/proto/openengine/v1"
	"oengine/toolcall"
)

// ErrNoVocabulary: guided decoding needs the model's tokenizer (the token
// pieces the constraint is compiled against).
var ErrNoVocabulary = errors.New("server: guided decoding needs the model's tokenizer")

// guidedCacheEntries bounds each model's compiled-constraint cache. With
// the per-constraint bounds (an automaton of at most 16384 states, 16 MiB
// of cached masks for a regular kind, 24 MiB of mask caches for a
// grammar) a model's constraints hold well under 1 GiB whatever clients
// send (docs/api.md "Guided decoding").
const guidedCacheEntries = 16

// guidedState is a model's constraint cache, built on first use: the
// token trie costs tens of milliseconds on a large vocabulary, and
// servers that never see a guided request never pay it.
type guidedState struct {
	once  sync.Once
	cache *grammar.Cache
	err   error
}

// Constraint compiles (or finds in the model's cache) the constraint of
// spec over the model's vocabulary (docs/api.md, "Structured outputs").
// Compile errors wrap grammar.ErrSyntax, ErrUnsupported or ErrTooLarge.
func (m *Model) Constraint(spec grammar.Spec) (grammar.Constraint, error) {
	if m.guided == nil || m.Tokenizer == nil {
		return nil, ErrNoVocabulary
	}
	g := m.guided
	g.once.Do(func() {
		n := m.Backend.Limits().Vocab
		if n <= 0 {
			n = m.Tokenizer.VocabSize()
		}
		pieces := make([][]byte, n)
		for id := range pieces {
			pieces[id] = m.Tokenizer.Piece(int32(id)) // nil past the tokenizer's ids
		}
		var eos []int32
		for _, id := range m.Tokenizer.EOGTokens() {
			if int(id) < n {
				eos = append(eos, id)
			}
		}
		if len(eos) == 0 {
			g.err = fmt.Errorf("%w: the vocabulary has no end-of-generation token", ErrNoVocabulary)
			return
		}
		g.cache = grammar.NewCache(grammar.NewVocab(pieces, eos), guidedCacheEntries)
	})
	if g.err != nil {
		return nil, g.err
	}
	return g.cache.Get(spec)
}

// GuidedSupported says whether the model takes constraints.
func (m *Model) GuidedSupported() bool { return m.guided != nil && m.Tokenizer != nil }

// ToolParser is the model's tool-call parser: Model.ToolCallParser by
// name, else the one its chat template teaches; nil: none.
func (m *Model) ToolParser() *toolcall.Parser {
	if m.ToolCallParser != "" {
		return toolcall.ByName(m.ToolCallParser)
	}
	return toolcall.ForTemplate(m.ChatTemplate)
}

// guidedModes are the GuidedDecoding kinds this server compiles, in the
// ModelInfo capability's terms.
func guidedModes() []pb.GuidedDecodingMode {
	modes := []pb.GuidedDecodingMode{
		pb.GuidedDecodingMode_GUIDED_DECODING_MODE_JSON_SCHEMA,
		pb.GuidedDecodingMode_GUIDED_DECODING_MODE_REGEX,
		pb.GuidedDecodingMode_GUIDED_DECODING_MODE_CHOICE,
		pb.GuidedDecodingMode_GUIDED_DECODING_MODE_JSON_OBJECT,
		pb.GuidedDecodingMode_GUIDED_DECODING_MODE_EBNF_GRAMMAR,
	}
	return modes
}

func (m *Model) guidedCaps() *pb.GuidedDecodingCapabilities {
	if !m.GuidedSupported() {
		return &pb.GuidedDecodingCapabilities{Supported: ptr(false)}
	}
	return &pb.GuidedDecodingCapabilities{Supported: ptr(true), Modes: guidedModes()}
}

// guidedBackends are the GuidedDecoding.backend values accepted: none,
// "auto", or this engine's own compiler.
var guidedBackends = map[string]bool{"": true, "auto": true, "oengine": true}

// guidedSpec maps the request's GuidedDecoding (docs/api.md, "Guided
// decoding") to a grammar spec; nil spec: no constraint.
func guidedSpec(g *pb.GuidedDecoding) (*grammar.Spec, *apiError) {
	if g == nil {
		return nil, nil
	}
	if !guidedBackends[g.GetBackend()] {
		return nil, unsupportedf("guided.backend %q is not available (use \"\", \"auto\" or \"oengine\")", g.GetBackend())
	}
	switch k := g.GetGuide().(type) {
	case nil:
		if g.GetBackend() != "" {
			return nil, invalidf("guided.backend is set but no guide is")
		}
		return nil, nil
	case *pb.GuidedDecoding_JsonSchema:
		if k.JsonSchema == "" {
			return nil, invalidf("guided.json_schema is empty")
		}
		return &grammar.Spec{Kind: grammar.KindJSONSchema, Source: k.JsonSchema}, nil
	case *pb.GuidedDecoding_Regex:
		if k.Regex == "" {
			return nil, invalidf("guided.regex is empty")
		}
		return &grammar.Spec{Kind: grammar.KindRegex, Source: k.Regex}, nil
	case *pb.GuidedDecoding_EbnfGrammar:
		if k.EbnfGrammar == "" {
			return nil, invalidf("guided.ebnf_grammar is empty")
		}
		return &grammar.Spec{Kind: grammar.KindGBNF, Source: k.EbnfGrammar}, nil
	case *pb.GuidedDecoding_Choice:
		cs := k.Choice.GetChoices()
		if len(cs) == 0 {
			return nil, invalidf("guided.choice.choices is empty")
		}
		for i, c := range cs {
			if c == "" {
				return nil, invalidf("guided.choice.choices[%d] is empty", i)
			}
		}
		return &grammar.Spec{Kind: grammar.KindChoice, Choices: cs}, nil
	case *pb.GuidedDecoding_JsonObject:
		return &grammar.Spec{Kind: grammar.KindJSONObject}, nil
	case *pb.GuidedDecoding_StructuralTag:
		return nil, unsupportedf("guided.structural_tag is not supported")
	default:
		return nil, unsupportedf("guided: unknown guide %T", k)
	}
}

// applyGuided compiles the request's constraint for m; every failure is
// a refusal before acceptance.
func applyGuided(m *Model, g *pb.GuidedDecoding) (grammar.Constraint, *apiError) {
	spec, aerr := guidedSpec(g)
	if spec == nil || aerr != nil {
		return nil, aerr
	}
	if !m.GuidedSupported() {
		return nil, unsupportedf("guided decoding is not supported for model %q (no tokenizer)", m.Name)
	}
	c, err := m.Constraint(*spec)
	if err != nil {
		return nil, guidedError("guided", err)
	}
	return c, nil
}

// GuidedFailure classifies a constraint compile error for the HTTP APIs.
func GuidedFailure(field string, err error) Failure { return guidedError(field, err).failure() }

// guidedError: a constraint the compiler refuses is the client's error
// (INVALID_ARGUMENT, with the compiler's reason); a model without a
// vocabulary is UNIMPLEMENTED.
func guidedError(field string, err error) *apiError {
	switch {
	case errors.Is(err, ErrNoVocabulary):
		return unsupportedf("%s: %v", field, err)
	case errors.Is(err, grammar.ErrTooLarge):
		return invalidf("%s: the constraint is too large: %v", field, err)
	}
	return invalidf("%s: %v", field, err)
}

// toolParserName is ModelInfo.tool_call_parser: "" when the model has no
// parser (or no tokenizer to render tools with).
func toolParserName(m *Model) string {
	if p := m.ToolParser(); p != nil && m.Tokenizer != nil {
		return p.Name()
	}
	return ""
}
