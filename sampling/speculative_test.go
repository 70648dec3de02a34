package sampling

import (
	"math"
	"math/rand/v2"
	"testing"
)

// chiSquareCritical approximates the 0.999 quantile of the chi-square law
// with df degrees of freedom (Wilson-Hilferty).
func chiSquareCritical(df int) float64 {
	d := float64(df)
	x := 1 - 2/(9*d) + 3.09*math.Sqrt(2/(9*d))
	return d * x * x * x
}

// chiSquare compares observed counts with the probabilities want (over the
// same index space) and fails when the statistic exceeds the 0.999
// quantile. Cells with zero probability must have zero counts.
func chiSquare(t *testing.T, counts []int, want []float64, n int) {
	t.Helper()
	var stat float64
	df := -1
	for i, p := range want {
		if p == 0 {
			if counts[i] != 0 {
				t.Fatalf("token %d drawn %d times, probability 0", i, counts[i])
			}
			continue
		}
		df++
		e := p * float64(n)
		d := float64(counts[i]) - e
		stat += d * d / e
	}
	if df < 1 {
		return
	}
	if crit := chiSquareCritical(df); stat > crit {
		t.Fatalf("chi-square %.1f > %.1f (df %d): counts %v, want %v", stat, crit, df, counts, want)
	}
}

func dense(d Dist, v int) []float64 {
	out := make([]float64, v)
	for i, id := range d.IDs {
		out[id] = d.Probs[i]
	}
	return out
}

var specConfigs = []struct {
	name string
	p    Params
}{
	{"temperature 1", Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}},
	{"top_k 3", Params{Temperature: 1, TopK: 3, TopP: 1, RepetitionPenalty: 1}},
	{"top_p 0.8", Params{Temperature: 1, TopP: 0.8, RepetitionPenalty: 1}},
	{"cold min_p", Params{Temperature: 0.6, MinP: 0.1, TopP: 1, RepetitionPenalty: 1}},
	{"penalties", Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1.5, FrequencyPenalty: 0.5}},
}

func TestDistributionMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, cfg := range specConfigs {
		if cfg.p.RepetitionPenalty != 1 {
			continue
		}
		for trial := range 30 {
			z := randomLogits(r, 50, 2, trial%2 == 0)
			s := seeded(cfg.p, 1, 0)
			rng := s.rng
			d := s.Distribution(z, History{}, Dist{})
			if s.rng != rng {
				t.Fatal("Distribution drew from the RNG")
			}
			ids, probs := referenceDistribution(z, cfg.p)
			if len(ids) != len(d.IDs) {
				t.Fatalf("%s: %d tokens, reference %d", cfg.name, len(d.IDs), len(ids))
			}
			for i := range ids {
				if ids[i] != d.IDs[i] || math.Abs(probs[i]-d.Probs[i]) > 1e-9 {
					t.Fatalf("%s: token %d p=%v, reference %d p=%v", cfg.name, d.IDs[i], d.Probs[i], ids[i], probs[i])
				}
			}
		}
	}
	g := seeded(Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1}, 1, 0)
	if d := g.Distribution([]float32{1, 5, 3}, History{}, Dist{}); len(d.IDs) != 1 || d.IDs[0] != 1 || d.Probs[0] != 1 {
		t.Fatalf("greedy distribution %+v", d)
	}
	// Penalties: the distribution of the penalised logits.
	pp := Params{Temperature: 1, TopP: 1, RepetitionPenalty: 2}
	h := History{Prompt: []int32{0}, Output: []int32{2}}
	d := seeded(pp, 1, 0).Distribution([]float32{2, 1, -1}, h, Dist{})
	ref := softmax([]float32{1, 1, -2}, 1)
	for i, id := range d.IDs {
		if math.Abs(d.Probs[i]-ref[id]) > 1e-9 {
			t.Fatalf("penalised distribution %+v, want %v", d, ref)
		}
	}
}

// TestVerifyKeepsTargetDistribution: drafts proposed from another
// distribution q (a "draft model"), or as fixed tokens (point masses), then
// verified against the target's logits, yield tokens distributed as the
// target's Distribution (chi-square, fixed seeds), and drafts are accepted
// at the rate sum_x min(p(x), q(x)).
func TestVerifyKeepsTargetDistribution(t *testing.T) {
	const v = 8
	n := 40000
	if raceEnabled {
		n = 8000 // the detector slows the draws; the statistic still has power
	}
	r := rand.New(rand.NewPCG(5, 6))
	for ci, cfg := range specConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			zt := randomLogits(r, v, 1.5, false)
			zd := make([]float32, v)
			for i := range zd { // a correlated, imperfect draft
				zd[i] = zt[i] + float32(r.NormFloat64())
			}
			h := History{Prompt: []int32{1, 2}, Output: []int32{3, 3, 5}}
			target := seeded(cfg.p, uint64(10+ci), 0)
			draft := seeded(cfg.p, uint64(20+ci), 1)
			p := target.Distribution(zt, h, Dist{})
			want := dense(p, v)

			counts := make([]int, v)
			accepted := 0
			var q Dist
			for range n {
				var x int32
				x, q = draft.SampleDist(zd, h, q)
				y, ok := target.Verify(zt, h, x, q)
				counts[y]++
				if ok {
					accepted++
					if y != x {
						t.Fatalf("accepted %d but returned %d", x, y)
					}
				}
			}
			chiSquare(t, counts, want, n)
			qd := dense(draft.Distribution(zd, h, Dist{}), v)
			var rate float64
			for i := range want {
				rate += math.Min(want[i], qd[i])
			}
			got := float64(accepted) / float64(n)
			if se := math.Sqrt(rate * (1 - rate) / float64(n)); math.Abs(got-rate) > 5*se+1e-9 {
				t.Fatalf("acceptance %.4f, want %.4f", got, rate)
			}

			// Point-mass drafts: always proposing token x.
			for _, x := range []int32{p.IDs[0], 7} {
				clear(counts)
				for range n {
					y, ok := target.Verify(zt, h, x, Dist{})
					if ok != (y == x) {
						t.Fatalf("point mass: ok %v for %d vs %d", ok, y, x)
					}
					counts[y]++
				}
				chiSquare(t, counts, want, n)
			}
		})
	}
}

// TestVerifyPointMassDrawsLikeSample: verifying deterministic drafts uses
// the sequence's RNG exactly as Sample does, so a seeded stream is the
// same with and without such drafts.
func TestVerifyPointMassDrawsLikeSample(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	p := Params{Temperature: 0.9, TopK: 10, TopP: 0.9, RepetitionPenalty: 1.1}
	a, b := seeded(p, 42, 0), seeded(p, 42, 0)
	var out []int32
	for i := range 200 {
		z := randomLogits(r, 40, 2, false)
		h := History{Prompt: []int32{1}, Output: out}
		ya := a.Sample(z, h)
		yb, _ := b.Verify(z, h, int32(i%40), Dist{})
		if ya != yb {
			t.Fatalf("step %d: Sample %d, Verify %d", i, ya, yb)
		}
		out = append(out, ya)
	}
}
