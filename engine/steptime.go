package engine

import (
	"math"
	"time"

	"oengine/scheduler"
)

// Step latency budget (docs/design.md §10): a step that carries decode
// tokens takes prefill tokens only up to what keeps it under a target
// duration, so one long prompt does not stall every decoding stream for a
// whole 512-token chunk. The cost of a step is modelled as
//
//	duration ≈ fixed + perToken × tokens + perKey × keys
//
// (fixed: reading the weights once; perToken: the compute per token;
// perKey: attention, keys = Σ over the step's tokens of the positions each
// attends to, so a chunk deep into a long prompt is priced as dearer than
// one at its start), fitted by exponentially weighted least squares over
// recent steps. The target is Config.MaxStepLatency, or by default
// autoStepFactor times the modelled duration of the decode-only step.

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
	// keyUnit scales the key count so the normal equations stay well
	// conditioned (keys run to millions per step, tokens to hundreds).
	keyUnit = 1024
)

// stepCost is the fitted step-duration model. Owned by the loop goroutine.
type stepCost struct {
	target  time.Duration // Config.MaxStepLatency: > 0 fixed, 0 auto, < 0 off
	budget  int           // the step token budget (Config.MaxBatchedTokens)
	samples int
	// Decayed sums over steps of weight w, the features x = (1, tokens,
	// keys/keyUnit) and the duration y in seconds: s[i][j] = Σ w·x_i·x_j,
	// sy[i] = Σ w·x_i·y.
	s  [3][3]float64
	sy [3]float64
}

// costModel is one fit: seconds = fixed + perToken·tokens + perKey·keys.
type costModel struct{ fixed, perToken, perKey float64 }

func (m costModel) price(w scheduler.Work) float64 {
	return m.fixed + m.perToken*float64(w.Tokens) + m.perKey*float64(w.Keys)
}

// observe records one executed step.
func (c *stepCost) observe(w scheduler.Work, d time.Duration) {
	if w.Tokens <= 0 || d <= 0 {
		return
	}
	x := [3]float64{1, float64(w.Tokens), float64(w.Keys) / keyUnit}
	y := d.Seconds()
	for i := range x {
		for j := range x {
			c.s[i][j] = c.s[i][j]*stepCostDecay + x[i]*x[j]
		}
		c.sy[i] = c.sy[i]*stepCostDecay + x[i]*y
	}
	c.samples++
}

// fit returns the model; ok is false until enough steps of different sizes
// were seen. When the three-term fit gives attention no positive cost
// (steps all at about the same depth, or noise), the two-term fit without
// it is used.
func (c *stepCost) fit() (m costModel, ok bool) {
	if c.samples < minStepSamples {
		return m, false
	}
	sw := c.s[0][0]
	if vx := c.s[1][1]/sw - (c.s[0][1]/sw)*(c.s[0][1]/sw); vx < 1 {
		return m, false // every step had about the same size: no slope to read
	}
	if b, ok := solve3(c.s, c.sy); ok && b[1] > 0 && b[2] > 0 {
		return costModel{max(b[0], 0), b[1], b[2] / keyUnit}, true
	}
	// Two terms: y = fixed + perToken·tokens.
	mx, my := c.s[0][1]/sw, c.sy[0]/sw
	per := (c.sy[1]/sw - mx*my) / (c.s[1][1]/sw - mx*mx)
	if !(per > 0) || math.IsInf(per, 0) {
		return m, false
	}
	return costModel{fixed: max(my-per*mx, 0), perToken: per}, true
}

// solve3 solves a·b = y by Gaussian elimination with partial pivoting; ok
// is false when a is (nearly) singular.
func solve3(a [3][3]float64, y [3]float64) (b [3]float64, ok bool) {
	scale := max(math.Abs(a[0][0]), math.Abs(a[1][1]), math.Abs(a[2][2]))
	for col := 0; col < 3; col++ {
		p := col
		for r := col + 1; r < 3; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
				p = r
			}
		}
		if !(math.Abs(a[p][col]) > 1e-12*scale) {
			return b, false
		}
		a[col], a[p] = a[p], a[col]
		y[col], y[p] = y[p], y[col]
		for r := col + 1; r < 3; r++ {
			f := a[r][col] / a[col][col]
			for k := col; k < 3; k++ {
				a[r][k] -= f * a[col][k]
			}
			y[r] -= f * y[col]
		}
	}
	for r := 2; r >= 0; r-- {
		v := y[r]
		for k := r + 1; k < 3; k++ {
			v -= a[r][k] * b[k]
		}
		b[r] = v / a[r][r]
	}
	for _, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return b, false
		}
	}
	return b, true
}

// prefillLimit is the scheduler's Config.PrefillLimit: given the work of a
// step's decode tokens it returns the function that sizes the step's
// further chunks (nil: no cap). Before the fit the chunks share a quarter
// of the budget; after it, they share the time left under the target,
// each priced by its tokens and the positions it attends to. The first
// chunk gets at least minPrefillChunk tokens.
func (c *stepCost) prefillLimit(decode scheduler.Work) func(start, n int) int {
	if c.target < 0 {
		return nil
	}
	m, ok := c.fit()
	if !ok {
		left := max(c.budget/coldPrefillDivisor, minPrefillChunk)
		return func(_, n int) int {
			n = min(n, left)
			left -= n
			return n
		}
	}
	decodeStep := m.price(decode)
	target := c.target.Seconds()
	if c.target == 0 {
		target = autoStepFactor * decodeStep
	}
	left, first := target-decodeStep, true
	return func(start, n int) int {
		k := m.chunkTokens(start, left)
		if first {
			k, first = max(k, minPrefillChunk), false
		}
		k = min(k, n)
		left -= m.price(scheduler.ChunkWork(start, k)) - m.fixed
		return max(k, 0)
	}
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
	if n >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int(n)
}
