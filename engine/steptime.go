package engine

import (
	"math"
	"time"

	"oengine/scheduler"
)

// Step latency budget (docs/design.md §10): a step that carries decode
// tokens takes prefill tokens only up to what keeps it under a target
// duration, so one long prompt does not stall every decoding stream for a
// whole 512-token chunk. Two fits, both exponentially weighted least
// squares over recent steps, price a step:
//
//   - the decode part, from decode-only steps:
//     fixed + perToken × tokens + perKey × keys
//     (fixed: reading the weights once; perToken: the compute per token;
//     perKey: attention, keys = Σ over the tokens of the positions each
//     attends to);
//   - the prefill chunks on top of it, from the other steps net of their
//     decode part: perToken × tokens + perKey × keys (no intercept), so a
//     chunk deep into a long prompt is priced dearer than one at its start.
//
// Fitting one model to all steps let its intercept drift up while every
// step was mixed (nothing pins the cost of a small step then), which
// raised the auto target, which grew the chunks, which raised the
// intercept further (docs/performance.md "Step latency"). The target is
// Config.MaxStepLatency, or by default autoStepFactor times the modelled
// decode-only step, widened by promptShare.
//
// A server kept busy with prompts runs no decode-only step of its own, so
// every decodeProbeEvery-th step that carries decode tokens is planned
// without prefill (a probe): it costs one decode step of prefill progress
// and keeps the decode fit measured.

const (
	// autoStepFactor: the default target is this many decode-only steps
	// (measured: docs/performance.md "Step latency").
	autoStepFactor = 4
	// stepCostDecay weighs the past: about the last 1/(1-decay) steps count.
	stepCostDecay = 0.97
	// minStepSamples steps of its kind before a fit is trusted (the chunk
	// model: prefill-carrying steps; the decode part: decode-only ones).
	minStepSamples = 8
	// minPrefillChunk keeps long prompts progressing under any target.
	minPrefillChunk = 16
	// coldPrefillDivisor: until the models are fitted, the chunks of a step
	// with decode tokens share at most MaxBatchedTokens/coldPrefillDivisor
	// tokens, and the positions they attend to at most those of as many
	// tokens at about position MaxBatchedTokens (a chunk deep into a long
	// prompt gets fewer); besides protecting the decoders this gives the
	// fit steps of different sizes to learn from. (A quarter of the
	// budget made the cold steps of a server started into a burst of long
	// prompts the slowest decode intervals of a whole benchmark run.)
	coldPrefillDivisor = 8
	// maxPromptShare bounds promptShare.
	maxPromptShare = 2
	// decodeProbeEvery: steps with prefill and decode tokens between two
	// decode-only steps before one is planned (decodeProbeCold until the
	// decode fit has minStepSamples, so the switch from the mean to the
	// fit comes early in a run, not minutes into it).
	decodeProbeEvery = 64
	decodeProbeCold  = 8
	// probeStretch: a step with more decode tokens than this times the
	// most a decode-only step had (stepCost.probed) is probed early. The
	// fit extrapolated from one or two decoders priced fifteen at twice
	// their cost (docs/performance.md "Step latency").
	probeStretch = 2
	// keyUnit scales the key count so the normal equations stay well
	// conditioned (keys run to millions per step, tokens to hundreds).
	keyUnit = 1024
)

// costModel prices work in seconds: fixed + perToken·tokens + perKey·keys.
type costModel struct{ fixed, perToken, perKey float64 }

func (m costModel) price(w scheduler.Work) float64 {
	return m.fixed + m.perToken*float64(w.Tokens) + m.perKey*float64(w.Keys)
}

// chunkTokens is the most tokens of a chunk starting at position start
// whose cost (without the fixed part) fits in sec seconds: the largest n
// with perToken·n + perKey·(n·start + n(n+1)/2) <= sec.
func (m costModel) chunkTokens(start int, sec float64) int {
	if sec <= 0 {
		return 0
	}
	b := m.perToken + m.perKey*(float64(start)+0.5)
	var n float64
	if m.perKey == 0 {
		n = sec / b
	} else { // (perKey/2)·n² + b·n − sec = 0
		n = (math.Sqrt(b*b+2*m.perKey*sec) - b) / m.perKey
	}
	if !(n < math.MaxInt32) {
		return math.MaxInt32
	}
	return int(n)
}

// costFit accumulates decayed least-squares sums for y ≈ Σ b_i·x_i over
// the features x = (1, tokens, keys/keyUnit), or without the 1 when
// intercept is false.
type costFit struct {
	intercept bool
	samples   int
	s         [3][3]float64 // Σ w·x_i·x_j
	sy        [3]float64    // Σ w·x_i·y
}

func (f *costFit) features(w scheduler.Work) [3]float64 {
	if f.intercept {
		return [3]float64{1, float64(w.Tokens), float64(w.Keys) / keyUnit}
	}
	return [3]float64{float64(w.Tokens), float64(w.Keys) / keyUnit, 0}
}

func (f *costFit) observe(w scheduler.Work, y float64) {
	x := f.features(w)
	for i := range x {
		for j := range x {
			f.s[i][j] = f.s[i][j]*stepCostDecay + x[i]*x[j]
		}
		f.sy[i] = f.sy[i]*stepCostDecay + x[i]*y
	}
	f.samples++
}

// fit solves for all terms, then without the keys term when attention gets
// no positive cost or the fixed cost comes out negative (steps that do not
// separate them, or noise); ok is false when neither gives a positive
// per-token cost and a fixed cost of at least zero.
func (f *costFit) fit() (costModel, bool) {
	full, i := 2, 0 // features in use; index of the per-token term
	if f.intercept {
		full, i = 3, 1
	}
	for _, n := range []int{full, full - 1} {
		b, ok := solveN(f.s, f.sy, n)
		if !ok {
			continue
		}
		m := costModel{perToken: b[i]}
		if f.intercept {
			if b[0] < 0 { // no step costs less than nothing: terms traded off within the noise
				continue
			}
			m.fixed = b[0]
		}
		if n == full {
			m.perKey = b[i+1] / keyUnit
		}
		if m.perToken > 0 && (n < full || m.perKey > 0) {
			return m, true
		}
	}
	return costModel{}, false
}

// solveN solves the leading n×n system a·b = y by Gaussian elimination
// with partial pivoting; ok is false when it is (nearly) singular.
func solveN(a [3][3]float64, y [3]float64, n int) (b [3]float64, ok bool) {
	scale := 0.0
	for i := range n {
		scale = max(scale, math.Abs(a[i][i]))
	}
	for col := range n {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
				p = r
			}
		}
		if !(math.Abs(a[p][col]) > 1e-9*scale) {
			return b, false
		}
		a[col], a[p] = a[p], a[col]
		y[col], y[p] = y[p], y[col]
		for r := col + 1; r < n; r++ {
			f := a[r][col] / a[col][col]
			for k := col; k < n; k++ {
				a[r][k] -= f * a[col][k]
			}
			y[r] -= f * y[col]
		}
	}
	for r := n - 1; r >= 0; r-- {
		v := y[r]
		for k := r + 1; k < n; k++ {
			v -= a[r][k] * b[k]
		}
		b[r] = v / a[r][r]
		if math.IsNaN(b[r]) || math.IsInf(b[r], 0) {
			return b, false
		}
	}
	return b, true
}

// stepCost is the step-duration model. Owned by the loop goroutine.
type stepCost struct {
	target time.Duration // Config.MaxStepLatency: > 0 fixed, 0 auto, < 0 off
	budget int           // the step token budget (Config.MaxBatchedTokens)
	decode costFit       // decode-only steps without drafts (intercept)
	// spec: decode-only steps that verify drafts (intercept). Kept apart
	// because several tokens of one sequence may run other kernels than
	// one token each (matrix tiles instead of a matrix-vector product,
	// a logits row per token), so a plain step is not that line at one
	// token (specpolicy.go).
	spec   costFit
	chunks costFit // prefill-carrying steps net of their decode part
	// proposals: seconds of the draft model's run in a decode-only step
	// with drafts, decayed (the step-latency target counts it).
	proposals float64
	// all is one fit over every step: it prices the decode part until a
	// decode-only step was seen (a server busy with prompts from the
	// start runs none until the first probe).
	all costFit
	// mixed counts the steps with decode and prefill tokens since the last
	// decode-only one (decodeProbeEvery).
	mixed int
	// probed is the most decode tokens of a decode-only step without
	// drafts, decayed like the fit's samples: a step with more than
	// probeStretch times as many would be priced beyond what the decode
	// fit has seen, so it is probed after decodeProbeCold mixed steps.
	probed float64
	// planned is the target the step being planned was capped by, for the
	// step's debug line (0: none; the loop clears it before each plan).
	planned time.Duration
}

func newStepCost(target time.Duration, budget int) *stepCost {
	return &stepCost{target: target, budget: budget,
		decode: costFit{intercept: true}, spec: costFit{intercept: true}, all: costFit{intercept: true}}
}

// observe records one executed step: the work of its decode tokens (items
// of one token, plus drafts), of its other tokens, whether it verified
// drafts, its duration d and, of that, the draft model's run. The decode
// fits price the target's work alone; a prompt chunk's price keeps the
// draft model's copy of it (the draft K/V mirrors every prompt).
func (c *stepCost) observe(decode, prefill scheduler.Work, drafted bool, d, draft time.Duration) {
	if decode.Tokens+prefill.Tokens <= 0 || d <= 0 {
		return
	}
	c.all.observe(decode.Add(prefill), d.Seconds())
	switch {
	case decode.Tokens > 0 && prefill.Tokens > 0:
		c.mixed++
	case decode.Tokens > 0:
		c.mixed = 0
		if !drafted {
			c.probed = max(float64(decode.Tokens), stepCostDecay*c.probed)
		}
	}
	if prefill.Tokens == 0 {
		if drafted {
			c.spec.observe(decode, (d - draft).Seconds())
			c.proposals = draftTimeDecay*c.proposals + (1-draftTimeDecay)*draft.Seconds()
		} else {
			c.decode.observe(decode, (d - draft).Seconds())
		}
		return
	}
	if base, ok := c.decodePrice(decode, drafted); ok {
		c.chunks.observe(prefill, d.Seconds()-base-c.proposalPrice(drafted))
	}
}

// proposalPrice is the draft model's run in a step that verifies drafts
// (decayed over the decode-only steps that did), 0 in one that does not.
func (c *stepCost) proposalPrice(drafted bool) float64 {
	if !drafted {
		return 0
	}
	return c.proposals
}

// decodePrice is the modelled duration of a step carrying only decode's
// tokens (decode may be empty: the fixed cost of any step), with drafts
// or without. Until minStepSamples decode-only steps were seen, or while
// they do not separate the fit's terms, it is the mean decode-only step;
// before any decode-only step, the fit over all steps.
// A step with drafts is priced by the spec fit once it separates its
// terms.
func (c *stepCost) decodePrice(decode scheduler.Work, drafted bool) (float64, bool) {
	if drafted && c.spec.samples >= minStepSamples {
		if m, ok := c.spec.fit(); ok {
			return m.price(decode), true
		}
	}
	f := &c.decode
	if f.samples == 0 {
		if c.all.samples < minStepSamples {
			return 0, false
		}
		m, ok := c.all.fit()
		return m.price(decode), ok
	}
	if f.samples >= minStepSamples {
		if m, ok := f.fit(); ok {
			return m.price(decode), true
		}
	}
	return f.sy[0] / f.s[0][0], true
}

// draftPricing is what the adaptive draft length needs (specpolicy.go):
// plain, the modelled step of base (the step's decode tokens, no drafts),
// and spec, a model for that step with drafts added. spec is the spec fit
// when it separates its terms; else, once drafted steps were seen, the
// line from plain through their mean (tokens, duration). plainSeen counts
// the decode-only steps without drafts.
func (c *stepCost) draftPricing(base scheduler.Work) (plain float64, spec costModel, ok bool, plainSeen int) {
	plainSeen = c.decode.samples
	if plainSeen == 0 {
		return 0, costModel{}, false, 0
	}
	plain, ok = c.decodePrice(base, false)
	if !ok || plain <= 0 || c.spec.samples == 0 {
		return plain, costModel{}, false, plainSeen
	}
	if c.spec.samples >= minStepSamples {
		if m, fitted := c.spec.fit(); fitted {
			return plain, m, true, plainSeen
		}
	}
	f := &c.spec
	tokens, secs := f.s[0][1]/f.s[0][0], f.sy[0]/f.s[0][0]
	if tokens <= float64(base.Tokens) {
		return plain, costModel{}, false, plainSeen
	}
	slope := max((secs-plain)/(tokens-float64(base.Tokens)), 0)
	return plain, costModel{fixed: plain - slope*float64(base.Tokens), perToken: slope}, true, plainSeen
}

// promptShare scales the auto target by the prompts waiting per decoding
// sequence (1 to maxPromptShare): a step shares its time between the users
// waiting for a first token and those streaming, so two streams do not
// hold fourteen queued prompts to chunks of a few dozen tokens. A bound of
// 4 measured no better on TTFT than 2 and brought ITL p99/p50 at
// concurrency 4 to 3 (docs/performance.md "Step latency").
func promptShare(l scheduler.StepLoad) float64 {
	if l.Decoding <= 0 {
		return 1
	}
	return min(max(float64(l.Prompts)/float64(l.Decoding), 1), maxPromptShare)
}

// prefillLimit is the scheduler's Config.PrefillLimit: given the load of a
// step whose decode tokens are planned it returns the function that sizes
// the step's further chunks (nil: no cap). A probe step takes none.
// Until both fits are ready the chunks share an eighth of the budget;
// after, they share the time left under the target, each priced by its
// tokens and the positions it attends to. The first chunk gets at least
// minPrefillChunk tokens.
func (c *stepCost) prefillLimit(l scheduler.StepLoad) func(start, n int) int {
	if c.target < 0 {
		return nil
	}
	drafted := l.Decode.Tokens > l.Decoding
	if !drafted && c.probeDue(l.Decode) {
		return func(int, int) int { return 0 }
	}
	decodeStep, ok := c.decodePrice(l.Decode, drafted)
	decodeStep += c.proposalPrice(drafted)
	var m costModel
	if ok && c.chunks.samples >= minStepSamples {
		m, ok = c.chunks.fit()
	} else {
		ok = false
	}
	if !ok {
		left := max(c.budget/coldPrefillDivisor, minPrefillChunk)
		keys, first := left*c.budget, true // as many tokens at about position budget
		return func(start, n int) int {
			want := min(n, left)
			for n = want; n > 0 && scheduler.ChunkWork(start, n).Keys > keys; {
				n = n * 3 / 4
			}
			if first {
				n, first = max(n, min(minPrefillChunk, want)), false
			}
			left -= n
			keys -= scheduler.ChunkWork(start, n).Keys
			return n
		}
	}
	target := c.target.Seconds()
	if c.target == 0 {
		target = autoStepFactor * promptShare(l) * decodeStep
	}
	c.planned = time.Duration(target * float64(time.Second))
	left, first := target-decodeStep, true
	return func(start, n int) int {
		k := m.chunkTokens(start, left)
		if first {
			k, first = max(k, minPrefillChunk), false
		}
		k = min(k, n)
		left -= m.price(scheduler.ChunkWork(start, k))
		return max(k, 0)
	}
}

// probeDue reports that the next step, with decode tokens decode, should
// take no prefill, so the decode fit sees a decode-only step
// (decodeProbeEvery, probeStretch).
func (c *stepCost) probeDue(decode scheduler.Work) bool {
	every := decodeProbeEvery
	if c.decode.samples < minStepSamples || float64(decode.Tokens) > probeStretch*c.probed {
		every = decodeProbeCold
	}
	return c.mixed >= every
}
