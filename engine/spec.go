package engine

import (
	"slices"
	"time"

	"oengine/sampling"
	"oengine/scheduler"
)

// Speculation configures speculative decoding (docs/api.md
// "Speculative decoding"): each step, an output that is decoding proposes
// up to Tokens draft tokens; the target model computes its last token and
// the drafts in one forward pass, and verification keeps the longest
// prefix the target agrees with (greedy) or the prefix the
// rejection-sampling rule accepts (temperature > 0), plus one token of
// the target's own. Outputs are distributed exactly as without
// speculation; under greedy decoding they are the same tokens.
type Speculation struct {
	// NGram proposes drafts by prompt lookup: the last 3, 2 or 1 tokens
	// of the sequence (prompt and output) are searched for earlier in it,
	// and the tokens that followed are proposed.
	NGram bool
	// Tokens is the most draft tokens per step (K); 0: DefaultSpecTokens.
	Tokens int
	// Adaptive makes each output draft, step by step, the K (0 to Tokens)
	// that maximises the expected tokens per second from its measured
	// acceptance and the measured prices of verification and drafting
	// (specpolicy.go); K = 0 backs it off for 2, 4, ... 64 steps (the
	// draft model then catches up lazily), so poor drafts cost little.
	Adaptive bool
	// Draft, when set, is a draft model with the target's vocabulary
	// (smaller, or the same weights at lower precision): it proposes the
	// drafts, sampled with each request's own sampling options, and
	// verification uses the rejection rule against its distribution. It
	// gets a K/V store of the same pages as the target's (draft.go). It
	// takes precedence over NGram.
	Draft Model
	// DraftName names the draft model in ModelInfo.
	DraftName string
}

// DefaultSpecTokens is Speculation.Tokens when zero.
const DefaultSpecTokens = 4

// Enabled reports whether any drafter is configured.
func (s Speculation) Enabled() bool { return s.NGram || s.Draft != nil }

// Mode names the drafter for ModelInfo and reports: "draft_model",
// "ngram", or "" when speculation is off.
func (s Speculation) Mode() string {
	switch {
	case s.Draft != nil:
		return "draft_model"
	case s.NGram:
		return "ngram"
	}
	return ""
}

// specState is an output's speculation state (loop goroutine).
type specState struct {
	seen    acceptance // its verified drafts (Adaptive)
	skip    int        // steps left without speculating (Adaptive back-off)
	backoff int        // length of the last back-off
	probe   bool       // the back-off just ended: verify one draft to refresh the acceptance

	// draft model (draft.go)
	dsamp  *sampling.Sampler // draws the drafts with the request's options (its own stream)
	dcomp  int               // positions whose draft K/V is in the pages; -1: not yet known
	q      []sampling.Dist   // q[j]: the distribution draft j was drawn from (empty: a point mass)
	qValid int               // entries of q drawn for the current step
}

// propose gives every output that is about to decode one token its draft
// tokens, before the step is planned.
func (e *Engine) propose() {
	if !e.cfg.Speculation.Enabled() {
		return
	}
	ready, drafting := e.lp.ready[:0], 0
	for req := range e.lp.active {
		for _, o := range req.outputs {
			if decodeReady(o) {
				ready = append(ready, o)
				if mayDraft(o) {
					drafting++
				}
			}
		}
	}
	e.lp.ready = ready
	var price specPrice
	if e.cfg.Speculation.Adaptive && len(ready) > 0 {
		e.lp.proposals++
		price = e.specPricing(ready, drafting)
	}
	for _, o := range ready {
		if mayDraft(o) {
			e.proposeOne(o, price)
		}
	}
	clear(ready) // drop the references until the next step
}

// decodeReady reports whether o decodes exactly one token in the next
// step (nothing proposed yet).
func decodeReady(o *output) bool {
	s := o.seq
	return !o.finished && len(o.tokens) > 0 && s.State() == scheduler.Running && !s.Paused() && !s.Open() &&
		s.Draft() == 0 && s.Known()-s.Computed() == 1 && s.LogitsFrom == scheduler.NoLogits
}

// mayDraft reports whether o's request lets it speculate.
func mayDraft(o *output) bool {
	r := &o.req.r
	return !r.NoSpeculation && r.Constraint == nil && !o.req.paused
}

func (e *Engine) proposeOne(o *output, price specPrice) {
	s := o.seq
	req := o.req
	if o.spec.skip > 0 {
		o.spec.skip--
		o.spec.probe = o.spec.skip == 0
		return
	}
	// The bonus token must still fit: gen + K + 1 <= max tokens and
	// known + K + 1 <= the sequence limit; a draft model's positions
	// must fit its context.
	k := min(e.specTokens(), req.maxTokens()-len(o.tokens)-1, req.limit-s.Known()-1)
	if e.draft != nil {
		k = min(k, e.draft.ctx-s.Known()+1)
	}
	if k > 0 && e.cfg.Speculation.Adaptive {
		k = e.adaptiveLen(o, k, price)
	}
	if k <= 0 {
		return
	}
	var drafts []int32
	if e.draft != nil {
		// Placeholders, filled in by the draft model once the step is
		// planned (runDraft).
		if o.spec.dsamp == nil {
			o.spec.dsamp = sampling.New(req.params, -1-o.index)
		}
		drafts = e.lp.drafts[:0]
		for range k {
			drafts = append(drafts, 0)
		}
	} else {
		drafts = ngramLookup(s.Tokens(), k, e.lp.drafts[:0])
	}
	e.lp.drafts = drafts
	if len(drafts) == 0 {
		return
	}
	_ = e.sched.Propose(s, drafts) // refused only when not eligible (checked above)
}

func (e *Engine) specTokens() int {
	if k := e.cfg.Speculation.Tokens; k > 0 {
		return k
	}
	return DefaultSpecTokens
}

// ngramLookup appends to dst up to k tokens that followed the most recent
// earlier occurrence of the last n tokens of toks (n = 3, 2, 1: the longest
// suffix found wins).
func ngramLookup(toks []int32, k int, dst []int32) []int32 {
	L := len(toks)
	for n := min(3, L-1); n >= 1; n-- {
		suffix := toks[L-n:]
		for j := L - n - 1; j >= 0; j-- {
			if toks[j] == suffix[0] && slices.Equal(toks[j:j+n], suffix) {
				follow := toks[j+n : min(j+n+k, L)]
				return append(dst, follow...)
			}
		}
	}
	return dst
}

// verifyStep settles a speculating item: rows are the target's logits at
// the last verified token and at each of the K drafts. Each draft is
// verified in turn with the output's own sampler (sampling.Sampler.Verify,
// the target's processing: penalties, temperature, filters, min_tokens
// masking); the first rejection yields the target's replacement token,
// and full acceptance the bonus token from the last row. The tokens are
// then delivered one by one through the ordinary stop logic (a stop
// discards the rest), and the scheduler rolls back the K/V of everything
// not kept.
func (e *Engine) verifyStep(o *output, it *scheduler.Item, rows []float32) {
	req := o.req
	V := e.info.Vocab
	K := it.Draft
	drafts := append(e.lp.drafts[:0], it.Seq.Drafts()...)
	e.lp.drafts = drafts
	base := it.Seq.Known() - K // known tokens before the drafts
	gen := len(o.tokens)
	hist := append(e.lp.hist[:0], o.tokens...)
	acc := e.lp.acc[:0]
	for j := 0; j <= K; j++ {
		row := rows[j*V : (j+1)*V]
		dist, ok := e.stepRow(o, row, gen+j)
		if !ok {
			return
		}
		h := sampling.History{Prompt: req.prompt, Output: hist}
		var tok int32
		accepted := false
		if j < K {
			var q sampling.Dist
			if j < o.spec.qValid {
				q = o.spec.q[j]
			}
			tok, accepted = o.sampler.Verify(dist, h, drafts[j], q)
		} else {
			tok = o.sampler.Sample(dist, h)
		}
		acc = append(acc, tok)
		hist = append(hist, tok)
		if !accepted {
			break
		}
	}
	e.lp.hist, e.lp.acc = hist, acc
	o.spec.qValid = 0
	matched := len(acc) - 1
	e.specAdapt(o, K, matched)
	e.lp.specDrafted += K
	e.lp.specAccepted += matched
	// Counted before any of the tokens is delivered, so a client that has
	// seen the request end sees its drafts in Stats (the step's other
	// figures are added when the step ends).
	e.mu.Lock()
	e.stats.SpecDraftTokens += uint64(K)
	e.stats.SpecAcceptedTokens += uint64(matched)
	e.mu.Unlock()

	now := time.Now()
	emitted := 0
	var fin *Finish
	for i, tok := range acc {
		var lp *sampling.Logprobs
		if c := req.r.Logprobs; c != nil {
			lp = &sampling.Logprobs{}
			sampling.ComputeLogprobs(rows[i*V:(i+1)*V], tok, *c, lp)
		}
		emitted++
		if fin = e.deliver(o, tok, lp, now, base+i+1); fin != nil {
			break
		}
	}
	// The first emitted-1 drafts are kept with their K/V; the last
	// emitted token is appended like any sampled token (its K/V is
	// computed by the next step).
	e.sched.Accept(o.seq, emitted-1)
	_ = e.sched.Append(o.seq, acc[emitted-1])
	o.spec.dcomp = min(o.spec.dcomp, o.seq.Computed())
	if fin != nil {
		e.finishOutput(o)
	}
}

// specAdapt records a verification that accepted matched of k drafts
// for the adaptive draft length (specpolicy.go).
func (e *Engine) specAdapt(o *output, k, matched int) {
	o.spec.seen.add(matched, k, outputAcceptDecay)
	e.lp.pooled.add(matched, k, poolAcceptDecay)
}
