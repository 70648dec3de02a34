package engine

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"oengine/grammar"
	"oengine/kvcache"
	"oengine/model/tokenizer"
	"oengine/sampling"
	"oengine/scheduler"
	"oengine/stopstr"
)

// request is an accepted request. Fields marked (mu) are protected by
// Engine.mu; the rest belong to the loop goroutine after acceptance.
type request struct {
	id     string
	r      Request
	prompt []int32 // input tokens (grows with streamed input)
	params sampling.Params
	n      int
	limit  int // most known tokens a sequence may reach (context and pool)
	stream *Stream
	stop   func() bool    // stops the context.AfterFunc
	prefix *kvcache.Table // Request.Prefix until the scheduler owns it (start)

	cancelErr   *Error // (mu) first cancellation reason
	ended       bool   // (mu) terminal event pushed
	inputClosed bool   // (mu) CloseInput was called

	outputs    []*output
	started    bool // first scheduled
	promptSent bool
	cached     int
	promptLP   []sampling.Logprobs
	embed      *embedState // an embedding request's pooling (embed.go)
	typeFrom   int         // a pair's tokens from here on are of token type 1 (0: none)
	paused     bool
	pausedAt   time.Time
	arrived    time.Time
	queued     time.Duration
	firstTok   time.Time
	inputDone  bool         // loop view of CloseInput
	prefilled  atomic.Int64 // input tokens whose K/V is computed (Stream.Prefilled)
}

// output is one of a request's sequences.
type output struct {
	req      *request
	index    int
	seq      *scheduler.Seq
	sampler  *sampling.Sampler
	dec      Decoder
	match    *stopstr.Matcher
	guide    grammar.Guide // nil unless the request has a Constraint
	tokens   []int32       // generated
	finished bool
	finish   Finish
	lastTok  time.Time
	spec     specState
}

// Submit validates r and queues it. Errors before acceptance are *Error
// values (validation, context length, duplicate id, overload, draining);
// after acceptance every outcome arrives on the stream, which ends with
// exactly one terminal event. ctx being done cancels the request.
func (e *Engine) Submit(ctx context.Context, r Request) (*Stream, error) {
	st, err := e.submit(ctx, r)
	if err != nil && r.Prefix != nil {
		e.cache.Release(r.Prefix) // accepted requests release it when they end
	}
	return st, err
}

func (e *Engine) submit(ctx context.Context, r Request) (*Stream, error) {
	req, err := e.prepare(r)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, newError(CodeCancelled, "request cancelled before admission: %v", err)
	}
	req.stream = newStream(e, req)
	req.stop = context.AfterFunc(ctx, func() {
		e.cancel(req, newError(CodeCancelled, "request %s: %v", req.id, context.Cause(ctx)))
	})
	e.mu.Lock()
	e.purgeLocked(time.Now())
	err = e.admitLocked(req)
	e.mu.Unlock()
	if err != nil {
		req.stop()
		return nil, err
	}
	e.wake()
	return req.stream, nil
}

func (e *Engine) admitLocked(req *request) error {
	switch {
	case e.closed:
		return newError(CodeDraining, "engine closed")
	case e.draining:
		return newError(CodeDraining, "engine draining, not admitting requests")
	}
	if _, dup := e.live[req.id]; dup {
		return newError(CodeDuplicateRequest, "request id %q is already live", req.id)
	}
	if e.load.Waiting+len(e.pending) >= e.cfg.MaxWaiting {
		return newError(CodeOverloaded, "%d requests waiting", e.load.Waiting+len(e.pending))
	}
	e.live[req.id] = req
	e.pending = append(e.pending, req)
	e.stats.Requests++
	return nil
}

// prepare validates and tokenizes a request (before acceptance).
func (e *Engine) prepare(r Request) (*request, error) {
	req := &request{id: r.ID, r: r, n: r.N, arrived: time.Now()}
	if req.id == "" {
		req.id = newID()
	}
	if req.n == 0 {
		req.n = 1
	}
	invalid := func(format string, args ...any) error {
		return newError(CodeInvalidArgument, format, args...)
	}
	switch {
	case req.n < 0:
		return nil, invalid("n must be >= 1, got %d", r.N)
	case req.n > e.limits.MaxRunning:
		return nil, invalid("n = %d exceeds the %d sequences the engine runs at once", req.n, e.limits.MaxRunning)
	case r.MaxTokens < 0:
		return nil, invalid("max_tokens must be >= 0, got %d", r.MaxTokens)
	case r.MinTokens < 0:
		return nil, invalid("min_tokens must be >= 0, got %d", r.MinTokens)
	case r.MaxTokens > 0 && r.MinTokens > r.MaxTokens:
		return nil, invalid("min_tokens %d exceeds max_tokens %d", r.MinTokens, r.MaxTokens)
	case r.OnRetain != nil && req.n != 1:
		return nil, invalid("retaining a turn needs n = 1")
	case r.OpenInput && r.PromptLogprobs != nil:
		return nil, newError(CodeUnsupportedFeature, "prompt logprobs with streamed input are not supported")
	case r.Constraint != nil && r.Constraint.VocabSize() != e.info.Vocab:
		return nil, invalid("the constraint was compiled for a vocabulary of %d tokens, the model has %d", r.Constraint.VocabSize(), e.info.Vocab)
	}
	if r.Embed != nil {
		if err := e.checkEmbed(r); err != nil {
			return nil, err
		}
	} else if e.limits.EmbeddingsOnly {
		return nil, newError(CodeUnsupportedFeature, "this model is an encoder: it computes embeddings and generates no text")
	}
	params, err := r.Sampling.Resolve(e.cfg.DefaultTemperature)
	if err != nil {
		return nil, wrapError(CodeInvalidArgument, err, "")
	}
	req.params = params
	for _, b := range params.LogitBias {
		if int(b.ID) >= e.info.Vocab {
			return nil, invalid("logit_bias: token id %d outside the vocabulary (%d)", b.ID, e.info.Vocab)
		}
	}
	for _, c := range []*sampling.Candidates{r.Logprobs, r.PromptLogprobs} {
		if c != nil {
			if err := c.Validate(e.info.Vocab, e.cfg.MaxLogprobs); err != nil {
				return nil, wrapError(CodeInvalidArgument, err, "logprobs")
			}
		}
	}
	for _, id := range r.Stop.TokenIDs {
		if id < 0 || int(id) >= e.info.Vocab {
			return nil, invalid("stop token id %d outside the vocabulary (%d)", id, e.info.Vocab)
		}
	}
	if _, err := stopstr.New(r.Stop.Strings, r.Stop.IncludeStopInOutput); err != nil {
		return nil, wrapError(CodeInvalidArgument, err, "")
	}

	if r.Embed != nil && r.Embed.Pair != "" {
		pe, ok := e.tok.(PairEncoder)
		if !ok {
			return nil, newError(CodeUnsupportedFeature, "this tokenizer has no template for a pair of texts")
		}
		doc := r.Embed.Pair
		ids, second, err := pe.EncodePair(r.Prompt, doc, true)
		if err != nil {
			return nil, wrapError(CodeUnsupportedFeature, err, "")
		}
		if limit := e.limits.MaxOutputTokens + 1; r.Embed.Truncate && len(ids) > limit {
			// The query and the longest prefix of the document that fits.
			cut, ok, _ := fitPrefix(doc, limit, func(d string) (int, error) {
				ids, _, err := pe.EncodePair(r.Prompt, d, true)
				return len(ids), err
			})
			if ok {
				ids, second, _ = pe.EncodePair(r.Prompt, doc[:cut], true)
			}
		}
		req.prompt = ids
		if e.info.TokenTypes > 1 { // the pair's second text is segment B
			req.typeFrom = second
		}
	} else if r.TokenIDs != nil {
		req.prompt = slices.Clone(r.TokenIDs)
		if limit := e.limits.MaxOutputTokens + 1; r.Embed != nil && r.Embed.Truncate && len(req.prompt) > limit {
			req.prompt = req.prompt[:limit]
		}
	} else if r.Prompt != "" {
		opts := tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true}
		req.prompt = e.tok.Encode(r.Prompt, opts)
		if limit := e.limits.MaxOutputTokens + 1; r.Embed != nil && r.Embed.Truncate && len(req.prompt) > limit {
			// The longest prefix of the text that fits, special tokens
			// added as they are to the whole text.
			cut, ok, _ := fitPrefix(r.Prompt, limit, func(t string) (int, error) { return len(e.tok.Encode(t, opts)), nil })
			if ok {
				req.prompt = e.tok.Encode(r.Prompt[:cut], opts)
			}
		}
	}
	for _, id := range req.prompt {
		if id < 0 || int(id) >= e.info.Vocab {
			return nil, invalid("token id %d outside the vocabulary (%d)", id, e.info.Vocab)
		}
	}
	if len(req.prompt) == 0 && !r.OpenInput {
		return nil, invalid("empty prompt")
	}
	if err := e.checkLogprobSize(r, len(req.prompt)); err != nil {
		return nil, err
	}
	if r.Prefix != nil {
		switch {
		case r.TokenIDs == nil:
			return nil, invalid("a K/V prefix needs token ids")
		case r.Prefix.Len() > len(req.prompt):
			return nil, invalid("a K/V prefix of %d tokens for a prompt of %d", r.Prefix.Len(), len(req.prompt))
		}
		req.prefix = r.Prefix
	}
	req.limit = e.limits.MaxOutputTokens + 1
	if err := e.checkLength(req); err != nil {
		return nil, err
	}
	return req, nil
}

// checkLength rejects input that, with the requested output, exceeds the
// context or the pool (an embedding request has no output).
func (e *Engine) checkLength(req *request) error {
	if req.r.Embed != nil {
		if len(req.prompt) > req.limit {
			step := ""
			if e.limits.EmbeddingsOnly { // an encoder's input is computed in one step
				step = fmt.Sprintf(", one step %d tokens", e.limits.MaxBatchedTokens)
			}
			return newError(CodeContextLengthExceeded, "%d input tokens exceed the limit of %d tokens (context %d, KV pool %d tokens%s)",
				len(req.prompt), req.limit, e.info.ContextLen, e.limits.TotalPages*e.limits.PageSize, step)
		}
		return nil
	}
	want := len(req.prompt) + max(req.r.MaxTokens, 1)
	if req.r.OpenInput && !req.inputDone {
		want = len(req.prompt) + req.r.MinTokens
	}
	if want > req.limit {
		return newError(CodeContextLengthExceeded,
			"%d input tokens + %d output tokens exceed the limit of %d tokens (context %d, KV pool %d tokens)",
			len(req.prompt), want-len(req.prompt), req.limit, e.info.ContextLen, e.limits.TotalPages*e.limits.PageSize)
	}
	return nil
}

// maxTokens is the effective output cap of one sequence.
func (req *request) maxTokens() int {
	if req.r.MaxTokens > 0 {
		return req.r.MaxTokens
	}
	return req.limit - len(req.prompt)
}

// checkLogprobSize bounds what logprobs may cost before acceptance
// (docs/api.md, "Limits"): prompt positions × (1 + candidates) at most
// MaxPromptLogprobEntries, and at most MaxTokenCandidates candidates per
// output token.
func (e *Engine) checkLogprobSize(r Request, promptLen int) error {
	if c := r.PromptLogprobs; c != nil {
		per := 1 + c.Count(e.info.Vocab)
		if n := int64(max(promptLen-1, 0)) * int64(per); n > int64(e.cfg.MaxPromptLogprobEntries) {
			return newError(CodeInvalidArgument, "prompt logprobs over %d positions × %d entries = %d exceed the limit of %d entries: ask for fewer candidates or a shorter prompt",
				max(promptLen-1, 0), per, n, e.cfg.MaxPromptLogprobEntries)
		}
	}
	if c := r.Logprobs; c != nil {
		if n := c.Count(e.info.Vocab); n > e.cfg.MaxTokenCandidates {
			return newError(CodeInvalidArgument, "%d logprob candidates per output token exceed the limit of %d", n, e.cfg.MaxTokenCandidates)
		}
	}
	return nil
}
