package engine

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	mbits "math/bits"
	"slices"
	"time"

	"oengine/grammar"
	"oengine/sampling"
	"oengine/scheduler"
)

// runStep turns a plan into one forward pass, then samples and applies stop
// conditions for every item that ends at its last known token.
func (e *Engine) runStep(plan *scheduler.Plan) {
	t0 := time.Now()
	for _, c := range plan.Copies {
		e.kv.CopyPage(c.Dst, c.Src)
		if e.draft != nil {
			e.draft.kv.CopyPage(c.Dst, c.Src)
		}
	}
	// The step-cost fits price the target's work; the draft model's time
	// is priced on its own (specpolicy.go).
	var draftTime time.Duration
	if e.draft != nil {
		td := time.Now()
		steady := e.runDraft(plan)
		draftTime = time.Since(td)
		e.observeDraftTime(plan, draftTime, steady)
	}
	b := &e.lp.batch
	b.Tokens, b.Pos, b.Seq, b.Seqs, b.Logits, b.Hidden = b.Tokens[:0], b.Pos[:0], b.Seq[:0], b.Seqs[:0], b.Logits[:0], b.Hidden[:0]
	b.Types, e.lp.types = nil, e.lp.types[:0] // set when a token of the step has a type
	for i := range plan.Items {
		it := &plan.Items[i]
		b.Seqs = append(b.Seqs, it.Pages)
		toks := it.Seq.Tokens()
		req := it.Seq.Data.(*output).req
		embed := req.embed != nil // its rows are hidden states, not logits
		if req.typeFrom > 0 || b.Types != nil {
			// A pair's second text is token type 1; every other token 0.
			ty := e.lp.types
			for len(ty) < len(b.Tokens) {
				ty = append(ty, 0)
			}
			for p := it.Start; p < it.End; p++ {
				var t uint8
				if req.typeFrom > 0 && p >= req.typeFrom {
					t = 1
				}
				ty = append(ty, t)
			}
			e.lp.types, b.Types = ty, ty
		}
		for p := it.Start; p < it.End; p++ {
			switch {
			case p < it.LogitsStart:
			case embed:
				b.Hidden = append(b.Hidden, int32(len(b.Tokens)))
			default:
				b.Logits = append(b.Logits, int32(len(b.Tokens)))
			}
			b.Tokens = append(b.Tokens, toks[p])
			b.Pos = append(b.Pos, int32(p))
			b.Seq = append(b.Seq, int32(i))
		}
	}
	V := e.info.Vocab
	// A step whose sampled outputs all take the plain argmax lets a
	// GreedyModel choose on its side: no logits rows come back.
	gm, greedy := e.model.(GreedyModel)
	greedy = greedy && len(b.Hidden) == 0 && e.plainGreedy(plan)
	var logits, hidden []float32
	var chosen []int32
	var err error
	if greedy {
		chosen = slices.Grow(e.lp.chosen[:0], len(b.Logits))[:len(b.Logits)]
		e.lp.chosen = chosen
		err = e.forwardGreedy(gm, b, chosen)
	} else {
		if need := len(b.Logits) * V; cap(e.lp.logits) < need {
			e.lp.logits = make([]float32, need)
		}
		logits = e.lp.logits[:len(b.Logits)*V]
		if len(b.Hidden) > 0 {
			D := e.limits.EmbeddingDim
			if need := len(b.Hidden) * D; cap(e.lp.hidden) < need {
				e.lp.hidden = make([]float32, need)
			}
			hidden = e.lp.hidden[:len(b.Hidden)*D]
		}
		err = e.forward(b, logits, hidden)
	}
	if err != nil {
		e.log.Error("engine: forward failed", "err", err, "tokens", len(b.Tokens))
		for i := range plan.Items {
			e.endRequest(plan.Items[i].Seq.Data.(*output).req, wrapError(CodeInternal, err, "forward pass"))
		}
		return
	}
	e.sched.Advance(plan)
	var decodeWork, prefillWork scheduler.Work
	drafted := false
	for i := range plan.Items {
		it := &plan.Items[i]
		drafted = drafted || it.Draft > 0
		w := scheduler.ChunkWork(it.Start, it.End-it.Start)
		if it.End-it.Start == 1+it.Draft { // decode (as the scheduler plans it first)
			decodeWork = decodeWork.Add(w)
		} else {
			prefillWork = prefillWork.Add(w)
		}
	}
	e.cost.observe(decodeWork, prefillWork, drafted, time.Since(t0), draftTime)

	st := StepStats{Sequences: len(plan.Items), Preemptions: len(plan.Preempted)}
	row, hrow := 0, 0
	for i := range plan.Items {
		it := &plan.Items[i]
		o := it.Seq.Data.(*output)
		req := o.req
		st.PrefillTokens += it.End - it.Start
		if req.embed != nil {
			D := e.limits.EmbeddingDim
			rows := hidden[hrow*D : (hrow+it.Logits())*D]
			hrow += it.Logits()
			if _, live := e.lp.active[req]; live && !o.finished {
				e.embedStep(o, it, rows, t0)
			}
			continue
		}
		var rows []float32
		if !greedy {
			rows = logits[row*V : (row+it.Logits())*V]
		}
		row += it.Logits()
		if _, live := e.lp.active[req]; !live || o.finished {
			continue
		}
		if !req.started {
			req.started, req.cached, req.queued = true, it.Seq.Cached(), t0.Sub(req.arrived)
		}
		if o.index == 0 {
			req.prefilled.Store(int64(min(it.End, len(req.prompt))))
		}
		if req.promptLP != nil && o.index == 0 {
			e.promptLogprobs(req, it, rows)
		}
		if it.Sample && it.Draft > 0 {
			st.PrefillTokens -= it.Draft + 1
			n := len(o.tokens)
			e.lp.specDrafted, e.lp.specAccepted = 0, 0
			e.verifyStep(o, it, rows[(it.Logits()-1-it.Draft)*V:])
			st.DecodeTokens += len(o.tokens) - n
			st.SpecDrafted += e.lp.specDrafted
			st.SpecAccepted += e.lp.specAccepted
		} else if it.Sample {
			st.PrefillTokens--
			st.DecodeTokens++
			if greedy {
				e.sampleStep(o, nil, chosen[row-1])
			} else {
				e.sampleStep(o, rows[(it.Logits()-1)*V:], -1)
			}
		}
	}
	st.Duration = time.Since(t0)
	if e.log.Enabled(context.Background(), slog.LevelDebug) { // the arguments would allocate every step
		e.log.Debug("engine: step", "sequences", st.Sequences, "decode_tokens", decodeWork.Tokens, "decode_keys", decodeWork.Keys,
			"prefill_tokens", prefillWork.Tokens, "prefill_keys", prefillWork.Keys, "draft_duration", draftTime, "target", e.cost.planned, "duration", st.Duration)
	}
	e.mu.Lock()
	e.stats.PromptTokens += uint64(st.PrefillTokens)
	e.stats.GenerationTokens += uint64(st.DecodeTokens)
	e.mu.Unlock()
	if h := e.cfg.Hooks.OnStep; h != nil {
		h(st)
	}
}

// forward runs the model (with hidden rows, as the HiddenModel it then
// is), turning a panic in it into an error that ends the step's requests
// instead of the process.
func (e *Engine) forward(b *Batch, logits, hidden []float32) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine: model panicked: %v", p)
		}
	}()
	if len(b.Hidden) > 0 {
		return e.model.(HiddenModel).ForwardHidden(e.kv, b, logits, hidden)
	}
	return e.model.Forward(e.kv, b, logits)
}

// forwardGreedy is forward for a GreedyModel's ForwardGreedy.
func (e *Engine) forwardGreedy(gm GreedyModel, b *Batch, out []int32) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine: model panicked: %v", p)
		}
	}()
	return gm.ForwardGreedy(e.kv, b, out)
}

// plainGreedy reports whether every output that samples in plan takes the
// plain argmax of one logits row, so the row itself is not needed: greedy
// with no penalty, no logprobs, no prompt logprobs, no constraint, no
// min_tokens ban in force and no draft to verify. A plan that samples
// nothing runs the ordinary way.
func (e *Engine) plainGreedy(plan *scheduler.Plan) bool {
	sampled := false
	for i := range plan.Items {
		it := &plan.Items[i]
		if it.Logits() == 0 {
			continue
		}
		if !it.Sample || it.Draft > 0 || it.Logits() != 1 {
			return false
		}
		o := it.Seq.Data.(*output)
		req := o.req
		r := &req.r
		if !req.params.Greedy() || req.params.RewritesLogits() || r.Logprobs != nil || req.promptLP != nil || o.guide != nil {
			return false
		}
		if len(o.tokens) < r.MinTokens && (len(r.Stop.TokenIDs) > 0 || (!r.Stop.IgnoreEOS && len(e.eog) > 0)) {
			return false
		}
		sampled = true
	}
	return sampled
}

// promptLogprobs records the logprob of prompt token p+1 from the logits
// of position p, for each row of the item that is still missing.
func (e *Engine) promptLogprobs(req *request, it *scheduler.Item, rows []float32) {
	V := e.info.Vocab
	for p := it.LogitsStart; p < it.End; p++ {
		if p+1 < len(req.prompt) && req.promptLP[p+1].Candidates == nil && req.promptLP[p+1].Chosen.Rank == 0 {
			r := rows[(p-it.LogitsStart)*V : (p-it.LogitsStart+1)*V]
			sampling.ComputeLogprobs(r, req.prompt[p+1], *req.r.PromptLogprobs, &req.promptLP[p+1])
		}
	}
	if it.End >= len(req.prompt)-1 {
		it.Seq.LogitsFrom = scheduler.NoLogits
	} else {
		// A recomputing item (after a preemption) may end before the
		// rows already taken.
		it.Seq.LogitsFrom = max(it.Seq.LogitsFrom, it.End)
	}
}

// sampleStep samples the next token of o (and, at the first token of an
// n > 1 request, forks the other outputs, which sample from the same row).
// chosen >= 0 is the token the model already chose (a plainGreedy step;
// row is nil), else it is drawn from row.
func (e *Engine) sampleStep(o *output, row []float32, chosen int32) {
	req := o.req
	now := time.Now()
	if !req.promptSent {
		req.promptSent = true
		e.emit(req, Event{Kind: EventPrompt, Prompt: &PromptInfo{
			Tokens: slices.Clone(req.prompt), CachedTokens: req.cached, Logprobs: req.promptLP}})
	}
	outs := []*output{o}
	if o.index == 0 && len(req.outputs) < req.n {
		for k := 1; k < req.n; k++ {
			c := &output{req: req, index: k}
			seq, err := e.sched.Fork(o.seq, c)
			if err != nil {
				e.endRequest(req, wrapError(CodeInternal, err, "fork output %d", k))
				return
			}
			c.seq = seq
			e.initOutput(c)
			c.spec.dcomp = o.spec.dcomp // the pages are shared
			req.outputs = append(req.outputs, c)
			if req.paused {
				e.sched.SetPaused(seq, true)
			}
			outs = append(outs, c)
		}
	}
	for _, x := range outs {
		if _, live := e.lp.active[req]; !live {
			return
		}
		e.sampleOne(x, row, chosen, now)
	}
}

// sampleOne draws one token for o from its logits row (or takes chosen,
// see sampleStep), then applies the stop conditions and emits its events.
func (e *Engine) sampleOne(o *output, row []float32, chosen int32, now time.Time) {
	req := o.req
	r := &req.r
	tok := chosen
	if tok < 0 {
		dist, ok := e.stepRow(o, row, len(o.tokens))
		if !ok {
			return
		}
		tok = o.sampler.Sample(dist, sampling.History{Prompt: req.prompt, Output: o.tokens})
	}
	if o.guide != nil {
		if err := o.guide.Advance(tok); err != nil {
			e.endRequest(req, wrapError(CodeInternal, err, "constrained sampling"))
			return
		}
	}
	var lp *sampling.Logprobs
	if r.Logprobs != nil {
		lp = &sampling.Logprobs{}
		sampling.ComputeLogprobs(row, tok, *r.Logprobs, lp)
	}
	_ = e.sched.Append(o.seq, tok)
	if fin := e.deliver(o, tok, lp, now, o.seq.Known()); fin != nil {
		e.finishOutput(o)
	}
}

// stepRow returns the row o's next token (its gen-th, from 0) is drawn
// from: row itself, or a copy masked by the constraint and by min_tokens
// (end and stop tokens banned). false: the constraint allows no token; the
// request was ended.
func (e *Engine) stepRow(o *output, row []float32, gen int) ([]float32, bool) {
	req := o.req
	r := &req.r
	dist := row
	if o.guide != nil {
		dist = e.lp.masked[:0]
		if !applyMask(&dist, row, o.guide.Mask()) {
			e.endRequest(req, newError(CodeInternal, "grammar: no token of the vocabulary can continue the constrained output"))
			return nil, false
		}
		e.lp.masked = dist
	}
	if gen < r.MinTokens && (len(r.Stop.TokenIDs) > 0 || (!r.Stop.IgnoreEOS && len(e.eog) > 0)) {
		if o.guide == nil {
			e.lp.masked = append(e.lp.masked[:0], row...)
			dist = e.lp.masked
		}
		// With a constraint, a stop token it requires (the output is
		// complete) stays allowed: the constraint ends the output.
		var saved [8]float32
		var held []float32
		banned := r.Stop.TokenIDs
		if !r.Stop.IgnoreEOS {
			banned = append(slices.Clip(e.eog), r.Stop.TokenIDs...)
		}
		if o.guide != nil {
			held = saved[:0]
			for _, id := range banned {
				held = append(held, dist[id])
			}
		}
		for _, id := range banned {
			dist[id] = float32(math.Inf(-1))
		}
		if held != nil && !anyFinite(dist) {
			for i, id := range banned {
				dist[id] = held[i]
			}
		}
	}
	return dist, true
}

// deliver records tok as o's next token (already appended to its
// sequence, which then holds known tokens), applies the stop conditions
// and emits its events. It returns the finish when the output ended; the
// caller then calls finishOutput.
func (e *Engine) deliver(o *output, tok int32, lp *sampling.Logprobs, now time.Time, known int) *Finish {
	req := o.req
	o.tokens = append(o.tokens, tok)
	if req.firstTok.IsZero() {
		req.firstTok = now
	}
	if !o.lastTok.IsZero() {
		if h := e.cfg.Hooks.OnInterToken; h != nil {
			h(now.Sub(o.lastTok))
		}
	}
	o.lastTok = now
	gen := len(o.tokens)

	text, fin := e.stopCheck(o, tok, gen, known)
	e.emit(req, Event{Kind: EventTokens, Output: o.index, Tokens: []Token{{ID: tok, Logprobs: lp}}, Text: text})
	if fin == nil {
		return nil
	}
	fin.Tokens = gen
	o.finished, o.finish = true, *fin
	e.emit(req, Event{Kind: EventFinished, Output: o.index, Finish: fin})
	return fin
}

// finishOutput retires an output that just finished: the session hook,
// the release of its sequence, and the end of the request when it was the
// last output.
func (e *Engine) finishOutput(o *output) {
	req := o.req
	r := &req.r
	if r.OnRetain != nil && o.index == 0 {
		if kt, ok := o.seq.Table().(*kvTable); ok {
			r.OnRetain(Retained{Tokens: slices.Clone(o.seq.Tokens()), Computed: o.seq.Computed(), Table: kt.t})
		}
	}
	e.sched.Finish(o.seq)
	if len(req.outputs) < req.n {
		return // siblings not forked yet (cannot happen: forks precede sampling)
	}
	for _, x := range req.outputs {
		if !x.finished {
			return
		}
	}
	e.endRequest(req, nil)
}

// stopCheck applies the stop conditions to the token just sampled (the
// gen-th of o, its sequence then holding known tokens) and returns the
// text that may be emitted now.
func (e *Engine) stopCheck(o *output, tok int32, gen, known int) (string, *Finish) {
	req := o.req
	r := &req.r
	canStop := gen-1 >= r.MinTokens // tokens before this one
	switch {
	case canStop && !r.Stop.IgnoreEOS && e.tok.IsEOG(tok):
		return e.flushText(o), &Finish{Reason: FinishStop, Kind: StopEOS, TokenID: tok}
	case canStop && slices.Contains(r.Stop.TokenIDs, tok):
		return e.flushText(o), &Finish{Reason: FinishStop, Kind: StopTokenID, TokenID: tok}
	case o.guide != nil && o.guide.Done() && e.tok.IsEOG(tok):
		// The constraint allowed an end token (the output was complete):
		// it ends the output even under ignore_eos or min_tokens.
		return e.flushText(o), &Finish{Reason: FinishStop, Kind: StopEOS, TokenID: tok}
	}
	piece := o.dec.Push(tok)
	var text string
	if gen >= r.MinTokens {
		t, matched := o.match.Push(piece)
		if matched {
			m, _ := o.match.Match()
			return t, &Finish{Reason: FinishStop, Kind: StopString, Text: m.Text, Index: m.Index}
		}
		text = t
	} else {
		text = o.match.PushNoStop(piece)
	}
	switch {
	case o.guide != nil && o.guide.Done():
		return text + e.flushText(o), &Finish{Reason: FinishStop, Kind: StopGrammar}
	case gen >= req.maxTokens():
		return text + e.flushText(o), &Finish{Reason: FinishLength, Kind: StopMaxTokens}
	case known >= req.limit:
		return text + e.flushText(o), &Finish{Reason: FinishLength, Kind: StopContext}
	}
	return text, nil
}

// flushText releases text held by the detokenizer and the stop matcher at
// the end of an output that did not end on a stop string.
func (e *Engine) flushText(o *output) string {
	var text string
	if rest := o.dec.Flush(); rest != "" {
		t, matched := o.match.Push(rest)
		if matched {
			return t
		}
		text = t
	}
	return text + o.match.Flush()
}

// applyMask writes row into *dst (reusing its capacity) with every token
// the mask forbids set to -Inf, and reports whether any token is allowed.
// Per 64-token word it copies the row then writes -Inf at the cleared
// bits, or, for a sparse word, fills -Inf then copies the set bits: the
// cost follows the minority of each word, not every bit (its plain twin,
// applyMaskReference, is in the tests).
func applyMask(dst *[]float32, row []float32, m grammar.Mask) bool {
	d := slices.Grow((*dst)[:0], len(row))[:len(row)]
	*dst = d
	inf := float32(math.Inf(-1))
	allowed := false
	for w := 0; w*64 < len(row); w++ {
		lo, hi := w*64, min(w*64+64, len(row))
		var bits uint64
		if w < len(m) {
			bits = m[w]
		}
		if hi-lo < 64 {
			bits &= 1<<uint(hi-lo) - 1
		}
		if bits != 0 {
			allowed = true
		}
		dw, rw := d[lo:hi], row[lo:hi]
		if mbits.OnesCount64(bits) >= 32 {
			copy(dw, rw)
			for off := ^bits; off != 0; off &= off - 1 {
				if i := mbits.TrailingZeros64(off); i < len(dw) {
					dw[i] = inf
				}
			}
			continue
		}
		copy(dw, negInf[:len(dw)])
		for on := bits; on != 0; on &= on - 1 {
			i := mbits.TrailingZeros64(on)
			dw[i] = rw[i]
		}
	}
	return allowed
}

// negInf is one word's worth of -Inf to copy from.
var negInf = func() (b [64]float32) {
	for i := range b {
		b[i] = float32(math.Inf(-1))
	}
	return b
}()

func anyFinite(d []float32) bool {
	for _, v := range d {
		if !math.IsInf(float64(v), -1) {
			return true
		}
	}
	return false
}
