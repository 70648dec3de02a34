package sse

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"oengine/engine"
	"oengine/model/chat"
	"oengine/model/tokenizer"
	"oengine/sampling"
	"oengine/server"
	"oengine/sessions"
)

// Route limits (docs/design.md §5).
const (
	// MaxPromptBytes caps the prompt's UTF-8 bytes after JSON decoding.
	MaxPromptBytes = 32 << 10
	// MaxBodyBytes caps the request body read.
	MaxBodyBytes = 256 << 10
)

// Defaults of Config.
const (
	DefaultMaxTokens    = 1024
	DefaultKeepAlive    = 15 * time.Second
	DefaultWriteTimeout = 30 * time.Second
)

// Config configures POST /session/{id}/generate, a short side generation
// in the context of a generation session that reads and changes nothing of
// the session. Clients choose no setting: everything comes from here.
type Config struct {
	// FastModel is the served name of the --fast-model model; empty: none.
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
}

func (c Config) withDefaults() Config {
	if c.MaxTokens <= 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	return c
}

// sseRoute is the state of the SSE route of one server.
type sseRoute struct {
	s       *server.Server
	log     *slog.Logger
	cfg     Config
	cors    server.CORS // cfg.CORSOrigins
	metrics *sseMetrics
	// encoders by served model name; built once at Enable.
	encoders map[string]promptEncoder
}

// promptEncoder turns the user's prompt into prompt tokens for one model.
type promptEncoder interface {
	Encode(user string) (chat.Prompt, error)
}

// engineEncoder is the fallback without a model tokenizer: plain text with
// the BOS rule and no special-token parsing.
type engineEncoder struct{ tok engine.Tokenizer }

func (e engineEncoder) Encode(user string) (chat.Prompt, error) {
	return chat.Prompt{Tokens: e.tok.Encode(user, tokenizer.EncodeOptions{AddSpecial: true}), Text: user}, nil
}

// Pattern is the route Enable registers.
const Pattern = "/session/{id}/generate"

// Enable registers POST /session/{id}/generate on the server's HTTP
// listener; call it once, before Serve. It needs the server's sessions
// (EnableSessions) for the sessions it names (without them every id is
// unknown).
func Enable(s *server.Server, cfg Config) error {
	cfg = cfg.withDefaults()
	rt := &sseRoute{s: s, log: s.Logger(), cfg: cfg, cors: server.CORS{Origins: cfg.CORSOrigins}, encoders: map[string]promptEncoder{}}
	if cfg.FastModel != "" {
		if _, ok := s.Lookup(cfg.FastModel); !ok {
			rt.log.Warn("server: SSE fast model is not served; the session's model answers", "fast_model", cfg.FastModel)
		}
	}
	m, err := newSSEMetrics(s.Metrics().Registry())
	if err != nil {
		return err
	}
	rt.metrics = m
	for _, md := range s.Models() {
		enc, err := rt.buildEncoder(md)
		if err != nil {
			return err
		}
		if enc != nil {
			rt.encoders[md.Name] = enc
		}
	}
	return s.HandleHTTP(Pattern, rt)
}

// buildEncoder picks the prompt encoder of a model: the chat template when
// there is one and it can render a single user message, else plain text.
func (rt *sseRoute) buildEncoder(md *server.Model) (promptEncoder, error) {
	if md.Tokenizer == nil {
		if md.Engine != nil && md.Engine.Tokenizer() != nil {
			rt.log.Info("server: SSE prompts of this model are plain text (no tokenizer with a chat template)", "model", md.Name)
			return engineEncoder{tok: md.Engine.Tokenizer()}, nil
		}
		// No engine (a test fake): the model cannot serve the route; as a
		// fast model it falls back to the session's model.
		rt.log.Warn("server: SSE: the model has no tokenizer; it will not serve the route", "model", md.Name)
		return nil, nil
	}
	enc, err := chat.NewEncoder(md.Tokenizer, md.ChatTemplate)
	if err != nil {
		rt.log.Warn("server: chat template unusable, SSE prompts are plain text", "model", md.Name, "err", err)
		return chat.NewEncoder(md.Tokenizer, "")
	}
	return enc, nil
}

// ServeHTTP answers the route: POST generates, OPTIONS is the CORS
// preflight, anything else is 405.
func (rt *sseRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	origin, originOK := rt.cors.Check(w, r)
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
	p, err := rt.s.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="oengine"`)
		rt.reject(w, sseFrom(server.Classify(err)))
		return
	}
	if rt.s.Draining() {
		rt.reject(w, sseFrom(server.DrainingFailure()))
		return
	}
	prompt, serr := readPrompt(w, r)
	if serr != nil {
		rt.reject(w, serr)
		return
	}
	sessionModel, serr := rt.checkSession(p, r.PathValue("id"))
	if serr != nil {
		rt.reject(w, serr)
		return
	}
	defer rt.s.Track()()
	sel, serr := rt.selectAndSubmit(r.Context(), sessionModel, prompt)
	if serr != nil {
		rt.reject(w, serr)
		return
	}
	rt.stream(w, r, sel, start)
}

// checkSession requires a live session of this instance and returns its
// model. It only reads the session (no renewal, no lease activity).
func (rt *sseRoute) checkSession(p server.Principal, id string) (string, *sseError) {
	mgr := rt.s.Sessions()
	if mgr == nil {
		return "", sseErrorf(http.StatusNotFound, "session_not_found", "session %q not found (sessions are not enabled)", id)
	}
	in, err := mgr.Get(sessions.Ref{SessionID: p.Scope(id), Owner: rt.s.InstanceID()}, false)
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
	m      *server.Model
	st     server.Stream
	prompt chat.Prompt
}

// selectAndSubmit chooses the model once, before generation: the fast
// model when configured, served and accepting, else the session's model.
func (rt *sseRoute) selectAndSubmit(ctx context.Context, sessionModel, prompt string) (*selection, *sseError) {
	if f, ok := rt.s.Lookup(rt.cfg.FastModel); ok && rt.cfg.FastModel != "" {
		sel, serr := rt.submit(ctx, f, prompt)
		if serr == nil {
			return sel, nil
		}
		if ctx.Err() != nil {
			return nil, serr
		}
		rt.log.Warn("server: SSE fast model refused the request, using the session's model",
			"fast_model", f.Name, "code", serr.code, "err", serr.msg)
	}
	m, ok := rt.s.Lookup(sessionModel)
	if !ok || sessionModel == "" {
		return nil, sseErrorf(http.StatusNotFound, "model_not_found", "the session's model %q is not served", sessionModel)
	}
	return rt.submit(ctx, m, prompt)
}

// submit encodes the prompt for m and submits it.
func (rt *sseRoute) submit(ctx context.Context, m *server.Model, prompt string) (*selection, *sseError) {
	enc := rt.encoders[m.Name]
	if enc == nil {
		return nil, sseErrorf(http.StatusInternalServerError, "internal", "no prompt encoder for model %q", m.Name)
	}
	p, err := enc.Encode(prompt)
	if err != nil {
		return nil, sseErrorf(http.StatusInternalServerError, "internal", "encoding the prompt: %v", err)
	}
	lim := m.Limits()
	budget := rt.cfg.MaxTokens
	if lim.MaxOutputTokens > 0 {
		budget = min(budget, lim.MaxOutputTokens)
	}
	if lim.ContextLen > 0 && len(p.Tokens)+budget > lim.ContextLen {
		return nil, sseErrorf(http.StatusBadRequest, "context_length_exceeded",
			"prompt of %d tokens + %d output tokens exceeds the context of %d tokens", len(p.Tokens), budget, lim.ContextLen)
	}
	st, err := m.Backend.Submit(ctx, engine.Request{
		TokenIDs:  p.Tokens,
		MaxTokens: budget,
		Sampling:  cloneSampling(rt.cfg.Sampling),
	})
	if err != nil {
		return nil, sseFrom(server.Classify(err))
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

// preflight answers OPTIONS: 204 with the allowed method and headers for a
// configured origin, 403 otherwise.
func (rt *sseRoute) preflight(w http.ResponseWriter, r *http.Request, origin string, ok bool) {
	if !rt.cors.Preflight(w, r, ok, "POST") {
		rt.reject(w, sseErrorf(http.StatusForbidden, "invalid_request", "CORS origin %q is not allowed", origin))
		return
	}
	rt.metrics.outcome("preflight")
}
