// Package engine is the in-process API every transport uses: Submit a
// validated Request, read its events from a bounded Stream, Abort it, read
// load figures. It owns the step loop: one goroutine that asks the
// scheduler for a plan, runs it on the model, samples, applies the stop
// conditions and emits events.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"oengine/kvcache"
	"oengine/scheduler"
)

// Config sizes the engine. Zero values take the documented defaults.
type Config struct {
	ModelName string
	PageSize  int   // tokens per KV page; 16
	KVPages   int   // pages in the pool; 0: from KVMemory
	KVMemory  int64 // bytes for K/V when KVPages is 0; 1 GiB
	// MaxBatchedTokens and MaxRunning bound one step (scheduler defaults).
	MaxBatchedTokens int
	MaxRunning       int
	// MaxStepLatency bounds a step that carries decode tokens: its prefill
	// chunk is sized from measured step costs to stay under it
	// (docs/design.md §10). 0: 4 decode-only steps; < 0: no bound (the
	// token budget only).
	MaxStepLatency  time.Duration
	MaxWaiting      int            // queued requests before OVERLOADED; 1024
	EventQueue      int            // per-request event bound before pausing; 64
	KVMedium        kvcache.Medium // where the KV pages live, reported in KV events: unspecified for host memory, GPU for device pages
	EventQueueBytes int            // per-request bound of queued event bytes (eventBytes) before pausing; 4 MiB
	ConsumerTimeout time.Duration  // a paused consumer longer than this is cancelled; 30 s
	// FinishedRetention: finished ids answer Abort with ALREADY_FINISHED
	// this long; 10 min.
	FinishedRetention time.Duration
	// DefaultTemperature for requests without one; 0 means 1.0 unless
	// GreedyDefault.
	DefaultTemperature float64
	GreedyDefault      bool
	MaxLogprobs        int // top-n cap for logprob candidates; 20
	// MaxPromptLogprobEntries bounds prompt logprobs before acceptance:
	// prompt positions × (1 + candidates per position); 1 << 20.
	MaxPromptLogprobEntries int
	// MaxTokenCandidates bounds the logprob candidates of one output token
	// (one response message each); 1 << 17.
	MaxTokenCandidates int

	// Pinned-page budgets passed to the KV cache (sessions).
	MaxPinnedPages         int
	MaxPinnedPagesPerOwner int
	KVEventWindow          int

	// Speculation enables speculative decoding (spec.go).
	Speculation Speculation

	// Pooling is the pooling of embedding requests that leave it to the
	// engine; PoolingDefault: the model file's, else PoolingLast.
	Pooling Pooling

	// CheckIntegrity runs the KV ledger check on every idle step and logs
	// (debug).
	CheckIntegrity bool
	Hooks          Hooks
	Logger         *slog.Logger
}

// DefaultKVMemory is the KV budget when Config.KVMemory is 0.
const DefaultKVMemory = 1 << 30

// WithDefaults returns c with every zero field set to its documented
// default: the configuration New runs with (callers that size things for
// the engine, such as a device KV pool, read it instead of re-deriving it).
func (c Config) WithDefaults() Config {
	c.fill()
	return c
}

func (c *Config) fill() {
	if c.PageSize == 0 {
		c.PageSize = kvcache.DefaultPageSize
	}
	if c.MaxBatchedTokens == 0 {
		c.MaxBatchedTokens = scheduler.DefaultMaxBatchedTokens
	}
	if c.KVMemory == 0 {
		c.KVMemory = DefaultKVMemory
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = 1024
	}
	if c.EventQueue == 0 {
		c.EventQueue = 64
	}
	if c.EventQueueBytes == 0 {
		c.EventQueueBytes = 4 << 20
	}
	if c.ConsumerTimeout == 0 {
		c.ConsumerTimeout = 30 * time.Second
	}
	if c.FinishedRetention == 0 {
		c.FinishedRetention = 10 * time.Minute
	}
	if c.DefaultTemperature == 0 && !c.GreedyDefault {
		c.DefaultTemperature = 1
	}
	if c.MaxLogprobs == 0 {
		c.MaxLogprobs = 20
	}
	if c.MaxPromptLogprobEntries == 0 {
		c.MaxPromptLogprobEntries = 1 << 20
	}
	if c.MaxTokenCandidates == 0 {
		c.MaxTokenCandidates = 1 << 17
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Engine serves requests on one model. Its methods are safe for concurrent
// use.
type Engine struct {
	cfg    Config
	model  Model
	kv     KV
	tok    Tokenizer
	cache  *kvcache.Cache
	sched  *scheduler.Scheduler // owned by the loop goroutine
	info   ModelInfo
	limits Limits
	// rankPooling is the pooled state the model's classification head
	// reads (ModelInfo.RankPooling; PoolingCLS when it names none).
	rankPooling Pooling
	eog         []int32 // end-of-generation token ids
	log         *slog.Logger

	mu       sync.Mutex // protects the fields below
	live     map[string]*request
	finished map[string]time.Time
	finQ     []finishedID // retention order
	pending  []*request   // accepted, not yet given to the scheduler
	cmds     []inputCmd   // streamed input for the loop
	cancels  []*request   // cancellations for the loop
	draining bool
	closed   bool
	load     LoadFigures
	stats    Stats
	idle     chan struct{} // closed when live becomes empty

	wakeCh chan struct{} // cap 1: something for the loop
	done   chan struct{} // closed when the loop exits

	lp    loopState    // owned by the loop goroutine
	cost  *stepCost    // owned by the loop goroutine
	draft *draftRunner // the draft model (Speculation.Draft), nil without
}

type finishedID struct {
	id string
	at time.Time
}

type inputCmd struct {
	req    *request
	tokens []int32
	close  bool
}

// New builds an engine on model m with tokenizer tok and starts its loop.
func New(cfg Config, m Model, tok Tokenizer) (*Engine, error) {
	if m == nil || tok == nil {
		return nil, errors.New("engine: nil model or tokenizer")
	}
	info := m.Info()
	if cfg.Pooling < PoolingDefault || cfg.Pooling > PoolingLast {
		return nil, fmt.Errorf("engine: default pooling %v: want mean, cls or last (ranking is asked for by request)", cfg.Pooling)
	}
	if _, ok := m.(HiddenModel); info.Encoder && (!ok || info.Dim < 1) {
		return nil, errors.New("engine: an encoder model that returns no hidden states serves nothing")
	}
	if info.Encoder && cfg.MaxBatchedTokens == 0 {
		// An encoder computes an input in one step: by default a step
		// takes a whole context (up to 8192 tokens).
		cfg.MaxBatchedTokens = max(scheduler.DefaultMaxBatchedTokens, min(info.ContextLen, 8192))
	}
	cfg.fill()
	if info.Vocab < 1 || info.ContextLen < 1 {
		return nil, fmt.Errorf("engine: model reports vocab %d, context %d", info.Vocab, info.ContextLen)
	}
	pages := cfg.KVPages
	if pages == 0 {
		perPage := m.KVBytesPerPage(cfg.PageSize)
		if d := cfg.Speculation.Draft; d != nil {
			// The draft model's K/V store has the same pages (draft.go):
			// a page costs both stores' bytes.
			perPage += d.KVBytesPerPage(cfg.PageSize)
		}
		pages = kvcache.PagesForBudget(cfg.KVMemory, perPage)
		// No more than every running sequence at full context could use.
		maxRun := cfg.MaxRunning
		if maxRun == 0 {
			maxRun = scheduler.DefaultMaxRunning
		}
		pages = min(pages, maxRun*((info.ContextLen+cfg.PageSize-1)/cfg.PageSize)+1)
	}
	if pages < 1 {
		return nil, fmt.Errorf("engine: KV budget %d bytes holds no page", cfg.KVMemory)
	}
	cache, err := kvcache.New(kvcache.Config{PageSize: cfg.PageSize, NumPages: pages,
		MaxPinnedPages: cfg.MaxPinnedPages, MaxPinnedPagesPerOwner: cfg.MaxPinnedPagesPerOwner,
		EventWindow: cfg.KVEventWindow, Medium: cfg.KVMedium})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	kv, err := m.NewKV(pages, cfg.PageSize)
	if err != nil {
		cache.Close()
		return nil, fmt.Errorf("engine: KV store: %w", err)
	}
	cost := newStepCost(cfg.MaxStepLatency, cfg.MaxBatchedTokens)
	sched, err := scheduler.New(scheduler.Config{MaxBatchedTokens: cfg.MaxBatchedTokens, MaxRunning: cfg.MaxRunning,
		PrefillLimit: cost.prefillLimit}, &kvAlloc{c: cache, log: cfg.Logger})
	if err != nil {
		cache.Close()
		if c, ok := kv.(interface{ Close() }); ok {
			c.Close()
		}
		return nil, fmt.Errorf("engine: %w", err)
	}
	var draft *draftRunner
	if cfg.Speculation.Draft != nil {
		if draft, err = newDraftRunner(cfg.Speculation.Draft, info, pages, cfg.PageSize); err != nil {
			cache.Close()
			if c, ok := kv.(interface{ Close() }); ok {
				c.Close()
			}
			return nil, err
		}
	}
	sc := sched.Config()
	e := &Engine{draft: draft,
		cfg: cfg, model: m, kv: kv, tok: tok, cache: cache, sched: sched, info: info, log: cfg.Logger, cost: cost,
		live: map[string]*request{}, finished: map[string]time.Time{},
		wakeCh: make(chan struct{}, 1), done: make(chan struct{}),
	}
	e.limits = Limits{
		ContextLen: info.ContextLen, Vocab: info.Vocab, PageSize: cfg.PageSize, TotalPages: pages,
		MaxOutputTokens:  min(info.ContextLen, pages*cfg.PageSize) - 1,
		MaxBatchedTokens: sc.MaxBatchedTokens, MaxRunning: sc.MaxRunning,
		MaxWaiting: cfg.MaxWaiting, MaxLogprobs: cfg.MaxLogprobs, Device: "cpu",
		MaxPromptLogprobEntries: cfg.MaxPromptLogprobEntries, MaxTokenCandidates: cfg.MaxTokenCandidates,
	}
	if _, ok := m.(HiddenModel); ok && info.Dim > 0 {
		e.limits.EmbeddingDim, e.limits.Pooling = info.Dim, resolvePooling(cfg.Pooling, info)
	}
	if _, ok := m.(RankModel); ok && e.limits.EmbeddingDim > 0 {
		e.limits.RankOutputs = info.RankOutputs
		e.rankPooling = info.RankPooling
		if e.rankPooling == PoolingDefault {
			e.rankPooling = PoolingCLS
		}
	}
	if info.Encoder {
		e.limits.EmbeddingsOnly = true
		// An input is computed in one step.
		e.limits.MaxOutputTokens = min(e.limits.MaxOutputTokens, e.limits.MaxBatchedTokens-1)
	}
	if d, ok := m.(interface{ Device() string }); ok {
		e.limits.Device = d.Device()
	}
	if sp := cfg.Speculation; sp.Enabled() {
		e.limits.Speculation, e.limits.SpecTokens, e.limits.SpecAdaptive = sp.Mode(), e.specTokens(), sp.Adaptive
		if sp.Draft != nil {
			e.limits.DraftModel = sp.DraftName
		}
	}
	for id := 0; id < info.Vocab; id++ {
		if tok.IsEOG(int32(id)) {
			e.eog = append(e.eog, int32(id))
		}
	}
	e.load.Pages = cache.Stats()
	go e.loop()
	return e, nil
}

// ModelName returns the configured model name.
func (e *Engine) ModelName() string { return e.cfg.ModelName }

// Limits returns the engine's fixed figures.
func (e *Engine) Limits() Limits { return e.limits }

// Tokenizer returns the tokenizer requests are encoded with.
func (e *Engine) Tokenizer() Tokenizer { return e.tok }

// Cache returns the KV cache (pins, stats, events, integrity checks).
func (e *Engine) Cache() *kvcache.Cache { return e.cache }

// Load returns the figures published after the latest step.
func (e *Engine) Load() LoadFigures {
	e.mu.Lock()
	l := e.load
	// Submitted since the loop last took its inbox: they wait too, and
	// Submit's queue limit counts them (admitLocked).
	l.Waiting += len(e.pending)
	e.mu.Unlock()
	l.Pages = e.cache.Stats()
	return l
}

// Stats returns cumulative counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// Abort cancels a live request; it ends within one step. Unknown ids get an
// error matching ErrNotFound, ids that finished within the retention
// window one matching ErrAlreadyFinished.
func (e *Engine) Abort(id string) error {
	e.mu.Lock()
	e.purgeLocked(time.Now())
	req, ok := e.live[id]
	_, fin := e.finished[id]
	e.mu.Unlock()
	switch {
	case ok:
		e.cancel(req, newError(CodeCancelled, "request %s aborted", id))
		return nil
	case fin:
		return newError(CodeAlreadyFinished, "request %s already finished", id)
	}
	return newError(CodeRequestNotFound, "request %s not found", id)
}

// AbortAll cancels every live request and returns how many.
func (e *Engine) AbortAll() int {
	e.mu.Lock()
	reqs := make([]*request, 0, len(e.live))
	for _, r := range e.live {
		reqs = append(reqs, r)
	}
	e.mu.Unlock()
	for _, r := range reqs {
		e.cancel(r, newError(CodeCancelled, "request %s aborted", r.id))
	}
	return len(reqs)
}

// Drain stops admitting: Submit fails with CodeDraining from now on.
// Running requests continue.
func (e *Engine) Drain() {
	e.mu.Lock()
	e.draining = true
	e.mu.Unlock()
}

// Draining reports whether Drain was called.
func (e *Engine) Draining() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.draining
}

// WaitIdle blocks until no request is live or ctx is done.
func (e *Engine) WaitIdle(ctx context.Context) error {
	e.mu.Lock()
	if len(e.live) == 0 {
		e.mu.Unlock()
		return nil
	}
	if e.idle == nil {
		e.idle = make(chan struct{})
	}
	ch := e.idle
	e.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close cancels every request, stops the loop and releases the cache.
// Safe to call twice.
func (e *Engine) Close() {
	e.mu.Lock()
	already := e.closed
	e.closed = true
	e.draining = true
	e.mu.Unlock()
	if !already {
		e.wake()
	}
	<-e.done
}

func (e *Engine) wake() {
	select {
	case e.wakeCh <- struct{}{}:
	default:
	}
}

// cancel asks the loop to end req with err (first reason wins).
func (e *Engine) cancel(req *request, err *Error) {
	e.mu.Lock()
	if req.cancelErr == nil && !req.ended {
		req.cancelErr = err
		e.cancels = append(e.cancels, req)
	}
	e.mu.Unlock()
	e.wake()
}

// input queues streamed input for the loop.
func (e *Engine) input(req *request, tokens []int32, close bool) error {
	if !req.r.OpenInput {
		return newError(CodeInvalidArgument, "request %s was not submitted with open input", req.id)
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= e.info.Vocab {
			return newError(CodeInvalidArgument, "token id %d outside the vocabulary (%d)", t, e.info.Vocab)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case req.ended || req.cancelErr != nil:
		return newError(CodeCancelled, "request %s has ended", req.id)
	case req.inputClosed:
		return newError(CodeInvalidArgument, "input of request %s is closed", req.id)
	}
	req.inputClosed = close
	e.cmds = append(e.cmds, inputCmd{req: req, tokens: append([]int32(nil), tokens...), close: close})
	e.wake()
	return nil
}

// purgeLocked forgets finished ids older than the retention window.
func (e *Engine) purgeLocked(now time.Time) {
	i := 0
	for ; i < len(e.finQ) && now.Sub(e.finQ[i].at) > e.cfg.FinishedRetention; i++ {
		if at, ok := e.finished[e.finQ[i].id]; ok && at.Equal(e.finQ[i].at) {
			delete(e.finished, e.finQ[i].id)
		}
	}
	e.finQ = e.finQ[i:]
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
