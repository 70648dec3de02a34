package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"oengine/engine"
	"oengine/model/chat"
	"oengine/model/tokenizer"
	"oengine/sampling"
	"oengine/sessions"
)

// SSE route limits (decisions.md §5).
const (
	// SSEMaxPromptBytes caps the prompt's UTF-8 bytes after JSON decoding.
	SSEMaxPromptBytes = 32 << 10
	// SSEMaxBodyBytes caps the request body read.
	SSEMaxBodyBytes = 256 << 10
)

// Defaults of SSEConfig.
const (
	DefaultSSEMaxTokens    = 1024
	DefaultSSEKeepAlive    = 15 * time.Second
	DefaultSSEWriteTimeout = 30 * time.Second
)

// SSEConfig configures POST /session/{id}/generate, a short side generation
// in the context of a generation session that reads and changes nothing of
// the session. Clients choose no setting: everything comes from here.
type SSEConfig struct {
	// FastModel is the served name of the --fast-model backend; empty: none.
	// A configured fast model that is not served (it failed to load) or
	// that refuses the request before acceptance falls back to the
	// session's model.
	FastModel string
	// MaxTokens is the output budget (--sse-max-tokens); 0: 1024. It is
	// cut to the model's output cap.
	MaxTokens int
	// Sampling are the generation settings (--sse-temperature, ...); absent
	// fields take the engine defaults.
	Sampling sampling.Options
	// KeepAlive is the interval of comment lines while no event is sent
	// (--sse-keepalive); 0: 15 s.
	KeepAlive time.Duration
	// WriteTimeout bounds one write to the client; a reader stalled longer
	// is cancelled (--sse-write-timeout); 0: 30 s. A slower reader only
	// pauses its sequence (engine backpressure).
	WriteTimeout time.Duration
	// CORSOrigins are the origins answered with CORS headers and preflight
	// (--cors-origin, repeatable); "*" allows any origin.
	CORSOrigins []string
	// Tokenizer returns the tokenizer (and with it the chat template) of a
	// served model name; nil or a nil result: the engine's tokenizer when
	// its adapter has Unwrap() *tokenizer.Tokenizer, else the engine's
	// Encode with plain text.
	Tokenizer func(model string) *tokenizer.Tokenizer
	// ChatTemplates override the GGUF chat template per served model name
	// ("" entries: plain text).
	ChatTemplates map[string]string
}

func (c SSEConfig) withDefaults() SSEConfig {
	if c.MaxTokens <= 0 {
		c.MaxTokens = DefaultSSEMaxTokens
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultSSEKeepAlive
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultSSEWriteTimeout
	}
	return c
}

// sseRoute is the state of the SSE route of one server.
type sseRoute struct {
	s       *Server
	cfg     SSEConfig
	metrics *sseMetrics
	// encoders by served model name; built once at EnableSSE.
	encoders map[string]promptEncoder
}

// promptEncoder turns the user's prompt into prompt tokens for one model.
type promptEncoder interface {
	Encode(user string) (chat.Prompt, error)
}

// engineEncoder is the fallback without a *tokenizer.Tokenizer: plain text
// with the BOS rule and no special-token parsing.
type engineEncoder struct{ tok engine.Tokenizer }

func (e engineEncoder) Encode(user string) (chat.Prompt, error) {
	return chat.Prompt{Tokens: e.tok.Encode(user, true, false), Text: user}, nil
}

// SSEPattern is the route EnableSSE registers.
const SSEPattern = "/session/{id}/generate"

var (
	sseMu      sync.Mutex               // serializes EnableSSE and protects sseEnabled
	sseEnabled = map[*Server]struct{}{} // servers whose route is registered
)

// EnableSSE registers POST /session/{id}/generate on the HTTP listener;
// call it once, before Serve. It needs EnableSessions for the sessions it
// names (without it every id is unknown).
func (s *Server) EnableSSE(cfg SSEConfig) error {
	sseMu.Lock()
	defer sseMu.Unlock()
	if _, dup := sseEnabled[s]; dup {
		return errors.New("server: SSE already enabled")
	}
	cfg = cfg.withDefaults()
	if cfg.FastModel != "" {
		if _, ok := s.byName[cfg.FastModel]; !ok {
			s.log.Warn("server: SSE fast model is not served; the session's model answers", "fast_model", cfg.FastModel)
		}
	}
	rt := &sseRoute{s: s, cfg: cfg, encoders: map[string]promptEncoder{}}
	m, err := newSSEMetrics(s.metrics.Registry())
	if err != nil {
		return err
	}
	rt.metrics = m
	for _, md := range s.models {
		enc, err := rt.buildEncoder(md)
		if err != nil {
			return err
		}
		if enc != nil {
			rt.encoders[md.name] = enc
		}
	}
	s.HandleHTTP(SSEPattern, rt)
	sseEnabled[s] = struct{}{}
	go func() {
		<-s.shutdown
		sseMu.Lock()
		delete(sseEnabled, s)
		sseMu.Unlock()
	}()
	return nil
}

// buildEncoder picks the prompt encoder of a model: the chat template when
// there is one and it can render a single user message, else plain text.
func (rt *sseRoute) buildEncoder(md *model) (promptEncoder, error) {
	var tok *tokenizer.Tokenizer
	if rt.cfg.Tokenizer != nil {
		tok = rt.cfg.Tokenizer(md.name)
	}
	e, isEngine := engineOf(md.b)
	if tok == nil && isEngine {
		if u, ok := e.Tokenizer().(interface{ Unwrap() *tokenizer.Tokenizer }); ok {
			tok = u.Unwrap()
		}
	}
	if tok == nil {
		if isEngine && e.Tokenizer() != nil {
			rt.s.log.Info("server: SSE prompts of this model are plain text (no tokenizer with a chat template)", "model", md.name)
			return engineEncoder{tok: e.Tokenizer()}, nil
		}
		// Not an engine (a test fake): the model cannot serve the route; as a
		// fast model it falls back to the session's model.
		rt.s.log.Warn("server: SSE: no tokenizer for this model (set SSEConfig.Tokenizer); it will not serve the route", "model", md.name)
		return nil, nil
	}
	tmpl, override := rt.cfg.ChatTemplates[md.name]
	if !override {
		tmpl = tok.ChatTemplate()
	}
	enc, err := chat.NewEncoder(tok, tmpl)
	if err != nil {
		rt.s.log.Warn("server: chat template unusable, SSE prompts are plain text", "model", md.name, "err", err)
		return chat.NewEncoder(tok, "")
	}
	return enc, nil
}

// ServeHTTP answers the route: POST generates, OPTIONS is the CORS
// preflight, anything else is 405.
func (rt *sseRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	origin, originOK := rt.cors(w, r)
	switch r.Method {
	case http.MethodPost:
	case http.MethodOptions:
		rt.preflight(w, r, origin, originOK)
		return
	default:
		w.Header().Set("Allow", "POST, OPTIONS")
		rt.reject(w, sseErrorf(http.StatusMethodNotAllowed, "invalid_request", "method %s not allowed, use POST", r.Method))
		return
	}
	if origin != "" && !originOK {
		rt.reject(w, sseErrorf(http.StatusForbidden, "invalid_request", "origin %q is not allowed", origin))
		return
	}
	start := time.Now()
	if rt.s.draining.Load() {
		rt.reject(w, sseFrom(draining()))
		return
	}
	prompt, serr := readPrompt(w, r)
	if serr != nil {
		rt.reject(w, serr)
		return
	}
	sessionModel, serr := rt.checkSession(r.PathValue("id"))
	if serr != nil {
		rt.reject(w, serr)
		return
	}
	rt.s.inflight.add()
	defer rt.s.inflight.done()
	sel, serr := rt.selectAndSubmit(r.Context(), sessionModel, prompt)
	if serr != nil {
		rt.reject(w, serr)
		return
	}
	rt.stream(w, r, sel, start)
}

// checkSession requires a live session of this instance and returns its
// model. It only reads the session (no renewal, no lease activity).
func (rt *sseRoute) checkSession(id string) (string, *sseError) {
	mgr := rt.s.Sessions()
	if mgr == nil {
		return "", sseErrorf(http.StatusNotFound, "session_not_found", "session %q not found (sessions are not enabled)", id)
	}
	in, err := mgr.Get(sessions.Ref{SessionID: id, Owner: rt.s.instanceID}, false)
	if err != nil {
		switch sessions.CodeOf(err) {
		case sessions.CodeNotFound, sessions.CodeInvalid, sessions.CodeOwnerMismatch:
			return "", sseErrorf(http.StatusNotFound, "session_not_found", "session %q not found", id)
		}
		return "", sseErrorf(http.StatusInternalServerError, "internal", "%v", err)
	}
	switch in.State {
	case sessions.StateExpired:
		return "", sseErrorf(http.StatusGone, "session_expired", "session %q expired", id)
	case sessions.StateClosed:
		return "", sseErrorf(http.StatusGone, "session_closed", "session %q is closed", id)
	}
	return in.Model, nil
}

// selection is the accepted generation: the model chosen once and its
// engine stream.
type selection struct {
	m      *model
	st     Stream
	prompt chat.Prompt
}

// selectAndSubmit chooses the model once, before generation: the fast
// model when configured, served and accepting, else the session's model.
func (rt *sseRoute) selectAndSubmit(ctx context.Context, sessionModel, prompt string) (*selection, *sseError) {
	if f, ok := rt.s.byName[rt.cfg.FastModel]; ok && rt.cfg.FastModel != "" {
		sel, serr := rt.submit(ctx, f, prompt)
		if serr == nil {
			return sel, nil
		}
		if ctx.Err() != nil {
			return nil, serr
		}
		rt.s.log.Warn("server: SSE fast model refused the request, using the session's model",
			"fast_model", f.name, "code", serr.code, "err", serr.msg)
	}
	m, ok := rt.s.byName[sessionModel]
	if !ok {
		return nil, sseErrorf(http.StatusNotFound, "model_not_found", "the session's model %q is not served", sessionModel)
	}
	return rt.submit(ctx, m, prompt)
}

// submit encodes the prompt for m and submits it.
func (rt *sseRoute) submit(ctx context.Context, m *model, prompt string) (*selection, *sseError) {
	enc := rt.encoders[m.name]
	if enc == nil {
		return nil, sseErrorf(http.StatusInternalServerError, "internal", "no prompt encoder for model %q", m.name)
	}
	p, err := enc.Encode(prompt)
	if err != nil {
		return nil, sseErrorf(http.StatusInternalServerError, "internal", "encoding the prompt: %v", err)
	}
	lim := m.b.Limits()
	budget := rt.cfg.MaxTokens
	if lim.MaxOutputTokens > 0 {
		budget = min(budget, lim.MaxOutputTokens)
	}
	if lim.ContextLen > 0 && len(p.Tokens)+budget > lim.ContextLen {
		return nil, sseErrorf(http.StatusBadRequest, "context_length_exceeded",
			"prompt of %d tokens + %d output tokens exceeds the context of %d tokens", len(p.Tokens), budget, lim.ContextLen)
	}
	st, err := m.b.Submit(ctx, engine.Request{
		TokenIDs:  p.Tokens,
		MaxTokens: budget,
		Sampling:  cloneSampling(rt.cfg.Sampling),
	})
	if err != nil {
		return nil, sseFrom(fromEngine(err))
	}
	return &selection{m: m, st: st, prompt: p}, nil
}

// cloneSampling copies the option pointers so no request shares them.
func cloneSampling(o sampling.Options) sampling.Options {
	cp := func(p *float64) *float64 {
		if p == nil {
			return nil
		}
		v := *p
		return &v
	}
	out := sampling.Options{Temperature: cp(o.Temperature), TopP: cp(o.TopP), MinP: cp(o.MinP),
		RepetitionPenalty: cp(o.RepetitionPenalty), FrequencyPenalty: cp(o.FrequencyPenalty),
		PresencePenalty: cp(o.PresencePenalty)}
	if o.TopK != nil {
		k := *o.TopK
		out.TopK = &k
	}
	if o.Seed != nil {
		sd := *o.Seed
		out.Seed = &sd
	}
	return out
}

// cors sets the CORS response headers for an allowed Origin. It returns
// the request's origin ("" for none) and whether it is allowed.
func (rt *sseRoute) cors(w http.ResponseWriter, r *http.Request) (string, bool) {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return "", false
	}
	w.Header().Add("Vary", "Origin")
	if !slices.Contains(rt.cfg.CORSOrigins, origin) && !slices.Contains(rt.cfg.CORSOrigins, "*") {
		return origin, false
	}
	w.Header().Set("Access-Control-Allow-Origin", origin)
	return origin, true
}

// preflight answers OPTIONS: 204 with the allowed method and headers for a
// configured origin, 403 otherwise.
func (rt *sseRoute) preflight(w http.ResponseWriter, r *http.Request, origin string, ok bool) {
	if !ok {
		rt.reject(w, sseErrorf(http.StatusForbidden, "invalid_request", "CORS origin %q is not allowed", origin))
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "POST")
	h.Set("Access-Control-Allow-Headers", "Content-Type")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	rt.metrics.outcome("preflight")
}
