package engine

import (
	"math"
	"sync"
	"testing"
	"time"

	"oengine/scheduler"
)

func TestAcceptanceCounts(t *testing.T) {
	var a acceptance
	a.add(2, 4, 1) // two accepted, the third rejected: three tried
	a.add(4, 4, 1) // all four accepted
	if a.accepted != 6 || a.tried != 7 {
		t.Fatalf("accepted %v tried %v, want 6 and 7", a.accepted, a.tried)
	}
	if r := a.rate(0.5, 0); r != 6.0/7 {
		t.Fatalf("rate %v", r)
	}
	if r := (acceptance{}).rate(0.3, 2); r != 0.3 {
		t.Fatalf("no evidence: rate %v, want the prior", r)
	}
	a.add(0, 4, 0.5)
	if a.accepted != 3 || a.tried != 4.5 {
		t.Fatalf("decayed: accepted %v tried %v", a.accepted, a.tried)
	}
}

// TestChooseDraftLen: the draft length follows acceptance and prices.
// The prices are those measured on the 2-core box for the synthetic
// tinyllama-1.1b F16 target with its Q4_0 draft (docs/performance.md
// "Speculative decoding"): a decode step 87 ms, each verified draft 19 ms
// more, a draft proposal 24 ms.
func TestChooseDraftLen(t *testing.T) {
	one := scheduler.ChunkWork(100, 1)
	f16 := specPrice{priced: true, decoders: 1, base: one, step: 0.087, spec: costModel{fixed: 0.068, perToken: 0.019}, draft: 0.024}
	// The same with a free drafter (n-gram) and memory-bound verification
	// (a GPU: K+1 tokens cost about one).
	free := specPrice{priced: true, decoders: 1, base: one, step: 0.010, spec: costModel{fixed: 0.0099, perToken: 0.0001}}
	// Sixteen decoders in a compute-bound step: a draft costs what a
	// token of the batch costs.
	batch := specPrice{priced: true, decoders: 16, base: scheduler.Work{Tokens: 16}, step: 0.4,
		spec: costModel{fixed: 0.08, perToken: 0.02}, draft: 0.024 / 16}
	// The tiny reference model: a plain step (0.7 ms) is far below the
	// line of steps with drafts at one token (1.7 ms + 0.4 ms a token),
	// as measured on tiny-llama-f16 with its q4_0 draft.
	tiny := specPrice{priced: true, decoders: 1, base: one, step: 0.0007, spec: costModel{fixed: 0.0017, perToken: 0.0004}, draft: 0.0007}
	for _, c := range []struct {
		name  string
		alpha float64
		kmax  int
		p     specPrice
		want  int
	}{
		{"unpriced: drafts reached with chance >= 0.1", 0.5, 8, specPrice{}, 3},
		{"unpriced: capped by kmax", 0.95, 4, specPrice{}, 4},
		{"unpriced: hopeless drafts", 0.05, 4, specPrice{}, 0},
		{"f16 target, measured acceptance 0.37: not worth it", 0.37, 4, f16, 0},
		{"f16 target, acceptance 0.9: a 4th draft costs more than it gains", 0.9, 4, f16, 3},
		{"free drafter, cheap verification, acceptance 0.37", 0.37, 4, free, 2},
		{"free drafter, cheap verification, acceptance 0.9", 0.9, 8, free, 8},
		{"compute-bound batch, acceptance 0.6", 0.6, 4, batch, 0},
		{"compute-bound batch, acceptance 0.95", 0.95, 4, batch, 2},
		{"plain step far cheaper than any drafted one, acceptance 0.9", 0.9, 4, tiny, 0},
	} {
		if got := chooseDraftLen(c.alpha, c.kmax, 100, c.p); got != c.want {
			t.Errorf("%s: K %d, want %d", c.name, got, c.want)
		}
	}
	// A lone stream with the batch's per-token price drafts where the
	// batch does not: its step is dear, a draft relatively cheap.
	lone := batch
	lone.decoders, lone.base, lone.step, lone.draft = 1, one, 0.1, 0.024
	if got := chooseDraftLen(0.6, 4, 100, lone); got == 0 {
		t.Errorf("lone stream, acceptance 0.6: K 0")
	}
}

// TestDraftPricing: a plain step is priced from plain steps, a step with
// drafts from the steps with drafts (their own fit once they separate
// its terms, else the line from the plain step through their mean).
func TestDraftPricing(t *testing.T) {
	c := newStepCost(0, 512)
	one := scheduler.ChunkWork(10, 1)
	if _, _, ok, seen := c.draftPricing(one); ok || seen != 0 {
		t.Fatalf("nothing measured: ok %v, plain steps %d", ok, seen)
	}
	for range 5 {
		c.observe(one, scheduler.Work{}, false, 700*time.Microsecond, 0)
	}
	five := scheduler.ChunkWork(10, 5)
	c.observe(five, scheduler.Work{}, true, 3300*time.Microsecond, 0)
	plain, m, ok, seen := c.draftPricing(one)
	if !ok || seen != 5 || math.Abs(plain-0.0007) > 1e-9 {
		t.Fatalf("plain %v ok %v seen %d", plain, ok, seen)
	}
	// One drafted size: the line from the plain step through it.
	if got := m.price(five); math.Abs(got-0.0033) > 1e-9 {
		t.Fatalf("line: 5 tokens priced %v, want 0.0033", got)
	}
	// Drafted steps of several sizes: their own fit, which does not pass
	// through the plain step.
	for i := range 3 * minStepSamples {
		k := 1 + i%4
		c.observe(scheduler.ChunkWork(10, 1+k), scheduler.Work{}, true, time.Duration(1700+400*(1+k))*time.Microsecond, 0)
	}
	plain, m, ok, _ = c.draftPricing(one)
	if !ok || math.Abs(plain-0.0007) > 1e-9 {
		t.Fatalf("plain %v ok %v", plain, ok)
	}
	if got := m.price(scheduler.ChunkWork(10, 3)); math.Abs(got-0.0029) > 0.0001 {
		t.Fatalf("fit: 3 tokens priced %v, want 0.0029", got)
	}
}

// TestSpecAdaptivePriced: with a draft model that is always right, the
// adaptive draft length drafts the most tokens when verifying them is
// cheap against a step, and stops speculating (backs off) when every
// verified token costs more than a whole step would; outputs are plain
// decoding's either way. The fake models sleep a set time per forward,
// so the engine's own measurements price the drafts.
func TestSpecAdaptivePriced(t *testing.T) {
	req := Request{Prompt: "some prompt words", MaxTokens: 120, Sampling: greedy(), Stop: StopParams{IgnoreEOS: true}}
	want := run(t, newFakeEngine(t, Config{}, &fakeModel{vocab: 64, ctx: 512}), req)
	perStep := func(fixed, perToken time.Duration) func(int) time.Duration {
		return func(n int) time.Duration { return fixed + time.Duration(n)*perToken }
	}
	for _, c := range []struct {
		name          string
		target, draft func(int) time.Duration
		cheap         bool
	}{
		{"cheap verification", perStep(8*time.Millisecond, 200*time.Microsecond), perStep(200*time.Microsecond, 0), true},
		// Each verified token costs twice a whole plain step (20 ms
		// against 10) and each proposal 4 ms: four right drafts buy 5
		// tokens for 116 ms against 50 ms plain. The margin is wide so
		// that a slow plain step or two on a loaded 2-core box under -race
		// (the plain price is their mean until there are more) do not
		// price drafting ahead. (With 10 ms a verified token and 1 ms
		// proposals it was 8%, and CI crossed it.)
		{"dear verification", func(n int) time.Duration {
			if n == 1 {
				return 10 * time.Millisecond
			}
			return time.Duration(n) * 20 * time.Millisecond
		}, perStep(4*time.Millisecond, 0), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var drafts []int // per step
			cfg := Config{Speculation: Speculation{Draft: &fakeModel{vocab: 64, ctx: 512, cost: c.draft}, Tokens: 4, Adaptive: true}}
			cfg.Hooks.OnStep = func(s StepStats) {
				if s.DecodeTokens > 0 {
					mu.Lock()
					drafts = append(drafts, s.SpecDrafted)
					mu.Unlock()
				}
			}
			e := newFakeEngine(t, cfg, &fakeModel{vocab: 64, ctx: 512, cost: c.target})
			sameResult(t, 0, run(t, e, req), want)
			mu.Lock()
			defer mu.Unlock()
			// The last half of the steps: the fits have their samples.
			late := drafts[len(drafts)/2:]
			full, none := 0, 0
			for _, d := range late {
				switch d {
				case 4:
					full++
				case 0:
					none++
				}
			}
			t.Logf("drafts per step %v; last %d: %d with 4 drafts, %d with none", drafts, len(late), full, none)
			if c.cheap && full < len(late)*2/3 {
				t.Fatalf("cheap verification: %d of the last %d steps drafted 4 tokens", full, len(late))
			}
			if !c.cheap && none < len(late)*3/4 {
				t.Fatalf("dear verification: %d of the last %d steps drafted nothing", none, len(late))
			}
		})
	}
}
