package sampling

import (
	"math"
	"slices"
)

// Dist is a sparse probability distribution over token ids: IDs ascending,
// Probs[i] the probability of IDs[i], summing to 1. Tokens not listed have
// probability 0.
type Dist struct {
	IDs   []int32
	Probs []float64
}

// P returns the probability of id.
func (d Dist) P(id int32) float64 {
	if i, ok := slices.BinarySearch(d.IDs, id); ok {
		return d.Probs[i]
	}
	return 0
}

// pointMass makes dst the distribution that is id with certainty.
func pointMass(dst Dist, id int32) Dist {
	dst.IDs = append(dst.IDs[:0], id)
	dst.Probs = append(dst.Probs[:0], 1)
	return dst
}

// Distribution returns the distribution Sample draws the next token from,
// for the same logits and history: penalties, logit bias, temperature, min-p, top-k and
// top-p applied; a point mass on the argmax when sampling is greedy or no
// logit is finite. It draws nothing (the RNG is untouched); dst's storage
// is reused.
func (s *Sampler) Distribution(logits []float32, h History, dst Dist) Dist {
	v := len(logits)
	if v == 0 {
		return pointMass(dst, 0)
	}
	sc := getScratch(v)
	defer putScratch(sc)
	z := logits
	if s.penalised || s.biased {
		z = sc.z[:v]
		copy(z, logits)
		s.rewrite(z, h)
	}
	if s.p.Greedy() {
		return pointMass(dst, argmax(z))
	}
	m := maxValue(z)
	if math.IsInf(float64(m), 0) || isNaN32(m) {
		return pointMass(dst, argmax(z))
	}
	cand, w, total := s.candidates(z, m, sc)
	if len(cand) == 0 || !(total > 0) {
		return pointMass(dst, argmax(z))
	}
	dst.IDs = append(dst.IDs[:0], cand...)
	dst.Probs = slices.Grow(dst.Probs[:0], len(w))
	for _, x := range w {
		dst.Probs = append(dst.Probs, x/total)
	}
	return dst
}

// SampleDist draws the next token like Sample and also returns the
// distribution it was drawn from (a draft model's proposal q for Verify).
func (s *Sampler) SampleDist(logits []float32, h History, dst Dist) (int32, Dist) {
	d := s.Distribution(logits, h, dst)
	if len(d.IDs) == 1 {
		return d.IDs[0], d
	}
	return s.draw(d.IDs, d.Probs, 1), d
}

// Verify decides a speculative draft token x for the position whose target
// logits are given, so that the token it returns is distributed exactly as
// Sample's (the standard speculative-sampling rule): x is accepted with
// probability min(1, p(x)/q(x)), where p is Distribution(logits, h) and q
// the distribution x was proposed from; on rejection the token is drawn
// from max(0, p - q) normalised. It returns the token to emit and whether
// it is the accepted x.
//
// An empty q means x was proposed deterministically (a point mass: n-gram
// lookup, or a greedy draft): the rule reduces to accepting with
// probability p(x) and otherwise drawing from p without x, which is what
// drawing y from p and comparing it with x does; that is how it is
// computed, so it consumes the RNG exactly as Sample does (a seeded
// request samples the same tokens with or without such drafts).
func (s *Sampler) Verify(logits []float32, h History, x int32, q Dist) (int32, bool) {
	if len(q.IDs) == 0 {
		y := s.Sample(logits, h)
		return y, y == x
	}
	p := s.Distribution(logits, h, s.verifyBuf)
	defer func() { s.verifyBuf = p }()
	px, qx := p.P(x), q.P(x)
	if qx > 0 && s.uniform()*qx < px {
		return x, true
	}
	// Residual max(0, p - q) over p's support (where q > p it is 0).
	var total float64
	for i, id := range p.IDs {
		r := max(0, p.Probs[i]-q.P(id))
		p.Probs[i] = r
		total += r
	}
	if !(total > 0) {
		// p <= q everywhere yet x was rejected: only rounding gets here
		// (p == q); p itself is then the right law.
		p = s.Distribution(logits, h, p)
		total = 1
	}
	return s.draw(p.IDs, p.Probs, total), false
}
