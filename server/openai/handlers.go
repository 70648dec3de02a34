package openai

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"oengine/engine"
	"oengine/model/chat"
	"oengine/model/tokenizer"
	"oengine/sampling"
	"oengine/server"
	"oengine/sessions"
)

// namedRequest is a request body that names its model.
type namedRequest interface{ modelName() string }

func (c *commonRequest) modelName() string    { return c.Model }
func (e *embeddingRequest) modelName() string { return e.Model }

// begin runs what every generation and embeddings route does first: admit,
// decode the body into req, resolve the model it names. false: an error
// was answered.
func (a *api) begin(w http.ResponseWriter, r *http.Request, req namedRequest) (*modelState, bool) {
	if !a.admit(w) {
		return nil, false
	}
	if aerr := readJSON(w, r, a.cfg.MaxBodyBytes, req); aerr != nil {
		a.reject(w, aerr)
		return nil, false
	}
	ms, aerr := a.model(req.modelName())
	if aerr != nil {
		a.reject(w, aerr)
		return nil, false
	}
	return ms, true
}

// admit runs the checks every generation route makes first.
func (a *api) admit(w http.ResponseWriter) bool {
	if a.s.Draining() {
		f := server.DrainingFailure()
		a.reject(w, &apiError{status: f.Status, code: f.Code, msg: f.Message, reason: f.Reason, retryIn: true})
		return false
	}
	return true
}

// fillInTheMiddle frames each text prompt as a code completion between it
// and suffix, as llama.cpp's infill does in its prefix-suffix-middle
// order: [BOS, as the vocabulary adds it] FIM_PRE prefix FIM_SUF suffix
// FIM_MID, the texts tokenized without special tokens; the model then
// writes the middle.
func fillInTheMiddle(m *server.Model, ps []promptInput, suffix string, echo bool) ([]promptInput, *apiError) {
	tok := m.Tokenizer
	if tok == nil {
		return nil, unsupported("suffix", "model %q has no tokenizer to frame a fill-in-the-middle prompt", m.Name)
	}
	pre, suf, mid, ok := tok.FIM()
	switch {
	case !ok:
		return nil, unsupported("suffix", "model %q has no fill-in-the-middle tokens (a code model's GGUF has them)", m.Name)
	case echo:
		return nil, unsupported("echo", "echo with suffix is not supported")
	}
	sufIDs := tok.Encode(suffix, tokenizer.EncodeOptions{})
	out := make([]promptInput, len(ps))
	for i, p := range ps {
		if p.ids != nil {
			return nil, unsupported("suffix", "suffix needs text prompts: a token-id prompt cannot be framed")
		}
		var ids []int32
		if bos := tok.BOS(); bos >= 0 && tok.AddBOS() {
			ids = append(ids, bos)
		}
		ids = append(ids, pre)
		ids = append(ids, tok.Encode(p.text, tokenizer.EncodeOptions{})...)
		ids = append(ids, suf)
		ids = append(ids, sufIDs...)
		out[i] = promptInput{ids: append(ids, mid)}
	}
	return out, nil
}

// completions serves POST /v1/completions.
func (a *api) completions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req completionRequest
	ms, ok := a.begin(w, r, &req)
	if !ok {
		return
	}
	er, aerr := req.engineRequest(req.MaxTokens)
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	rf, aerr := req.ResponseFormat.spec()
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	if er.Constraint, aerr = constraint(ms.m, rf, "response_format"); aerr != nil {
		a.reject(w, aerr)
		return
	}
	ps, aerr := prompts(req.Prompt)
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	if req.Suffix != nil && *req.Suffix != "" {
		if ps, aerr = fillInTheMiddle(ms.m, ps, *req.Suffix, req.Echo); aerr != nil {
			a.reject(w, aerr)
			return
		}
	}
	if req.Logprobs != nil {
		if *req.Logprobs < 0 {
			a.reject(w, invalid("logprobs", "logprobs must be >= 0, got %d", *req.Logprobs))
			return
		}
		er.Logprobs = candidates(*req.Logprobs)
		if req.Echo {
			// The prompt's own logprobs come first (evaluation harnesses
			// score texts this way).
			er.PromptLogprobs = candidates(*req.Logprobs)
		}
	}
	n := max(er.N, 1)
	id := requestID(r, "cmpl-")
	p := server.PrincipalFrom(r.Context())
	submit := func(i int) (*job, *apiError) {
		if i >= len(ps) {
			return nil, nil
		}
		jr := er
		jr.ID = p.Scope(id)
		if len(ps) > 1 {
			jr.ID = p.Scope(id + "-" + strconv.Itoa(i))
		}
		jr.Prompt, jr.TokenIDs = ps[i].text, ps[i].ids
		st, err := ms.m.Backend.Submit(r.Context(), jr)
		if err != nil {
			return nil, classified(err)
		}
		j := &job{st: st, base: i * n, n: n, echoLP: req.Echo && req.Logprobs != nil}
		if req.Echo {
			j.echo = ps[i].text
			if ps[i].ids != nil && ms.m.Tokenizer != nil {
				j.echo = string(ms.m.Tokenizer.Decode(ps[i].ids))
			}
		}
		return j, nil
	}
	first, aerr := submit(0)
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	defer a.s.Track()()
	w.Header().Set("X-Request-Id", id)
	o := runOpts{kind: kindCompletion, id: id, model: ms.m, created: start.Unix(), stream: req.Stream,
		includeUsage: req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		logprobs:     er.Logprobs != nil, choices: len(ps) * n, route: RouteCompletions, start: start}
	a.newRunner(o, a.sinkFor(w, req.Stream)).run(r.Context(), first, submit)
}

func (a *api) sinkFor(w http.ResponseWriter, stream bool) sink {
	if stream {
		return newStreamSink(w, a.cfg.WriteTimeout)
	}
	return &bodySink{w: w}
}

// candidates is the logprobs selection of n alternatives (0: the chosen
// token only).
func candidates(n int) *sampling.Candidates {
	if n == 0 {
		return &sampling.Candidates{Mode: sampling.CandidatesNone}
	}
	return &sampling.Candidates{Mode: sampling.CandidatesTopN, TopN: n}
}

// chatCompletions serves POST /v1/chat/completions.
func (a *api) chatCompletions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req chatRequest
	ms, ok := a.begin(w, r, &req)
	if !ok {
		return
	}
	a.serveChat(w, r, ms, &req, chatServing{start: start, idPrefix: "chatcmpl-", route: RouteChat, sink: a.sinkFor(w, req.Stream)})
}

// chatServing is what differs between the routes that run a chat request:
// /v1/chat/completions, /v1/responses (responses.go) and /v1/messages
// (anthropic.go).
type chatServing struct {
	start    time.Time
	idPrefix string // of the response id
	route    string // the metrics' route label
	sink     sink
}

// serveChat runs a parsed chat request: its checks, the chat template,
// tools and constraints, then the engine (or a session turn) into cs.sink.
func (a *api) serveChat(w http.ResponseWriter, r *http.Request, ms *modelState, req *chatRequest, cs chatServing) {
	start := cs.start
	maxTokens := req.MaxCompletionTokens
	if maxTokens == nil {
		maxTokens = req.MaxTokens
	}
	er, aerr := req.engineRequest(maxTokens)
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	plan, aerr := planTools(ms.m, req.Tools, req.ToolChoice, ms.harmony)
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	rf, aerr := req.ResponseFormat.spec()
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	spec, field := rf, "response_format"
	if plan.forced != nil {
		if rf != nil {
			a.reject(w, invalid("response_format", "response_format cannot be combined with tool_choice required or a named function"))
			return
		}
		spec, field = plan.forced, "tools"
	}
	switch {
	case req.TopLogprobs != nil && !req.Logprobs:
		a.reject(w, invalid("top_logprobs", "top_logprobs needs logprobs: true"))
		return
	case req.TopLogprobs != nil && *req.TopLogprobs < 0:
		a.reject(w, invalid("top_logprobs", "top_logprobs must be >= 0, got %d", *req.TopLogprobs))
		return
	case req.Logprobs:
		k := 0
		if req.TopLogprobs != nil {
			k = *req.TopLogprobs
		}
		er.Logprobs = candidates(k)
	}
	if ms.enc == nil {
		a.reject(w, unsupported("model", "model %q has no tokenizer: use /v1/completions with token ids", ms.m.Name))
		return
	}
	msgs, aerr := messages(req.Messages)
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	kw, err := chat.DecodeKwargs(req.ChatTemplateKwargs)
	if err != nil {
		a.reject(w, invalid("chat_template_kwargs", "%v", err))
		return
	}
	gen := true
	if req.AddGenerationPrompt != nil {
		gen = *req.AddGenerationPrompt
	}
	if er.Constraint, aerr = constraint(ms.m, spec, field); aerr != nil {
		a.reject(w, aerr)
		return
	}
	prompt, err := ms.enc.Render(msgs, chat.Options{AddGenerationPrompt: gen, Kwargs: kw, Tools: plan.render})
	if err != nil {
		a.reject(w, invalid("messages", "chat template: %v", err))
		return
	}
	split := (ms.reasoning || ms.harmony) && !a.cfg.NoReasoningSplit
	if req.SplitReasoning != nil {
		split = *req.SplitReasoning
	}
	// A harmony reply is parsed unless the split is off; then it comes as
	// generated, its markers included.
	harmony := ms.harmony && (split || len(plan.tools) > 0)
	er.SpecialText = ms.harmony
	id := requestID(r, cs.idPrefix)
	p := server.PrincipalFrom(r.Context())
	er.ID = p.Scope(id)
	er.TokenIDs = prompt.Tokens
	j := &job{base: 0, n: max(er.N, 1), inReasoning: prompt.InReasoning}
	if req.Session != nil {
		turn, aerr := a.beginTurn(r.Context(), p, ms.m, req.Session, er)
		if aerr != nil {
			a.reject(w, aerr)
			return
		}
		j.st, j.close = turn, turn.Close
	} else {
		st, err := ms.m.Backend.Submit(r.Context(), er)
		if err != nil {
			a.reject(w, classified(err))
			return
		}
		j.st = st
	}
	defer a.s.Track()()
	w.Header().Set("X-Request-Id", id)
	o := runOpts{kind: kindChat, id: id, model: ms.m, created: start.Unix(), stream: req.Stream,
		includeUsage: req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		split:        split && !harmony, harmony: harmony, logprobs: er.Logprobs != nil, choices: j.n, route: cs.route, start: start, tools: plan.parser}
	a.newRunner(o, cs.sink).run(r.Context(), j, func(int) (*job, *apiError) { return nil, nil })
}

// beginTurn continues a session with the rendered conversation: the
// tokens past what the session retains are the turn's input. When the
// conversation diverges from the retained tokens (an edited message, a
// template that closes the last turn differently), an append turn
// replaces the retained tokens from the first difference.
func (a *api) beginTurn(ctx context.Context, p server.Principal, m *server.Model, sc *sessionContinuation, er engine.Request) (*sessions.Turn, *apiError) {
	mgr := a.s.Sessions()
	if mgr == nil {
		return nil, unsupported("session", "generation sessions are not enabled on this server")
	}
	if sc.ID == "" {
		return nil, invalid("session.id", "session.id is required")
	}
	ref := sessions.Ref{SessionID: p.Scope(sc.ID), Owner: a.s.InstanceID()}
	in, err := mgr.Get(ref, true)
	if err != nil {
		return nil, classified(err)
	}
	common := 0
	for common < len(in.Tokens) && common < len(er.TokenIDs) && in.Tokens[common] == er.TokenIDs[common] {
		common++
	}
	c := sessions.Continuation{Ref: ref, Model: m.Name}
	switch sc.Mode {
	case "", "append":
		c.Mode = sessions.ModeAppend
		if common < len(in.Tokens) {
			c.Mode = sessions.ModeReplace
			c.FromToken = &common
		}
	case "branch":
		c.Mode = sessions.ModeBranch
		c.FromToken = &common
	default:
		return nil, invalid("session.mode", "unknown session mode %q (append or branch)", sc.Mode)
	}
	er.TokenIDs = slices.Clone(er.TokenIDs[common:])
	if len(er.TokenIDs) == 0 {
		er.TokenIDs = nil
	}
	turn, err := mgr.Begin(ctx, c, er)
	if err != nil {
		return nil, classified(err)
	}
	return turn, nil
}
