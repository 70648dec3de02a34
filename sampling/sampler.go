package sampling

import (
	"math"
	"math/rand/v2"
)

// promptBit marks, in Sampler.counts, a token that occurs in the prompt; the
// low 31 bits count its occurrences in the output.
const promptBit = 1 << 31

// History is what a sequence has seen so far. Pass the same growing slices at
// every step: the Sampler counts only the tokens appended since its last call
// (a shorter slice than last time makes it recount from scratch).
type History struct {
	Prompt []int32 // every token attended to before the first output token
	Output []int32 // tokens sampled so far (not the one being sampled now)
}

// Sampler holds the per-sequence sampling state: parameters, its own RNG and
// the token counts the penalties need. One Sampler per output sequence; it
// is not safe for concurrent use, but distinct Samplers are independent.
type Sampler struct {
	p    Params
	seed uint64
	rng  rand.PCG

	penalised  bool     // any penalty is not neutral
	biased     bool     // Params.LogitBias is set
	counts     []uint32 // [vocab] promptBit | output count; allocated on first use
	touched    []int32  // ids whose counts entry is non-zero
	promptSeen int      // len(History.Prompt) already counted
	outputSeen int      // len(History.Output) already counted

	verifyBuf Dist // Verify's target distribution, reused
}

// New returns the sampler of output sequence outputIndex of a request. With
// p.HasSeed its random stream depends only on (p.Seed, outputIndex), so a
// seeded request samples the same tokens whatever else runs in the batch;
// without a seed, a fresh random seed is drawn (see Seed). p should be
// valid (Params.Validate); invalid values are not checked again here.
func New(p Params, outputIndex int) *Sampler {
	s := &Sampler{p: p}
	s.seed = p.Seed
	if !p.HasSeed {
		s.seed = rand.Uint64()
	}
	s1 := splitmix64(s.seed)
	s2 := splitmix64(s1 ^ splitmix64(uint64(outputIndex)+0x632be59bd9b4e019))
	s.rng.Seed(s1, s2)
	s.penalised, s.biased = p.Penalised(), len(p.LogitBias) > 0
	return s
}

// Seed is the seed in use (the request's, or the random one drawn by New).
func (s *Sampler) Seed() uint64 { return s.seed }

// Params returns the parameters the sampler was built with.
func (s *Sampler) Params() Params { return s.p }

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// uniform returns a float64 in [0, 1) from the sequence's RNG, with 53
// random bits (defined here, not by math/rand, so streams stay stable).
func (s *Sampler) uniform() float64 {
	return float64(s.rng.Uint64()>>11) * 0x1p-53
}

// Sample picks the next token from logits ([vocab] scores of the next
// position; never modified). It applies penalties and the logit bias,
// then temperature (greedy
// below GreedyBelow), min-p, top-k and top-p, and draws once from the
// sequence's RNG.
// NaN logits never win. If no logit is finite the result is the argmax with
// ties to the lowest id (token 0 when every logit is NaN). An empty row
// yields 0.
func (s *Sampler) Sample(logits []float32, h History) int32 {
	v := len(logits)
	if v == 0 {
		return 0
	}
	z := logits
	var sc *scratch
	if s.penalised || s.biased {
		sc = getScratch(v)
		defer putScratch(sc)
		z = sc.z[:v]
		copy(z, logits)
		s.rewrite(z, h)
	}
	if s.p.Greedy() {
		return argmax(z)
	}
	m := maxValue(z)
	if math.IsInf(float64(m), 0) || isNaN32(m) {
		// No finite maximum: nothing to soften; keep the deterministic choice.
		return argmax(z)
	}
	if sc == nil {
		sc = getScratch(v)
		defer putScratch(sc)
	}
	return s.sampleSoft(z, m, sc)
}

// sampleSoft samples from softmax(z / T) restricted by min-p, top-k and
// top-p. m is the largest value of z and is finite. The kept tokens are
// always a best-first prefix of the vocabulary (order: better); the draw
// walks them in id order.
func (s *Sampler) sampleSoft(z []float32, m float32, sc *scratch) int32 {
	cand, w, total := s.candidates(z, m, sc)
	if len(cand) == 0 { // unreachable: m is finite and cut <= m
		return argmax(z)
	}
	return s.draw(cand, w, total)
}

// candidates returns, in id order, the tokens of z that keep mass after
// min-p, top-k and top-p, with their weights exp((z-m)/T) and the weights'
// sum: the distribution sampleSoft draws from. m is the largest value of z
// and is finite.
func (s *Sampler) candidates(z []float32, m float32, sc *scratch) ([]int32, []float64, float64) {
	t := s.p.Temperature
	invT := 1 / t
	// min-p: keep p_i >= min_p * p_max  <=>  z_i >= m + T*ln(min_p).
	cut := float32(math.Inf(-1))
	if s.p.MinP > 0 {
		cut = float32(float64(m) + t*math.Log(s.p.MinP))
		if cut > m { // rounding must never drop the maximum
			cut = m
		}
	}
	var cand []int32
	var w []float64
	var total float64
	if k := s.p.TopK; k > 0 && k < len(z) {
		cand = topKScan(z, cut, k, sc.idx[:0])
		w = sc.w[:len(cand)]
		total = weights(z, cand, m, invT, w)
	} else {
		cand, w, total = filterWeights(z, cut, m, invT, sc.idx[:0], sc.w[:0])
	}
	if len(cand) > 0 && s.p.TopP < 1 {
		cand, w, total = topP(z, cand, w, total, s.p.TopP, m, invT, sc)
	}
	return cand, w, total
}

// draw picks one of cand with probability w[i]/total, with one uniform
// draw from the sequence's RNG.
func (s *Sampler) draw(cand []int32, w []float64, total float64) int32 {
	target := s.uniform() * total
	var acc float64
	for i, x := range w {
		acc += x
		if acc > target {
			return cand[i]
		}
	}
	// Rounding left target at or above the accumulated sum: last kept token
	// with a non-zero weight.
	for i := len(w) - 1; i >= 0; i-- {
		if w[i] > 0 {
			return cand[i]
		}
	}
	return cand[0]
}
