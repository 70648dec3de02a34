package engine

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestStepCost: the fitted model recovers a step cost of 50 ms + 2 ms per
// token from noisy steps, and the prefill cap follows the target.
func TestStepCost(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	feed := func(c *stepCost, n int) {
		for range n {
			tokens := 1 + r.IntN(512)
			d := 0.050 + 0.002*float64(tokens)
			d *= 1 + 0.05*(r.Float64()-0.5) // ±2.5% noise
			c.observe(tokens, time.Duration(d*float64(time.Second)))
		}
	}
	c := &stepCost{budget: 512}
	feed(c, minStepSamples-1)
	if n := c.prefillLimit(4); n != 512/coldPrefillDivisor {
		t.Fatalf("cap %d before enough steps were seen, want the cold cap %d", n, 512/coldPrefillDivisor)
	}
	feed(c, 200)
	fixed, per, ok := c.fit()
	if !ok || math.Abs(fixed-0.050) > 0.005 || math.Abs(per-0.002) > 0.0001 {
		t.Fatalf("fit %v s + %v s/token (ok %v), want 0.050 + 0.002", fixed, per, ok)
	}
	// Auto: 4 decode steps of 4 tokens (58 ms) = 232 ms, leaving 174 ms
	// or about 87 prefill tokens.
	if n := c.prefillLimit(4); n < 82 || n > 92 {
		t.Fatalf("auto cap %d, want about 87", n)
	}
	c.target = 100 * time.Millisecond // (100 - 58) / 2 = 21
	if n := c.prefillLimit(4); n < 19 || n > 23 {
		t.Fatalf("100 ms cap %d, want about 21", n)
	}
	c.target = 10 * time.Millisecond // below a decode step: still progresses
	if n := c.prefillLimit(4); n != minPrefillChunk {
		t.Fatalf("tight cap %d, want the minimum chunk %d", n, minPrefillChunk)
	}
	c.target = -1
	if n := c.prefillLimit(4); n != 0 {
		t.Fatalf("cap %d with the bound off", n)
	}

	same := &stepCost{budget: 512}
	for range 50 {
		same.observe(16, 80*time.Millisecond)
	}
	if n := same.prefillLimit(16); n != 512/coldPrefillDivisor {
		t.Fatalf("cap %d from steps that were all the same size (no slope), want the cold cap", n)
	}
}
