package engine

import (
	"math"
	"time"
)

// Step latency budget (docs/design.md §10): a step that carries decode
// tokens takes prefill tokens only up to what keeps it under a target
// duration, so one long prompt does not stall every decoding stream for a
// whole 512-token chunk. The cost of a step is modelled as
//
//	duration ≈ fixed + perToken × tokens
//
// (fixed: reading the weights once; perToken: the compute per token),
// fitted by exponentially weighted least squares over recent steps. The
// target is Config.MaxStepLatency, or by default autoStepFactor times the
// modelled duration of the decode-only step.

const (
	// autoStepFactor: the default target is this many decode-only steps
	// (measured: docs/performance.md "Step latency").
	autoStepFactor = 4
	// stepCostDecay weighs the past: about the last 1/(1-decay) steps count.
	stepCostDecay = 0.97
	// minStepSamples before the model is trusted (no cap until then).
	minStepSamples = 8
	// minPrefillChunk keeps long prompts progressing under any target.
	minPrefillChunk = 16
	// coldPrefillDivisor: until the model is fitted, a step with decode
	// tokens takes at most MaxBatchedTokens/coldPrefillDivisor prefill
	// tokens; besides protecting the decoders this gives the fit steps of
	// different sizes to learn from (a burst of long prompts would
	// otherwise run only full-budget steps).
	coldPrefillDivisor = 4
)

// stepCost is the fitted step-duration model. Owned by the loop goroutine.
type stepCost struct {
	target  time.Duration // Config.MaxStepLatency: > 0 fixed, 0 auto, < 0 off
	budget  int           // the step token budget (Config.MaxBatchedTokens)
	samples int
	// Decayed sums of weight, x = tokens, y = seconds, x², x·y.
	sw, sx, sy, sxx, sxy float64
}

// observe records one executed step.
func (c *stepCost) observe(tokens int, d time.Duration) {
	if tokens <= 0 || d <= 0 {
		return
	}
	x, y := float64(tokens), d.Seconds()
	c.sw = c.sw*stepCostDecay + 1
	c.sx = c.sx*stepCostDecay + x
	c.sy = c.sy*stepCostDecay + y
	c.sxx = c.sxx*stepCostDecay + x*x
	c.sxy = c.sxy*stepCostDecay + x*y
	c.samples++
}

// fit returns the model's fixed and per-token seconds; ok is false until
// enough steps of different sizes were seen.
func (c *stepCost) fit() (fixed, perToken float64, ok bool) {
	if c.samples < minStepSamples {
		return 0, 0, false
	}
	mx, my := c.sx/c.sw, c.sy/c.sw
	vx := c.sxx/c.sw - mx*mx
	if vx < 1 { // every step had about the same size: no slope to read
		return 0, 0, false
	}
	perToken = (c.sxy/c.sw - mx*my) / vx
	if !(perToken > 0) || math.IsInf(perToken, 0) {
		return 0, 0, false
	}
	return max(my-perToken*mx, 0), perToken, true
}

// prefillLimit is the scheduler's Config.PrefillLimit: the prefill tokens a
// step with decode tokens may take (0: no cap). Before the fit it is a
// quarter of the budget.
func (c *stepCost) prefillLimit(decode int) int {
	if c.target < 0 {
		return 0
	}
	fixed, per, ok := c.fit()
	if !ok {
		return max(c.budget/coldPrefillDivisor, minPrefillChunk)
	}
	decodeStep := fixed + per*float64(decode)
	target := c.target.Seconds()
	if c.target == 0 {
		target = autoStepFactor * decodeStep
	}
	n := (target - decodeStep) / per
	if n >= math.MaxInt32 {
		return 0
	}
	return max(int(n), minPrefillChunk)
}
