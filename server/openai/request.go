package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"oengine/engine"
	"oengine/model/chat"
	"oengine/sampling"
)

// commonRequest holds the fields completions and chat completions share
// (docs/api.md, "OpenAI-compatible HTTP API"). Unknown fields are ignored,
// as OpenAI does.
type commonRequest struct {
	Model             string          `json:"model"`
	MaxTokens         *int            `json:"max_tokens"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	TopK              *int32          `json:"top_k"`
	MinP              *float64        `json:"min_p"`
	PresencePenalty   *float64        `json:"presence_penalty"`
	FrequencyPenalty  *float64        `json:"frequency_penalty"`
	RepetitionPenalty *float64        `json:"repetition_penalty"`
	Seed              *int64          `json:"seed"`
	N                 *int            `json:"n"`
	Stop              json.RawMessage `json:"stop"`
	IgnoreEOS         bool            `json:"ignore_eos"`
	MinTokens         int             `json:"min_tokens"`
	User              string          `json:"user"`
	Stream            bool            `json:"stream"`
	StreamOptions     *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// LogitBias maps token ids (as strings) to a bias in [-100, 100]
	// added to their logits (sampling.Params.LogitBias).
	LogitBias map[string]float64 `json:"logit_bias"`
	// Fields that cannot be honoured: refused with 400, never ignored.
	BestOf *int `json:"best_of"`
	// ResponseFormat constrains the output (structured.go).
	ResponseFormat *responseFormat `json:"response_format"`
}

// completionRequest is POST /v1/completions.
type completionRequest struct {
	commonRequest
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int            `json:"logprobs"`
	Echo     bool            `json:"echo"`
	Suffix   *string         `json:"suffix"`
}

// chatRequest is POST /v1/chat/completions.
type chatRequest struct {
	commonRequest
	Messages            []chatMessage   `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Logprobs            bool            `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	// SplitReasoning (oengine): false keeps <think> blocks in content.
	SplitReasoning *bool `json:"split_reasoning"`
	// Session (oengine): continue a generation session (docs/api.md).
	Session *sessionContinuation `json:"session"`
}

// sessionContinuation is the chat request's oengine extension field.
type sessionContinuation struct {
	ID string `json:"id"`
	// Mode: "append" (default; the conversation continues the session's
	// retained tokens, diverging history is replaced from the first
	// differing token) or "branch" (nothing is retained).
	Mode string `json:"mode"`
}

type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Name             string          `json:"name"`
	ToolCallID       string          `json:"tool_call_id"`
	ToolCalls        []toolCallJSON  `json:"tool_calls"`
}

// readJSON reads the body (at most max bytes: 413 beyond) into v.
func readJSON(w http.ResponseWriter, r *http.Request, max int64, v any) *apiError {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "", "Content-Type %q: the body must be application/json", ct)
	}
	if r.ContentLength > max {
		return errorf(http.StatusRequestEntityTooLarge, "payload_too_large", "", "request body of %d bytes exceeds %d bytes", r.ContentLength, max)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errorf(http.StatusRequestEntityTooLarge, "payload_too_large", "", "request body exceeds %d bytes", max)
		}
		return invalid("", "reading the body: %v", err)
	}
	if !utf8.Valid(body) {
		return invalid("", "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return invalid(te.Field, "%s: expected %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return invalid("", "malformed JSON: %v", err)
	}
	if dec.More() {
		return invalid("", "unexpected data after the JSON object")
	}
	return nil
}

// refuse reports fields that cannot be honoured.
func (c *commonRequest) refuse() *apiError {
	if c.BestOf != nil && *c.BestOf > 1 && (c.N == nil || *c.BestOf != *c.N) {
		return unsupported("best_of", "best_of other than n is not supported")
	}
	return nil
}

// logitBias decodes logit_bias: token ids as decimal keys, biases in
// [-100, 100] (checked by sampling), ordered by id.
func logitBias(m map[string]float64) ([]sampling.TokenBias, *apiError) {
	out := make([]sampling.TokenBias, 0, len(m))
	for k, v := range m {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return nil, invalid("logit_bias", "logit_bias key %q is not a token id", k)
		}
		if math.IsNaN(v) || v < -sampling.MaxLogitBias || v > sampling.MaxLogitBias {
			return nil, invalid("logit_bias", "logit_bias of token %s must be in [-100, 100], got %v", k, v)
		}
		out = append(out, sampling.TokenBias{ID: int32(id), Bias: float32(v)})
	}
	slices.SortFunc(out, func(a, b sampling.TokenBias) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// stops decodes stop: a string or a list of strings.
func stops(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid("stop", "stop must be a string or a list of strings")
	}
	out := list[:0]
	for _, s := range list {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// engineRequest builds the generation settings shared by both routes.
func (c *commonRequest) engineRequest(maxTokens *int) (engine.Request, *apiError) {
	var r engine.Request
	if aerr := c.refuse(); aerr != nil {
		return r, aerr
	}
	if c.N != nil {
		if *c.N < 1 {
			return r, invalid("n", "n must be >= 1, got %d", *c.N)
		}
		r.N = *c.N
	}
	if maxTokens != nil {
		if *maxTokens < 1 {
			return r, invalid("max_tokens", "max_tokens must be >= 1, got %d", *maxTokens)
		}
		r.MaxTokens = *maxTokens
	}
	if c.MinTokens < 0 {
		return r, invalid("min_tokens", "min_tokens must be >= 0, got %d", c.MinTokens)
	}
	r.MinTokens = c.MinTokens
	r.Sampling = sampling.Options{
		Temperature: c.Temperature, TopP: c.TopP, TopK: c.TopK, MinP: c.MinP,
		PresencePenalty: c.PresencePenalty, FrequencyPenalty: c.FrequencyPenalty, RepetitionPenalty: c.RepetitionPenalty,
	}
	if c.Seed != nil {
		sd := uint64(*c.Seed)
		r.Sampling.Seed = &sd
	}
	if len(c.LogitBias) > 0 {
		var aerr *apiError
		if r.Sampling.LogitBias, aerr = logitBias(c.LogitBias); aerr != nil {
			return r, aerr
		}
	}
	st, aerr := stops(c.Stop)
	if aerr != nil {
		return r, aerr
	}
	r.Stop = engine.StopParams{Strings: st, IgnoreEOS: c.IgnoreEOS}
	return r, nil
}

// promptInput is one prompt of a completions request: text (the engine
// tokenizes it with the BOS rule) or token ids used as given.
type promptInput struct {
	text string
	ids  []int32
}

// prompts decodes prompt: a string, a list of strings, a list of token
// ids, or a list of token-id lists.
func prompts(raw json.RawMessage) ([]promptInput, *apiError) { return inputList(raw, "prompt") }

// inputList decodes field (prompt, or the embeddings' input) of any of the
// forms prompts takes.
func inputList(raw json.RawMessage, field string) ([]promptInput, *apiError) {
	bad := invalid(field, "%s must be a string, a list of strings, a list of token ids or a list of token-id lists", field)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid(field, "%s is required", field)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []promptInput{{text: s}}, nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil && len(strs) > 0 {
		out := make([]promptInput, len(strs))
		for i, s := range strs {
			out[i] = promptInput{text: s}
		}
		return out, nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return []promptInput{{ids: ids}}, nil
	}
	var lists [][]int32
	if json.Unmarshal(raw, &lists) == nil && len(lists) > 0 {
		out := make([]promptInput, len(lists))
		for i, l := range lists {
			if len(l) == 0 {
				return nil, invalid(field, "%s[%d] is empty", field, i)
			}
			out[i] = promptInput{ids: l}
		}
		return out, nil
	}
	return nil, bad
}

// messages converts the chat messages to the template's form.
func messages(in []chatMessage) ([]chat.Message, *apiError) {
	if len(in) == 0 {
		return nil, invalid("messages", "messages must not be empty")
	}
	out := make([]chat.Message, len(in))
	for i, m := range in {
		role := m.Role
		switch role {
		case "developer":
			role = chat.RoleSystem
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return nil, invalid(fmt.Sprintf("messages[%d].role", i), "unknown role %q", m.Role)
		}
		text, aerr := content(m.Content, i)
		if aerr != nil {
			return nil, aerr
		}
		cm := chat.Message{Role: role, Content: text, ReasoningContent: m.ReasoningContent, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		out[i] = cm
	}
	return out, nil
}

// content decodes a message's content: a string, null, or a list of text
// parts (their texts joined). Other parts (images, audio) are refused.
func content(raw json.RawMessage, i int) (string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid(fmt.Sprintf("messages[%d].content", i), "content must be a string or a list of content parts")
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" {
			return "", unsupported(fmt.Sprintf("messages[%d].content[%d]", i, j), "content part type %q is not supported (text only)", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}
