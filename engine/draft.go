package engine

import (
	"fmt"

	"oengine/sampling"
	"oengine/scheduler"
)

// draftRunner runs the draft model of speculative decoding
// (Speculation.Draft). Its K/V store has the same pages as the target's
// pool and is indexed by the same page ids: a sequence's page table serves
// both models, so prefix-cache hits, forks, copy-on-write and session
// pages need no second ledger. Every step the draft catches up on the
// tokens the target computes (prompts included), so its K/V mirrors the
// target's; then it proposes K tokens per speculating output, one draft
// forward per draft position.
type draftRunner struct {
	m      Model
	kv     KV
	ctx    int // the draft's context length: positions beyond it are never drafted
	batch  Batch
	logits []float32
	items  []draftItem
}

// draftItem is one speculating item of the current step.
type draftItem struct {
	it  *scheduler.Item
	o   *output
	seq int32 // index of its pages in the draft batch
	L   int   // known tokens before its drafts
}

func newDraftRunner(d Model, target ModelInfo, pages, pageSize int) (*draftRunner, error) {
	info := d.Info()
	if info.Vocab != target.Vocab {
		return nil, fmt.Errorf("engine: the draft model's vocabulary has %d tokens, the target's %d: speculative decoding needs the same vocabulary", info.Vocab, target.Vocab)
	}
	kv, err := d.NewKV(pages, pageSize)
	if err != nil {
		return nil, fmt.Errorf("engine: draft model K/V store: %w", err)
	}
	return &draftRunner{m: d, kv: kv, ctx: info.ContextLen}, nil
}

func (d *draftRunner) close() {
	if c, ok := d.kv.(interface{ Close() }); ok {
		c.Close()
	}
}

// forward runs the draft model on its batch, turning a panic into an error.
func (d *draftRunner) forward(V int) (logits []float32, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine: draft model panicked: %v", p)
		}
	}()
	if need := len(d.batch.Logits) * V; cap(d.logits) < need {
		d.logits = make([]float32, need)
	}
	logits = d.logits[:len(d.batch.Logits)*V]
	return logits, d.m.Forward(d.kv, &d.batch, logits)
}

func (d *draftRunner) reset() {
	b := &d.batch
	b.Tokens, b.Pos, b.Seq, b.Seqs, b.Logits = b.Tokens[:0], b.Pos[:0], b.Seq[:0], b.Seqs[:0], b.Logits[:0]
}

// runDraft brings the draft model's K/V up to date with the plan's items
// and fills the placeholder drafts of speculating items with its
// proposals (and their distributions q, for Verify). It runs after the
// plan's page copies and before the target's forward pass. A draft
// failure leaves the placeholders: verification stays exact whatever the
// drafts are, only fewer are accepted. steady reports a run whose
// catch-up was at most the two tokens a drafting output's last
// verification leaves per drafting output (specpolicy.go prices drafts
// from those).
func (e *Engine) runDraft(plan *scheduler.Plan) (steady bool) {
	d := e.draft
	V := e.info.Vocab
	d.reset()
	d.items = d.items[:0]
	b := &d.batch
	for i := range plan.Items {
		it := &plan.Items[i]
		o := it.Seq.Data.(*output)
		o.spec.qValid = 0
		if o.spec.dcomp < 0 || o.spec.dcomp > it.Start {
			o.spec.dcomp = it.Start // trust pages reused from the cache or a session
		}
		if it.Draft == 0 && it.End-it.Start == 1 {
			// A decode token without drafts (opted out, constrained,
			// backing off, at its token limit) is caught up on when
			// the output next drafts, in one batch with the rest;
			// prompt chunks are always computed, so prefix-cache pages
			// of prompts serve the draft too.
			continue
		}
		end := min(it.End-it.Draft, d.ctx)
		if end <= o.spec.dcomp {
			continue
		}
		si := int32(len(b.Seqs))
		b.Seqs = append(b.Seqs, it.Pages)
		toks := it.Seq.Tokens()
		for p := o.spec.dcomp; p < end; p++ {
			b.Tokens = append(b.Tokens, toks[p])
			b.Pos = append(b.Pos, int32(p))
			b.Seq = append(b.Seq, si)
		}
		o.spec.dcomp = end
		if it.Draft > 0 && end == it.End-it.Draft {
			b.Logits = append(b.Logits, int32(len(b.Tokens)-1))
			d.items = append(d.items, draftItem{it: it, o: o, seq: si, L: end})
		}
	}
	if len(b.Tokens) == 0 {
		return false
	}
	steady = len(d.items) > 0 && len(b.Tokens) <= 2*len(d.items)
	logits, err := d.forward(V)
	if err != nil {
		e.log.Error("engine: draft forward failed", "err", err, "tokens", len(b.Tokens))
		return false
	}
	e.drawDrafts(0, logits)
	for j := 1; ; j++ {
		d.reset()
		any := false
		for _, di := range d.items {
			if j >= di.it.Draft {
				continue
			}
			any = true
			si := int32(len(b.Seqs))
			b.Seqs = append(b.Seqs, di.it.Pages)
			b.Tokens = append(b.Tokens, di.it.Seq.Drafts()[j-1])
			b.Pos = append(b.Pos, int32(di.L+j-1))
			b.Seq = append(b.Seq, si)
			b.Logits = append(b.Logits, int32(len(b.Tokens)-1))
			di.o.spec.dcomp = di.L + j
		}
		if !any {
			return steady
		}
		if logits, err = d.forward(V); err != nil {
			e.log.Error("engine: draft forward failed", "err", err, "tokens", len(b.Tokens))
			return false
		}
		e.drawDrafts(j, logits)
	}
}

// drawDrafts samples draft j of every speculating item that has one from
// the draft logits rows (one per such item, in order).
func (e *Engine) drawDrafts(j int, logits []float32) {
	V := e.info.Vocab
	row := 0
	for _, di := range e.draft.items {
		if j >= di.it.Draft {
			continue
		}
		o := di.o
		r := logits[row*V : (row+1)*V]
		row++
		drafts := di.it.Seq.Drafts()
		// The draft sampler's penalty counts follow this history; when a
		// rejection rewrote a position without shortening it they may be
		// stale, which only changes q, and Verify uses the q drawn from.
		h := sampling.History{Prompt: o.req.prompt, Output: append(append(e.lp.hist[:0], o.tokens...), drafts[:j]...)}
		if len(o.spec.q) <= j {
			o.spec.q = append(o.spec.q, make([]sampling.Dist, j+1-len(o.spec.q))...)
		}
		var tok int32
		if o.req.params.Greedy() {
			tok = o.spec.dsamp.Sample(r, h)
			o.spec.q[j] = sampling.Dist{IDs: o.spec.q[j].IDs[:0], Probs: o.spec.q[j].Probs[:0]} // a point mass: Verify's exact shortcut
		} else {
			tok, o.spec.q[j] = o.spec.dsamp.SampleDist(r, h, o.spec.q[j])
		}
		e.lp.hist = h.Output
		drafts[j] = tok
		o.spec.qValid = j + 1
	}
}
