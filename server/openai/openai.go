// Package openai serves the OpenAI-compatible HTTP API on the server's HTTP
// listener: GET /v1/models, POST /v1/completions, POST
// /v1/chat/completions (streaming and not) and generation sessions over
// HTTP (POST /v1/sessions, GET/PATCH/DELETE /v1/sessions/{id}). It uses
// only the server package's exported API: the served models (name,
// aliases, backend, tokenizer, chat template), their Submit, the session
// manager and service, and the metrics. docs/api.md describes the wire
// format.
package openai

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"oengine/model/chat"
	"oengine/server"
)

// Route labels of the request metrics.
const (
	RouteCompletions = "/v1/completions"
	RouteChat        = "/v1/chat/completions"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 8 << 20
	DefaultWriteTimeout = 30 * time.Second
	DefaultOwnedBy      = "oengine"
)

// Config configures the API.
type Config struct {
	// TemplateLimits bound each chat template render (chat.Limits; zero:
	// the defaults). A template that fails its probe render at Enable is
	// replaced by the plain fallback, with a warning.
	TemplateLimits chat.Limits
	// NoReasoningSplit keeps <think> blocks in content instead of moving
	// them to reasoning_content (--no-reasoning-split); a request's
	// split_reasoning field decides for itself.
	NoReasoningSplit bool
	// MaxBodyBytes caps a request body (413 beyond); 0: 8 MiB.
	MaxBodyBytes int64
	// WriteTimeout bounds one write of a streamed response; a reader
	// stalled longer is cancelled (a slower one only pauses its sequence);
	// 0: 30 s.
	WriteTimeout time.Duration
	// Created is the `created` time of every model in /v1/models; zero:
	// when Enable ran.
	Created time.Time
	// OwnedBy is the models' owned_by; "": "oengine".
	OwnedBy string
	// CORSOrigins are the other origins whose pages may call the routes
	// from a browser (--cors-origin; "*": any; server.CORS). A request
	// from any other foreign origin is refused with 403.
	CORSOrigins []string
}

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Created.IsZero() {
		c.Created = time.Now()
	}
	if c.OwnedBy == "" {
		c.OwnedBy = DefaultOwnedBy
	}
	return c
}

// api is the state of the routes of one server.
type api struct {
	s   *server.Server
	log *slog.Logger
	cfg Config
	// models by served model (pointer identity, as Lookup returns it).
	models map[*server.Model]*modelState
	// fingerprint is system_fingerprint: the same for every response of
	// this process.
	fingerprint string
	cors        server.CORS // cfg.CORSOrigins
}

// modelState is what the API prepared for one served model.
type modelState struct {
	m   *server.Model
	enc *chat.Encoder // nil: no tokenizer, chat is refused
	// reasoning: the template is Qwen3-style (it prints <think>), so
	// generated reasoning blocks are split out by default.
	reasoning bool
	// harmony: the template writes gpt-oss's harmony format (channels), so
	// replies are parsed into content, reasoning and tool calls by default.
	harmony bool
}

// Enable registers the routes on the server's HTTP listener; call it once,
// before Serve. The session routes answer 404 session_not_found unless the
// server's sessions are enabled.
func Enable(s *server.Server, cfg Config) error {
	a := &api{s: s, log: s.Logger(), cfg: cfg.withDefaults(), models: map[*server.Model]*modelState{},
		fingerprint: "fp_oengine_" + s.InstanceID(), cors: server.CORS{Origins: cfg.CORSOrigins}}
	for _, m := range s.Models() {
		a.models[m] = a.prepare(m)
	}
	routes := []struct {
		pattern string
		h       http.HandlerFunc
	}{
		{"GET /v1/models", a.listModels},
		{"GET /v1/models/{model...}", a.getModel},
		{"POST " + RouteCompletions, a.completions},
		{"POST " + RouteChat, a.chatCompletions},
		{"POST " + RouteResponses, a.responses},
		{"POST " + RouteMessages, a.anthropicMessages},
		{"POST /v1/messages/count_tokens", a.countTokens},
		{"POST " + RouteEmbeddings, a.embeddings},
		{"POST " + RouteRerank, a.rerank},
		{"POST /rerank", a.rerank},
		{"POST /v2/rerank", a.rerank},
		{"POST /v2/embed", a.cohereEmbed},
		{"POST /embed", a.teiEmbed},
		{"POST /similarity", a.teiSimilarity},
		{"POST /{$}", a.teiRoot},
		{"POST /tokenize", a.tokenize},
		{"POST /detokenize", a.detokenize},
		{"POST /v1/sessions", a.openSession},
		{"GET /v1/sessions/{id}", a.getSession},
		{"PATCH /v1/sessions/{id}", a.renewSession},
		{"DELETE /v1/sessions/{id}", a.closeSession},
	}
	// Each path also answers the CORS preflight of its methods, without a
	// key (a browser sends none with it).
	methods := map[string][]string{}
	var paths []string
	for _, rt := range routes {
		method, path, _ := strings.Cut(rt.pattern, " ")
		if methods[path] == nil {
			paths = append(paths, path)
		}
		methods[path] = append(methods[path], method)
		if err := s.HandleHTTP(rt.pattern, a.fromOrigin(s.Authenticated(rt.h))); err != nil {
			return err
		}
	}
	for _, path := range paths {
		allowed := strings.Join(methods[path], ", ")
		if err := s.HandleHTTP("OPTIONS "+path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			origin, ok := a.cors.Check(w, r)
			if !a.cors.Preflight(w, r, ok, allowed) {
				a.reject(w, foreignOrigin(origin))
			}
		})); err != nil {
			return err
		}
	}
	return nil
}

// fromOrigin refuses a browser request from a foreign origin that is not
// allowed (Config.CORSOrigins) before h runs, and gives an allowed one
// its CORS headers.
func (a *api) fromOrigin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin, ok := a.cors.Check(w, r); origin != "" && !ok {
			a.reject(w, foreignOrigin(origin))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func foreignOrigin(origin string) *apiError {
	e := errorf(http.StatusForbidden, "origin_not_allowed", "", "origin %q is not allowed to call this server from a browser (--cors-origin)", origin)
	e.reason = "ORIGIN_NOT_ALLOWED"
	return e
}

// prepare builds the chat encoder of a model.
func (a *api) prepare(m *server.Model) *modelState {
	ms := &modelState{m: m}
	if m.Tokenizer == nil {
		a.log.Info("server: OpenAI chat completions need a tokenizer; this model serves completions only", "model", m.Name)
		return ms
	}
	enc, err := chat.NewEncoderLimits(m.Tokenizer, m.ChatTemplate, a.cfg.TemplateLimits)
	if err != nil {
		a.log.Warn("server: chat template unusable, chat prompts use the plain fallback", "model", m.Name, "err", err)
		enc, err = chat.NewEncoderLimits(m.Tokenizer, "", a.cfg.TemplateLimits)
		if err != nil {
			a.log.Error("server: plain chat encoder", "model", m.Name, "err", err)
			return ms
		}
	}
	ms.enc = enc
	ms.reasoning = enc.Templated() && strings.Contains(m.ChatTemplate, chat.ThinkOpen)
	ms.harmony = enc.Templated() && chat.IsHarmony(m.ChatTemplate)
	return ms
}

// model resolves a request's model name ("" is the default model).
func (a *api) model(name string) (*modelState, *apiError) {
	m, ok := a.s.Lookup(name)
	if !ok {
		return nil, errorf(http.StatusNotFound, "model_not_found", "model", "model %q is not served here", name)
	}
	return a.models[m], nil
}

// modelObject is one entry of /v1/models.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// Root is the served name an alias stands for (vLLM's field).
	Root string `json:"root,omitempty"`
	// MaxModelLen is the context length (vLLM's field).
	MaxModelLen int `json:"max_model_len,omitempty"`
	// ToolCallParser is the model's tool-call syntax (oengine; as
	// ModelInfo.tool_call_parser, docs/api.md "Tool calling").
	ToolCallParser string `json:"tool_call_parser,omitempty"`
}

func (a *api) modelObjects() []modelObject {
	var out []modelObject
	for _, m := range a.s.Models() {
		parser := ""
		if p := m.ToolParser(); p != nil && m.Tokenizer != nil {
			parser = p.Name()
		}
		for _, n := range m.Names() {
			out = append(out, modelObject{ID: n, Object: "model", Created: a.cfg.Created.Unix(), OwnedBy: a.cfg.OwnedBy,
				Root: m.Name, MaxModelLen: m.Limits().ContextLen, ToolCallParser: parser})
		}
	}
	return out
}

func (a *api) listModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{"list", a.modelObjects()})
}

func (a *api) getModel(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	for _, o := range a.modelObjects() {
		if o.ID == name {
			writeJSON(w, http.StatusOK, o)
			return
		}
	}
	a.reject(w, errorf(http.StatusNotFound, "model_not_found", "model", "model %q is not served here", name))
}

// apiError is an error in OpenAI's shape with its HTTP status.
type apiError struct {
	status  int
	code    string // docs/design.md §1's HTTP code, e.g. model_not_found
	param   string
	msg     string
	reason  string // ErrorInfo reason, for the rejected metric
	retryIn bool   // Retry-After
}

func errorf(status int, code, param, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, param: param, msg: "server: " + fmt.Sprintf(format, args...),
		reason: strings.ToUpper(code)}
}

func invalid(param, format string, args ...any) *apiError {
	e := errorf(http.StatusBadRequest, "invalid_request", param, format, args...)
	e.reason = "INVALID_ARGUMENT"
	return e
}

func unsupported(param, format string, args ...any) *apiError {
	e := errorf(http.StatusBadRequest, "unsupported_feature", param, format, args...)
	e.reason = "UNSUPPORTED_FEATURE"
	return e
}

// classified converts an error of the engine, sessions or the server's
// services (server.Classify).
func classified(err error) *apiError {
	f := server.Classify(err)
	return &apiError{status: f.Status, code: f.Code, msg: f.Message, reason: f.Reason, retryIn: f.Retryable &&
		(f.Status == http.StatusTooManyRequests || f.Status == http.StatusServiceUnavailable)}
}

// errorType is OpenAI's error.type for a status.
func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

func (e *apiError) body() errorBody {
	d := errorDetail{Message: e.msg, Type: errorType(e.status), Code: e.code}
	if e.param != "" {
		d.Param = &e.param
	}
	return errorBody{Error: d}
}

// reject answers an error before a response started, counted as a
// rejected request.
func (a *api) reject(w http.ResponseWriter, e *apiError) {
	a.s.Metrics().Rejected(e.reason)
	writeError(w, e)
}

// writeError answers e (Retry-After for overload and draining) in the
// route's form: OpenAI's, or TEI's or Anthropic's behind their writers.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryIn || e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	switch w.(type) {
	case teiWriter:
		writeJSON(w, e.status, e.teiBody())
		return
	case anthropicWriter:
		writeJSON(w, e.status, e.anthropicBody())
		return
	}
	writeJSON(w, e.status, e.body())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
