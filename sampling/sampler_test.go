package sampling

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

var (
	nan32  = float32(math.NaN())
	inf32  = float32(math.Inf(1))
	ninf32 = float32(math.Inf(-1))
)

func seeded(p Params, seed uint64, index int) *Sampler {
	p.Seed, p.HasSeed = seed, true
	return New(p, index)
}

// randomLogits returns n logits drawn from N(0, scale²), with a few exact
// ties when ties is set.
func randomLogits(r *rand.Rand, n int, scale float64, ties bool) []float32 {
	z := make([]float32, n)
	for i := range z {
		z[i] = float32(r.NormFloat64() * scale)
	}
	if ties && n > 3 {
		for range n / 4 {
			z[r.IntN(n)] = z[r.IntN(n)]
		}
	}
	return z
}

func TestGreedy(t *testing.T) {
	tests := []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"plain max", []float32{0.1, 3, -2, 2.9}, 1},
		{"tie goes to lowest id", []float32{1, 5, 2, 5, 5}, 1},
		{"NaN never wins", []float32{nan32, 1, nan32, 0.5}, 1},
		{"all NaN gives 0", []float32{nan32, nan32}, 0},
		{"all -Inf gives 0", []float32{ninf32, ninf32, ninf32}, 0},
		{"+Inf wins", []float32{1e30, inf32, 2}, 1},
		{"single token", []float32{-7}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, temp := range []float64{0, 1e-7} {
				p := Defaults(temp)
				s := seeded(p, 1, 0)
				before := s.rng
				if got := s.Sample(tc.logits, History{}); got != tc.want {
					t.Fatalf("T=%v: Sample = %d, want %d", temp, got, tc.want)
				}
				if s.rng != before {
					t.Errorf("T=%v: greedy sampling consumed randomness", temp)
				}
			}
		})
	}
}

func TestSampleDegenerateRows(t *testing.T) {
	tests := []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"empty row", nil, 0},
		{"all -Inf", []float32{ninf32, ninf32}, 0},
		{"+Inf dominates", []float32{3, 2, inf32}, 2},
		{"all NaN", []float32{nan32, nan32, nan32}, 0},
		{"one finite among NaN", []float32{nan32, 4, nan32}, 1},
		{"one finite among -Inf", []float32{ninf32, ninf32, 0}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := seeded(Params{Temperature: 1, TopP: 0.9, TopK: 2, MinP: 0.1, RepetitionPenalty: 1}, 3, 0)
			for range 20 {
				if got := s.Sample(tc.logits, History{}); got != tc.want {
					t.Fatalf("Sample = %d, want %d", got, tc.want)
				}
			}
		})
	}
}

// TestSampleMatchesReference compares the optimised path with the plain
// twin referenceDistribution: for the same uniform draw, both must pick the
// same token (inverse CDF in the same walk order).
func TestSampleMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	configs := []struct {
		name string
		p    Params
	}{
		{"temperature only", Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}},
		{"hot", Params{Temperature: 2.5, TopP: 1, RepetitionPenalty: 1}},
		{"cold", Params{Temperature: 0.2, TopP: 1, RepetitionPenalty: 1}},
		{"top_k", Params{Temperature: 1, TopK: 5, TopP: 1, RepetitionPenalty: 1}},
		{"top_p", Params{Temperature: 1, TopP: 0.7, RepetitionPenalty: 1}},
		{"top_p high", Params{Temperature: 1.3, TopP: 0.97, RepetitionPenalty: 1}},
		{"min_p", Params{Temperature: 0.9, TopP: 1, MinP: 0.05, RepetitionPenalty: 1}},
		{"top_k min_p top_p", Params{Temperature: 0.8, TopK: 20, TopP: 0.9, MinP: 0.02, RepetitionPenalty: 1}},
		{"top_k larger than survivors", Params{Temperature: 1, TopK: 500, TopP: 1, MinP: 0.3, RepetitionPenalty: 1}},
	}
	for _, vocab := range []int{7, 300, 5000} {
		for _, cfg := range configs {
			t.Run(cfg.name, func(t *testing.T) {
				scale := 2.0
				if vocab == 5000 {
					scale = 0.3 // flat: top-p needs several selection rounds
				}
				trials := 40
				if vocab > 1000 {
					trials = 8
				}
				for trial := range trials {
					z := randomLogits(r, vocab, scale, trial%2 == 0)
					s := seeded(cfg.p, uint64(trial), 0)
					peek := *s
					u := peek.uniform()
					got := s.Sample(z, History{})
					ids, probs := referenceDistribution(z, cfg.p)
					want, margin := inverseCDF(ids, probs, u)
					if got != want && margin > 1e-9 {
						t.Fatalf("vocab %d trial %d: Sample = %d, reference = %d (u=%v, margin %g)", vocab, trial, got, want, u, margin)
					}
				}
			})
		}
	}
}

// inverseCDF picks ids[i] for the first cumulative probability above u and
// reports how far u is from the nearest boundary.
func inverseCDF(ids []int32, probs []float64, u float64) (int32, float64) {
	var cum float64
	for i, p := range probs {
		lo := cum
		cum += p
		if cum > u {
			return ids[i], math.Min(u-lo, cum-u)
		}
	}
	return ids[len(ids)-1], 0
}

func frequencies(s *Sampler, z []float32, h History, n int) []float64 {
	f := make([]float64, len(z))
	for range n {
		f[s.Sample(z, h)]++
	}
	for i := range f {
		f[i] /= float64(n)
	}
	return f
}

// checkFrequencies asserts observed frequencies are within 5 standard
// errors of the expected probabilities (deterministic: seeded RNG).
func checkFrequencies(t *testing.T, got, want []float64, n int) {
	t.Helper()
	for i := range want {
		se := math.Sqrt(want[i]*(1-want[i])/float64(n)) + 1e-12
		if math.Abs(got[i]-want[i]) > 5*se {
			t.Errorf("token %d: frequency %.4f, want %.4f (±%.4f)", i, got[i], want[i], 5*se)
		}
	}
}

func softmax(z []float32, temp float64) []float64 {
	m := float64(slices.Max(z))
	p := make([]float64, len(z))
	var s float64
	for i, x := range z {
		p[i] = math.Exp((float64(x) - m) / temp)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

func TestTemperatureDistribution(t *testing.T) {
	z := []float32{2, 1, 0.5, -1, 0}
	const n = 20000
	for _, temp := range []float64{0.3, 1, 2, 10} {
		p := Defaults(temp)
		got := frequencies(seeded(p, 7, 0), z, History{}, n)
		checkFrequencies(t, got, softmax(z, temp), n)
	}
}

func support(f []float64) []int {
	var s []int
	for i, x := range f {
		if x > 0 {
			s = append(s, i)
		}
	}
	return s
}

func TestFiltersSupport(t *testing.T) {
	// Probabilities at T=1: ln of 0.5, 0.3, 0.15, 0.05 (order scrambled).
	z := []float32{float32(math.Log(0.15)), float32(math.Log(0.5)), float32(math.Log(0.05)), float32(math.Log(0.3))}
	base := Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}
	with := func(f func(*Params)) Params { p := base; f(&p); return p }
	tests := []struct {
		name string
		p    Params
		want []int     // tokens that must appear, and only them
		prob []float64 // expected probabilities, if checked
	}{
		{"no filter", base, []int{0, 1, 2, 3}, []float64{0.15, 0.5, 0.05, 0.3}},
		{"top_k 1", with(func(p *Params) { p.TopK = 1 }), []int{1}, nil},
		{"top_k 2", with(func(p *Params) { p.TopK = 2 }), []int{1, 3}, []float64{0, 0.625, 0, 0.375}},
		{"top_k 3", with(func(p *Params) { p.TopK = 3 }), []int{0, 1, 3}, nil},
		{"top_k >= vocab is off", with(func(p *Params) { p.TopK = 99 }), []int{0, 1, 2, 3}, nil},
		{"top_p 0.45 keeps best", with(func(p *Params) { p.TopP = 0.45 }), []int{1}, nil},
		{"top_p 0.75", with(func(p *Params) { p.TopP = 0.75 }), []int{1, 3}, []float64{0, 0.625, 0, 0.375}},
		{"top_p 0.9", with(func(p *Params) { p.TopP = 0.9 }), []int{0, 1, 3}, nil},
		{"top_p tiny keeps one", with(func(p *Params) { p.TopP = 1e-9 }), []int{1}, nil},
		{"min_p 0.2", with(func(p *Params) { p.MinP = 0.2 }), []int{0, 1, 3}, []float64{0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95}},
		{"min_p 0.5", with(func(p *Params) { p.MinP = 0.5 }), []int{1, 3}, nil},
		{"min_p 1 keeps the max", with(func(p *Params) { p.MinP = 1 }), []int{1}, nil},
		{"top_k 3 then top_p renormalised", with(func(p *Params) { p.TopK = 3; p.TopP = 0.83 }), []int{1, 3}, nil},
	}
	const n = 20000
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := frequencies(seeded(tc.p, 11, 0), z, History{}, n)
			if got := support(f); !slices.Equal(got, tc.want) {
				t.Fatalf("sampled tokens %v, want %v (freq %v)", got, tc.want, f)
			}
			if tc.prob != nil {
				checkFrequencies(t, f, tc.prob, n)
			}
		})
	}
}

func TestTopPManyTokens(t *testing.T) {
	// 1000 equal logits: top_p 0.5 must keep exactly the 500 lowest ids
	// (ties go to lower ids), which needs several selection rounds.
	z := make([]float32, 1000)
	s := seeded(Params{Temperature: 1, TopP: 0.5, RepetitionPenalty: 1}, 5, 0)
	seen := map[int32]bool{}
	for range 2000 {
		tok := s.Sample(z, History{})
		if tok >= 500 {
			t.Fatalf("sampled %d outside the top-p set [0, 500)", tok)
		}
		seen[tok] = true
	}
	if len(seen) < 450 {
		t.Errorf("only %d distinct tokens of 500 sampled", len(seen))
	}
}

func TestSelectTopMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		n := 1 + r.IntN(400)
		z := randomLogits(r, n, 1, true)
		for range n / 10 {
			z[r.IntN(n)] = nan32
		}
		if trial%7 == 0 {
			z[r.IntN(n)] = ninf32
		}
		z = sanitize(z, z) // better's precondition: no NaN
		ids := iota32(nil, n)
		want := slices.Clone(ids)
		sort.SliceStable(want, func(a, b int) bool { return better(z, want[a], want[b]) })
		k := r.IntN(n + 2)
		got := selectTop(z, ids, k)
		if !slices.Equal(got, want[:min(k, n)]) {
			t.Fatalf("trial %d: selectTop(k=%d) = %v, want %v", trial, k, got, want[:min(k, n)])
		}
		// selectTop only permutes.
		all := slices.Clone(ids)
		slices.Sort(all)
		if !slices.Equal(all, iota32(nil, n)) {
			t.Fatalf("trial %d: ids are no longer a permutation", trial)
		}
	}
}

func TestTopKScanMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 7))
	for trial := range 300 {
		n := 1 + r.IntN(300)
		z := randomLogits(r, n, 1, true)
		for range n / 10 {
			z[r.IntN(n)] = nan32
		}
		if trial%5 == 0 {
			z[r.IntN(n)] = ninf32
		}
		cut := ninf32
		if trial%3 == 0 {
			cut = float32(r.NormFloat64())
		}
		k := 1 + r.IntN(n+1)
		// Plain twin: filter, sort by better, take k, sort ids.
		var want []int32
		for i, x := range z {
			if x >= cut && !math.IsInf(float64(x), 0) {
				want = append(want, int32(i))
			}
		}
		sort.SliceStable(want, func(a, b int) bool { return better(z, want[a], want[b]) })
		want = want[:min(k, len(want))]
		slices.Sort(want)
		got := topKScan(z, cut, k, make([]int32, 0, n))
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (k=%d cut=%v): topKScan = %v, want %v", trial, k, cut, got, want)
		}
	}
}
