package engine

import (
	"time"

	"oengine/scheduler"
)

// Adaptive draft length (Speculation.Adaptive, docs/design.md §11): each
// step an output drafts the K that maximises the step's expected output
// rate, from what was measured, not from fixed rules:
//
//   - acceptance: the output's own per-draft acceptance α (decayed
//     counts of verified drafts, with the engine's pooled rate as prior);
//     K drafts then yield 1 + α + α² + … + α^K tokens on average;
//   - the step without drafts: the step-cost model's decode fit
//     (steptime.go), fitted on steps without drafts;
//   - the step with K drafts: its spec fit, on the decode-only steps that
//     carried drafts (several tokens of one sequence may run other kernels
//     than one token, so a plain step is not that line at one token);
//   - the draft model's run per draft position (a proposal forward each,
//     and the catch-up on last step's tokens), measured on steady runs,
//     decayed and shared by the outputs that may draft; an n-gram lookup
//     costs nothing.
//
// With B outputs decoding in a step whose price is T, K drafts are worth
// their cost when (B + gain(K)) / (T_K + draft cost) beats B / T, so a
// batch that is already compute-bound speculates less than a lone stream.
// K = 0 backs the output off for 2, 4, … 64 steps, after which one draft
// is verified to refresh α, unless even drafts that are always right would
// not pay. Draft positions whose chance of being reached is below
// minDraftChance are never proposed, which also bounds K while the prices
// are not yet measured.
const (
	// outputAcceptDecay weighs an output's verifications: about the last
	// 1/(1−decay) of them count.
	outputAcceptDecay = 0.85
	// poolAcceptDecay weighs every output's verifications for the pooled
	// rate that new outputs start from.
	poolAcceptDecay = 0.98
	// acceptPriorWeight is the pooled rate's weight, in drafts, in an
	// output's estimate.
	acceptPriorWeight = 2
	// acceptPrior is the pooled rate before any verification: three
	// drafts while the prices are unmeasured (0.5³ >= minDraftChance).
	acceptPrior = 0.5
	// minDraftChance: a draft position reached (all before it accepted)
	// with a lower estimated chance is not proposed.
	minDraftChance = 0.1
	// draftTimeDecay weighs the measured draft-model runs.
	draftTimeDecay = 0.8
	// maxBackoff bounds an output's back-off, in steps.
	maxBackoff = 64
	// exploreEvery: until minPlainSteps steps without drafts were
	// measured (a lone stream whose drafts are accepted drafts every
	// step), every exploreEvery-th step proposes none, so what a plain
	// step costs is measured, not extrapolated from steps with drafts;
	// after that every refreshEvery-th step, so one slow plain step does
	// not keep speculation on for good.
	exploreEvery  = 8
	minPlainSteps = 4
	refreshEvery  = 64
)

// acceptance is a decayed count of verified drafts and accepted ones.
type acceptance struct{ accepted, tried float64 }

// add records a verification that accepted matched of k drafts: the
// drafts tried are those accepted plus the first rejected one.
func (a *acceptance) add(matched, k int, decay float64) {
	tried := matched
	if matched < k {
		tried++
	}
	a.accepted = a.accepted*decay + float64(matched)
	a.tried = a.tried*decay + float64(tried)
}

// rate estimates the per-draft acceptance, pulled toward prior by weight
// drafts' worth of evidence.
func (a acceptance) rate(prior, weight float64) float64 {
	return (a.accepted + weight*prior) / (a.tried + weight)
}

// specPrice is what drafts cost in the step being proposed, in seconds.
type specPrice struct {
	priced   bool           // the step is priced with and without drafts, and (with a draft model) the draft run is measured
	explore  bool           // this step proposes no drafts, to measure a plain step
	decoders int            // outputs decoding in the step
	base     scheduler.Work // their decode tokens, no drafts
	step     float64        // modelled duration of the step without drafts
	spec     costModel      // prices the step with drafts added
	draft    float64        // an output's share of the draft model's run per draft position
}

// withDrafts is the modelled step when the output whose decode token is
// at pos adds k drafts.
func (p specPrice) withDrafts(pos, k int) float64 {
	return p.spec.price(p.base.Add(scheduler.ChunkWork(pos+1, k)))
}

// chooseDraftLen is the draft length, 0 to kmax, that maximises the
// step's expected tokens per second for an output whose decode token is
// at pos and whose drafts are accepted with probability alpha.
func chooseDraftLen(alpha float64, kmax, pos int, p specPrice) int {
	best, bestRate := 0, 0.0
	if p.priced {
		bestRate = float64(p.decoders) / p.step
	}
	gain, reach := 0.0, 1.0
	for k := 1; k <= kmax; k++ {
		reach *= alpha
		if reach < minDraftChance {
			break
		}
		gain += reach
		if !p.priced {
			best = k
			continue
		}
		if r := (float64(p.decoders) + gain) / (p.withDrafts(pos, k) + float64(k)*p.draft); r > bestRate {
			best, bestRate = k, r
		}
	}
	return best
}

// specPricing prices drafts for the step about to be proposed: the
// outputs that decode in it (ready) and, of those, the ones that may
// speculate. Called once per step with speculation on.
func (e *Engine) specPricing(ready []*output, drafting int) specPrice {
	p := specPrice{decoders: len(ready)}
	for _, o := range ready {
		p.base = p.base.Add(scheduler.ChunkWork(o.seq.Known()-1, 1))
	}
	var ok bool
	var plainSeen int
	p.step, p.spec, ok, plainSeen = e.cost.draftPricing(p.base)
	every := refreshEvery
	if plainSeen < minPlainSteps {
		every = exploreEvery
	}
	p.explore = e.lp.proposals%every == 0
	if !ok {
		return p
	}
	if e.draft != nil {
		if e.lp.draftTime <= 0 {
			return p
		}
		p.draft = e.lp.draftTime / float64(max(drafting, 1))
	}
	p.priced = true
	return p
}

// observeDraftTime records a step's draft-model run, d, per draft
// position of its longest draft: one proposal forward each, plus the
// catch-up on the tokens verified last step, which only speculating
// outputs pay (a backed-off output's draft K/V waits). A run that caught
// up on more (a prompt, the tokens of a back-off) is not steady and is
// not recorded.
func (e *Engine) observeDraftTime(plan *scheduler.Plan, d time.Duration, steady bool) {
	if !steady {
		return
	}
	k := 0
	for i := range plan.Items {
		k = max(k, plan.Items[i].Draft)
	}
	if k == 0 {
		return
	}
	per := d.Seconds() / float64(k)
	if e.lp.draftTime <= 0 {
		e.lp.draftTime = per
		return
	}
	e.lp.draftTime = draftTimeDecay*e.lp.draftTime + (1-draftTimeDecay)*per
}

// adaptiveLen is o's draft length for this step (at most kmax), or 0
// when it backs off.
func (e *Engine) adaptiveLen(o *output, kmax int, p specPrice) int {
	alpha := o.spec.seen.rate(e.lp.pooled.rate(acceptPrior, acceptPriorWeight), acceptPriorWeight)
	pos := o.seq.Known() - 1
	k := chooseDraftLen(alpha, kmax, pos, p)
	switch {
	case p.explore:
		k = 0
	case k > 0:
		o.spec.backoff = 0
	case o.spec.probe && (!p.priced || chooseDraftLen(1, kmax, pos, p) > 0):
		// Probe unless even drafts that are always right would not pay
		// (then a probe, and the draft model's catch-up on the tokens
		// of the back-off, would buy nothing).
		k = 1
	default:
		o.spec.backoff = min(max(2*o.spec.backoff, 2), maxBackoff)
		o.spec.skip = o.spec.backoff
	}
	o.spec.probe = false
	return k
}
