package engine

import (
	"errors"
	"time"

	"oengine/sampling"
	"oengine/scheduler"
	"oengine/stopstr"
)

// loopState belongs to the loop goroutine.
type loopState struct {
	active map[*request]struct{} // given to the scheduler, not ended
	batch  Batch
	logits []float32 // [rows][vocab]
	hidden []float32 // [hidden rows][EmbeddingDim]
	types  []uint8   // the batch's token types when a step has some (Batch.Types)
	masked []float32 // [vocab] scratch for min_tokens masking
	chosen []int32   // [rows] tokens chosen by a GreedyModel
	timer  *time.Timer

	// speculation scratch and counters (spec.go)
	drafts, hist, acc []int32
	specDrafted       int        // draft tokens verified in the current step
	specAccepted      int        // of those, accepted
	ready             []*output  // outputs about to decode one token (propose)
	proposals         int        // steps proposed with speculation on
	pooled            acceptance // every output's verified drafts (specpolicy.go)
	draftTime         float64    // seconds of the draft model's run per draft position, decayed; 0: not measured
}

// loop is the step loop: take what other goroutines queued, plan, run,
// sample, emit; sleep when there is nothing to compute.
func (e *Engine) loop() {
	defer close(e.done)
	lp := &e.lp
	lp.active = map[*request]struct{}{}
	lp.timer = time.NewTimer(time.Hour)
	lp.timer.Stop()
	for {
		e.mu.Lock()
		pending, cmds, cancels, closed := e.pending, e.cmds, e.cancels, e.closed
		e.pending, e.cmds, e.cancels = nil, nil, nil
		e.mu.Unlock()

		for _, req := range pending {
			e.start(req)
		}
		for _, c := range cmds {
			e.applyInput(c)
		}
		for _, req := range cancels {
			e.endWithCancel(req)
		}
		if closed {
			e.shutdown()
			return
		}
		now := time.Now()
		next := e.checkPaused(now)

		e.propose()
		e.cost.planned = 0
		plan := e.sched.Plan()
		if plan.Empty() {
			e.publish()
			if e.cfg.CheckIntegrity {
				if err := e.cache.CheckIntegrity(); err != nil {
					e.log.Error("engine: KV ledger", "err", err)
				}
			}
			e.sleep(next)
			continue
		}
		e.runStep(&plan)
		e.publish()
	}
}

// sleep waits for a wake-up or until next (zero: no deadline).
func (e *Engine) sleep(next time.Time) {
	if next.IsZero() {
		<-e.wakeCh
		return
	}
	e.lp.timer.Reset(time.Until(next))
	select {
	case <-e.wakeCh:
	case <-e.lp.timer.C:
	}
	e.lp.timer.Stop()
}

// start hands an accepted request to the scheduler.
func (e *Engine) start(req *request) {
	e.mu.Lock()
	cerr := req.cancelErr
	e.mu.Unlock()
	e.lp.active[req] = struct{}{}
	if cerr != nil {
		e.endRequest(req, cerr)
		return
	}
	o := &output{req: req, index: 0}
	opts := scheduler.SeqOptions{
		Tokens: req.prompt, Priority: req.r.Priority, Open: req.r.OpenInput, Width: req.n,
		Salt: req.r.CacheSalt, Bypass: req.r.BypassPrefixCache, PromptLogits: req.r.PromptLogprobs != nil, Data: o,
	}
	if req.r.Embed != nil {
		e.startEmbed(req, &opts)
	}
	if req.prefix != nil {
		// The sequence owns it from here (Finish releases it, or Add on failure).
		opts.Prefix, opts.PrefixLen = &kvTable{t: req.prefix}, req.prefix.Len()
		req.prefix = nil
	}
	seq, err := e.sched.Add(opts)
	if err != nil {
		code := CodeInternal
		if errors.Is(err, scheduler.ErrNeverFits) {
			code = CodeContextLengthExceeded
		}
		e.endRequest(req, wrapError(code, err, "admission"))
		return
	}
	o.seq = seq
	e.initOutput(o)
	req.outputs = append(req.outputs, o)
	if req.r.PromptLogprobs != nil {
		req.promptLP = make([]sampling.Logprobs, len(req.prompt))
	}
}

func (e *Engine) initOutput(o *output) {
	r := o.req.r
	o.sampler = sampling.New(o.req.params, o.index)
	o.dec = e.tok.NewDecoder(r.SpecialText)
	o.spec.dcomp = -1
	o.match, _ = stopstr.New(r.Stop.Strings, r.Stop.IncludeStopInOutput) // validated in prepare
	if r.Constraint != nil {
		o.guide = r.Constraint.Start()
	}
}

// applyInput appends streamed input or closes it.
func (e *Engine) applyInput(c inputCmd) {
	req := c.req
	if _, ok := e.lp.active[req]; !ok || len(req.outputs) == 0 || req.inputDone {
		return
	}
	seq := req.outputs[0].seq
	if len(c.tokens) > 0 {
		req.prompt = append(req.prompt, c.tokens...)
		_ = e.sched.Append(seq, c.tokens...)
	}
	if c.close {
		req.inputDone = true
		if len(req.prompt) == 0 {
			e.endRequest(req, newError(CodeInvalidArgument, "empty input"))
			return
		}
		e.sched.CloseInput(seq)
	}
	if err := e.checkLength(req); err != nil {
		e.endRequest(req, err.(*Error))
	}
}

// checkPaused resumes requests whose consumer caught up and cancels those
// whose consumer stayed away too long. It returns the next deadline.
func (e *Engine) checkPaused(now time.Time) time.Time {
	var next time.Time
	for req := range e.lp.active {
		if !req.paused {
			continue
		}
		if req.stream.drained() {
			e.setPaused(req, false)
			continue
		}
		dl := req.pausedAt.Add(e.cfg.ConsumerTimeout)
		if !now.Before(dl) {
			e.mu.Lock()
			e.stats.ConsumerTimeouts++
			e.mu.Unlock()
			e.endRequest(req, newError(CodeCancelled, "request %s: consumer gone for %v", req.id, e.cfg.ConsumerTimeout))
			continue
		}
		if next.IsZero() || dl.Before(next) {
			next = dl
		}
	}
	return next
}

func (e *Engine) setPaused(req *request, p bool) {
	if req.paused == p {
		return
	}
	req.paused = p
	if p {
		req.pausedAt = time.Now()
		e.mu.Lock()
		e.stats.Pauses++
		e.mu.Unlock()
		if h := e.cfg.Hooks.OnPause; h != nil {
			h(req.id)
		}
	}
	for _, o := range req.outputs {
		if !o.finished {
			e.sched.SetPaused(o.seq, p)
		}
	}
}

// emit pushes an event and pauses the request when its queue is full.
func (e *Engine) emit(req *request, ev Event) {
	if req.stream.push(ev) && !ev.Terminal() {
		e.setPaused(req, true)
	}
}

// publish copies load figures for other goroutines.
func (e *Engine) publish() {
	l := e.sched.Load()
	st := e.sched.Stats()
	waitingReqs, runningReqs := 0, 0
	for req := range e.lp.active {
		if req.started {
			runningReqs++
		} else {
			waitingReqs++
		}
	}
	e.mu.Lock()
	e.load = LoadFigures{Running: runningReqs, Waiting: waitingReqs, Paused: l.Paused, Sequences: l.Running,
		TokensRunning: l.TokensRunning, TokensWaiting: l.TokensWaiting}
	e.stats.Steps, e.stats.Preemptions = st.Steps, st.Preemptions
	e.stats.PrefixQueries, e.stats.PrefixHits = st.PrefixQueries, st.PrefixHits
	e.mu.Unlock()
}

// shutdown ends every request (Close).
func (e *Engine) shutdown() {
	e.mu.Lock()
	pending := e.pending
	e.pending = nil
	e.mu.Unlock()
	for _, req := range pending {
		e.lp.active[req] = struct{}{}
	}
	for req := range e.lp.active {
		e.endRequest(req, newError(CodeCancelled, "engine closed"))
	}
	e.cache.Close()
	if e.draft != nil {
		e.draft.close()
	}
	if c, ok := e.kv.(interface{ Close() }); ok {
		c.Close() // device memory (model/gpu): nothing reads the store any more
	}
}

// endWithCancel ends a request with its recorded cancellation reason.
func (e *Engine) endWithCancel(req *request) {
	e.mu.Lock()
	err := req.cancelErr
	e.mu.Unlock()
	if _, ok := e.lp.active[req]; !ok {
		return // ended already, or still pending (start sees cancelErr)
	}
	e.endRequest(req, err)
}

// endRequest is the one way a request ends: unfinished outputs are
// finished (pages released through the scheduler's one release path), the
// terminal event is pushed, the id moves to the finished set. err nil means
// success.
func (e *Engine) endRequest(req *request, err *Error) {
	if _, ok := e.lp.active[req]; !ok {
		return
	}
	delete(e.lp.active, req)
	if req.prefix != nil { // never reached the scheduler
		e.cache.Release(req.prefix)
		req.prefix = nil
	}
	reason := FinishCancelled
	if err != nil && err.Code != CodeCancelled {
		reason = FinishError
	}
	var finishes []Finish
	for _, o := range req.outputs {
		if !o.finished {
			o.finished = true
			o.finish = Finish{Reason: reason, Tokens: len(o.tokens)}
			if len(o.tokens) > 0 {
				fin := o.finish
				e.emit(req, Event{Kind: EventFinished, Output: o.index, Finish: &fin})
			}
		}
		e.sched.Finish(o.seq)
		finishes = append(finishes, o.finish)
	}
	usage := req.usage()
	// The id moves from live to finished before the terminal event is
	// queued: a client that has seen the end and aborts gets
	// ALREADY_FINISHED, never a second ABORTED.
	now := time.Now()
	e.mu.Lock()
	req.ended = true
	delete(e.live, req.id)
	e.finished[req.id] = now
	e.finQ = append(e.finQ, finishedID{id: req.id, at: now})
	e.mu.Unlock()
	if err == nil {
		var vec []float32
		if req.embed != nil {
			vec = req.embed.vec
		}
		e.emit(req, Event{Kind: EventDone, Usage: usage, Embedding: vec})
	} else {
		e.emit(req, Event{Kind: EventError, Err: err, Usage: usage})
	}
	e.mu.Lock()
	if len(e.live) == 0 && e.idle != nil {
		close(e.idle)
		e.idle = nil
	}
	e.mu.Unlock()
	if req.stop != nil {
		req.stop()
	}
	if h := e.cfg.Hooks.OnRequestDone; h != nil {
		rs := RequestStats{ID: req.id, Queue: req.queued, E2E: now.Sub(req.arrived),
			PromptTokens: usage.PromptTokens, CachedPromptTokens: usage.CachedPromptTokens,
			CompletionTokens: usage.CompletionTokens, Finishes: finishes, Err: err}
		if !req.firstTok.IsZero() {
			rs.TTFT = req.firstTok.Sub(req.arrived)
		}
		for _, o := range req.outputs {
			rs.Preemptions += o.seq.Preemptions()
		}
		h(rs)
	}
}

func (req *request) usage() *Usage {
	u := &Usage{PromptTokens: len(req.prompt), CachedPromptTokens: req.cached}
	for _, o := range req.outputs {
		u.CompletionTokens += len(o.tokens)
	}
	return u
}
