package engine

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"oengine/scheduler"
)

// stepSecs is the true cost the tests feed: 20 ms + 1 ms per token + 0.2 µs
// per attended key position.
func stepSecs(w scheduler.Work) float64 {
	return 0.020 + 0.001*float64(w.Tokens) + 2e-7*float64(w.Keys)
}

// feedSteps observes n steps like a server's: d decoding sequences at
// contexts up to 2048 plus, in most steps, one prefill chunk of 1-512
// tokens at a random depth, with ±2.5% noise.
func feedSteps(c *stepCost, r *rand.Rand, n int) {
	for range n {
		var w scheduler.Work
		for range 1 + r.IntN(8) {
			w = w.Add(scheduler.ChunkWork(r.IntN(2048), 1))
		}
		if r.IntN(4) > 0 {
			w = w.Add(scheduler.ChunkWork(r.IntN(2048), 1+r.IntN(512)))
		}
		d := stepSecs(w) * (1 + 0.05*(r.Float64()-0.5))
		c.observe(w, time.Duration(d*float64(time.Second)))
	}
}

// take runs a PrefillLimit function over chunks that each want n tokens
// at the given start positions and returns what each got.
func take(f func(start, n int) int, n int, starts ...int) []int {
	got := make([]int, len(starts))
	for i, s := range starts {
		got[i] = f(s, n)
	}
	return got
}

// TestStepCost: the fitted model recovers the step cost, attention
// included, from noisy steps; a chunk deep into a prompt gets fewer
// tokens than one at its start, the chunks of a step share one allowance,
// and the cap follows the target.
func TestStepCost(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	c := &stepCost{budget: 512}
	feedSteps(c, r, minStepSamples-1)
	cold := c.prefillLimit(scheduler.ChunkWork(1000, 4))
	if got := take(cold, 100, 0, 0, 0); got[0] != 100 || got[1] != 512/coldPrefillDivisor-100 || got[2] != 0 {
		t.Fatalf("chunks %v before enough steps were seen, want the cold cap %d shared", got, 512/coldPrefillDivisor)
	}
	feedSteps(c, r, 300)
	m, ok := c.fit()
	if !ok || math.Abs(m.fixed-0.020) > 0.002 || math.Abs(m.perToken-0.001) > 0.00005 || math.Abs(m.perKey-2e-7) > 1e-8 {
		t.Fatalf("fit %+v (ok %v), want 0.020 s + 0.001 s/token + 2e-7 s/key", m, ok)
	}

	// Four decoding sequences at position 1000: 24 ms + 0.8 ms = 24.8 ms;
	// auto allows 3 x 24.8 = 74.4 ms of prefill.
	decode := scheduler.Work{}
	for range 4 {
		decode = decode.Add(scheduler.ChunkWork(1000, 1))
	}
	want := func(start int, sec float64) int { // the largest n whose true cost fits
		n := 0
		for stepSecs(scheduler.ChunkWork(start, n+1))-0.020 <= sec {
			n++
		}
		return n
	}
	shallow := take(c.prefillLimit(decode), 512, 0)[0]
	deep := take(c.prefillLimit(decode), 512, 1800)[0]
	if w := want(0, 3*stepSecs(decode)); math.Abs(float64(shallow-w)) > 0.05*float64(w) {
		t.Fatalf("auto chunk at position 0: %d tokens, want about %d", shallow, w)
	}
	if w := want(1800, 3*stepSecs(decode)); math.Abs(float64(deep-w)) > 0.05*float64(w) || deep >= shallow {
		t.Fatalf("auto chunk at position 1800: %d tokens, want about %d (< %d at position 0)", deep, w, shallow)
	}
	// Two chunks share the allowance: the second gets what the first left.
	if got := take(c.prefillLimit(decode), 30, 0, 0, 0); got[0] != 30 || got[1] != 30 || got[2] >= 30 || got[2] < shallow-60-3 {
		t.Fatalf("shared chunks %v, want 30, 30 and the rest of about %d", got, shallow-60)
	}

	c.target = 50 * time.Millisecond // 25.2 ms of prefill
	if n := take(c.prefillLimit(decode), 512, 0)[0]; math.Abs(float64(n-want(0, 0.050-stepSecs(decode)))) > 2 {
		t.Fatalf("50 ms chunk %d, want about %d", n, want(0, 0.050-stepSecs(decode)))
	}
	c.target = 10 * time.Millisecond // below a decode step: still progresses, once
	if got := take(c.prefillLimit(decode), 512, 0, 0); got[0] != minPrefillChunk || got[1] != 0 {
		t.Fatalf("tight chunks %v, want the minimum chunk %d then none", got, minPrefillChunk)
	}
	c.target = -1
	if f := c.prefillLimit(decode); f != nil {
		t.Fatal("a cap with the bound off")
	}

	same := &stepCost{budget: 512}
	for range 50 {
		same.observe(scheduler.ChunkWork(100, 16), 80*time.Millisecond)
	}
	if got := take(same.prefillLimit(decode), 512, 0); got[0] != 512/coldPrefillDivisor {
		t.Fatalf("chunk %v from steps that were all the same size (no slope), want the cold cap", got)
	}
}

// TestStepCostWithoutDepth: steps that differ in size but not in depth
// leave attention unpriced; the two-term fit still sizes chunks.
func TestStepCostWithoutDepth(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	c := &stepCost{budget: 512}
	for range 200 {
		n := 1 + r.IntN(512)
		w := scheduler.Work{Tokens: n, Keys: n} // every token at position 0
		d := (0.050 + 0.002*float64(n)) * (1 + 0.05*(r.Float64()-0.5))
		c.observe(w, time.Duration(d*float64(time.Second)))
	}
	m, ok := c.fit()
	if !ok || math.Abs(m.fixed-0.050) > 0.005 || math.Abs(m.perToken-0.002) > 0.0001 || m.perKey != 0 {
		t.Fatalf("fit %+v (ok %v), want 0.050 s + 0.002 s/token", m, ok)
	}
	// Auto: 4 decode steps of 4 tokens (58 ms) leave 174 ms: about 87 tokens.
	if n := take(c.prefillLimit(scheduler.Work{Tokens: 4, Keys: 4}), 512, 0)[0]; n < 82 || n > 92 {
		t.Fatalf("auto chunk %d, want about 87", n)
	}
}
