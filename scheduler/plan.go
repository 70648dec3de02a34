package scheduler

import "slices"

// Item is one sequence's share of a step: positions [Start, End) of its
// tokens are computed; logits are produced for positions [LogitsStart, End)
// (LogitsStart == End: none); when Sample is set the last row (position
// End-1) is the one a new token is sampled from. A speculating item ends
// with Draft unverified draft tokens: its last Draft+1 rows are the
// target's logits at the last verified token and at each draft token, and
// the engine settles it with Scheduler.Accept.
type Item struct {
	Seq         *Seq
	Start, End  int
	LogitsStart int
	Sample      bool
	Draft       int
	Pages       []int32 // the sequence's page table: a read-only view, valid until the next Plan
	Copies      []Copy  // copy-on-write this item needs (also in Plan.Copies)
}

// Tokens returns the token ids the item computes.
func (it *Item) Tokens() []int32 { return it.Seq.tokens[it.Start:it.End] }

// Logits is the number of logits rows the item produces.
func (it *Item) Logits() int { return it.End - it.LogitsStart }

// Plan is the plain value one step hands to the runner.
type Plan struct {
	Items     []Item
	Copies    []Copy // page copies to perform before the forward pass, in order
	Preempted []*Seq // sequences preempted while planning (now waiting)
	Tokens    int    // total tokens computed
}

// Empty reports a plan with nothing to compute.
func (p *Plan) Empty() bool { return len(p.Items) == 0 }

// planner is the state of building one plan.
type planner struct {
	sc        *Scheduler
	items     []Item
	budget    int
	preempted []*Seq
	// take sizes the chunks after the decode tokens (Config.PrefillLimit);
	// nil: the token budget only.
	take func(start, n int) int
}

// Plan builds the next step: decode tokens of running sequences first, then
// the rest of running sequences' known tokens (prefill chunks, streamed
// input, recomputation), then admissions from the waiting queue in priority
// then arrival order, all under MaxBatchedTokens and MaxRunning (and, when
// decode tokens are planned, under Config.PrefillLimit). When pages
// run out, the lowest-priority, most recently arrived running sequence is
// preempted (its pages released, requeued with all its tokens).
func (sc *Scheduler) Plan() Plan {
	slices.SortFunc(sc.running, cmpSeq)
	slices.SortFunc(sc.waiting, cmpSeq)
	p := planner{sc: sc, budget: sc.cfg.MaxBatchedTokens}
	p.budgetDrafts()

	for pass := 0; pass < 2; pass++ {
		if pass == 1 && len(p.items) > 0 && sc.cfg.PrefillLimit != nil {
			l := StepLoad{Decoding: len(p.items)}
			for _, it := range p.items {
				l.Decode = l.Decode.Add(ChunkWork(it.Start, it.End-it.Start))
			}
			for _, q := range [2][]*Seq{sc.running, sc.waiting} {
				for _, s := range q {
					if !s.paused && s.todo()-s.draft > 1 {
						l.Prompts++
					}
				}
			}
			p.take = sc.cfg.PrefillLimit(l)
		}
		for i := 0; i < len(sc.running) && p.budget > 0; i++ {
			s := sc.running[i]
			if s.paused || s.todo() == 0 || p.index(s) >= 0 {
				continue
			}
			if pass == 0 && s.todo()-s.draft != 1 {
				continue
			}
			p.scheduleRunning(s)
		}
	}
	if len(p.preempted) == 0 {
		p.admit()
	}
	for _, s := range sc.running {
		if s.draft > 0 && p.index(s) < 0 {
			s.dropDraft() // not scheduled this step (budget): decode plainly later
		}
	}

	plan := Plan{Items: p.items, Preempted: p.preempted}
	for i := range plan.Items {
		it := &plan.Items[i]
		it.Pages = it.Seq.table.Pages()
		plan.Copies = append(plan.Copies, it.Copies...)
		plan.Tokens += it.End - it.Start
	}
	if len(plan.Items) > 0 {
		sc.stats.Steps++
	}
	return plan
}

// Advance records that the plan ran: every item's tokens are computed and
// newly full pages are offered to the prefix cache (not a whole
// sequence's, SeqOptions.Whole). Items of sequences that
// were finished or preempted since Plan are skipped.
func (sc *Scheduler) Advance(p *Plan) {
	ps := sc.alloc.PageSize()
	for i := range p.Items {
		it := &p.Items[i]
		s := it.Seq
		if s.state != Running || s.computed != it.Start {
			continue
		}
		s.computed = it.End
		// Pages holding draft positions are published only once verified
		// (Accept).
		if v := it.End - it.Draft; v/ps > it.Start/ps && !s.whole {
			sc.alloc.Commit(s.table, s.tokens[:v])
		}
	}
}

// budgetDrafts keeps draft tokens only where the budget still gives every
// decoding sequence its one token: sequences in plan order keep their
// drafts while the tokens beyond one per decoding sequence last (so
// speculation never starves a plain decoder).
func (p *planner) budgetDrafts() {
	spare := p.budget
	for _, s := range p.sc.running {
		if !s.paused && s.todo()-s.draft == 1 {
			spare--
		}
	}
	for _, s := range p.sc.running {
		if s.draft == 0 {
			continue
		}
		if s.paused || s.draft > spare {
			s.dropDraft()
			continue
		}
		spare -= s.draft
	}
}

func cmpSeq(a, b *Seq) int {
	switch {
	case a == b:
		return 0
	case a.before(b):
		return -1
	}
	return 1
}

func (p *planner) index(s *Seq) int {
	for i := range p.items {
		if p.items[i].Seq == s {
			return i
		}
	}
	return -1
}

// scheduleRunning adds up to budget tokens of a running sequence, shrinking
// the chunk or preempting others when pages are short.
func (p *planner) scheduleRunning(s *Seq) {
	if s.draft > 0 {
		// A speculating sequence runs whole (last token plus drafts) or
		// drops its drafts and decodes one token.
		if s.todo() <= p.budget && p.tryAdd(s, s.todo()) {
			return
		}
		s.dropDraft()
	}
	n := min(s.todo(), p.budget)
	if p.take != nil {
		if n = min(p.take(s.computed, n), n); n <= 0 { // never more than asked
			return // no allowance left this step
		}
	}
	for {
		if p.tryAdd(s, n) {
			return
		}
		if fit := p.fit(s); fit > 0 && fit < n {
			n = fit
			continue
		}
		victim := p.sc.running[len(p.sc.running)-1]
		if victim == s {
			p.preempt(s)
			return
		}
		p.preempt(victim)
	}
}

// admit moves waiting sequences into the plan while budget, slots and pages
// allow; it stops at the first that cannot start (no overtaking).
func (p *planner) admit() {
	sc := p.sc
	for len(sc.waiting) > 0 && p.budget > 0 {
		var s *Seq
		for _, w := range sc.waiting {
			if !w.paused && w.todo() > 0 {
				s = w
				break
			}
		}
		if s == nil || sc.slotsUsed()+s.width > sc.cfg.MaxRunning {
			return
		}
		if s.table == nil {
			p.match(s)
		}
		n := min(s.todo(), p.budget)
		if s.whole {
			// All of it or nothing: the chunk allowance does not cut it
			// (an encoder's steps have no decoding neighbours to keep
			// smooth), and it waits for the budget and pages.
			if n < s.todo() || !p.tryAdd(s, n) {
				sc.releaseTable(s)
				return
			}
		} else if p.take != nil && n > 0 {
			if n = min(p.take(s.computed, n), n); n <= 0 { // never more than asked
				sc.releaseTable(s) // no allowance left this step
				return
			}
		}
		// n == 0: an open sequence whose known tokens are all reused but
		// the held-back last one; it is admitted without an item and
		// computes when more input arrives.
		if !s.whole && n > 0 && !p.tryAdd(s, n) {
			fit := p.fit(s)
			if fit <= 0 || !p.tryAdd(s, min(fit, n)) {
				sc.releaseTable(s)
				return
			}
		}
		sc.waiting = remove(sc.waiting, s)
		s.state = Running
		sc.running = append(sc.running, s)
		sc.stats.Admitted++
		if !s.bypass && s.LogitsFrom == NoLogits {
			sc.stats.PrefixQueries += uint64(len(s.tokens))
			sc.stats.PrefixHits += uint64(s.cached)
		}
	}
}

// match gives a waiting sequence a table, reusing its own Prefix or else
// the longest cached prefix, unless it bypasses the cache or wants
// per-position logits. At least one token is left to compute so the step
// yields logits.
func (p *planner) match(s *Seq) {
	a := p.sc.alloc
	limit := len(s.tokens) - 1
	switch {
	case s.bypass || s.LogitsFrom < limit:
		s.table, s.cached = a.NewTable(s.salt), 0
	case s.prefix != nil:
		s.table, s.cached = a.MatchPrefix(s.prefix, s.prefixLen, s.tokens, s.salt, limit)
	default:
		s.table, s.cached = a.Match(s.tokens, s.salt, limit)
	}
	s.computed = s.cached
}

// tryAdd grows s's table for n more tokens and appends the item.
func (p *planner) tryAdd(s *Seq, n int) bool {
	if n <= 0 {
		return false
	}
	copies, err := p.sc.alloc.Grow(s.table, s.computed, s.computed+n)
	if err != nil {
		// Any allocator error is treated like a shortage (ErrNoPages): the
		// sequence waits or is preempted, never the process.
		return false
	}
	start, end := s.computed, s.computed+n
	sample := end == len(s.tokens) && !s.open
	ls := end
	switch {
	case s.LogitsFrom < end:
		ls = max(start, s.LogitsFrom)
	case sample:
		ls = end - 1 - s.draft
	}
	p.items = append(p.items, Item{Seq: s, Start: start, End: end, LogitsStart: ls, Sample: sample, Draft: s.draft, Copies: copies})
	p.budget -= n
	return true
}

// fit estimates how many more tokens s can take with the pages available
// now, keeping one page spare for a copy-on-write.
func (p *planner) fit(s *Seq) int {
	a := p.sc.alloc
	ps := a.PageSize()
	have := 0
	if s.table != nil {
		have = len(s.table.Pages())
	}
	return (have+a.Available()-1)*ps - s.computed
}

// preempt takes a running sequence out, dropping its item if it has one.
func (p *planner) preempt(s *Seq) {
	if i := p.index(s); i >= 0 {
		p.budget += p.items[i].End - p.items[i].Start
		p.items = slices.Delete(p.items, i, i+1)
	}
	p.sc.preempt(s)
	p.preempted = append(p.preempted, s)
}
