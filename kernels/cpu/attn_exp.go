package cpu

import "math"

// expAttn is the exponential of Attend's softmax, for x = s − max ≤ 0: a
// Cephes-style float32 expf (range reduction by ln 2 in two parts, a
// degree-5 polynomial), every product and sum rounded to float32 and none
// fused, so that the eight-lane assembly (attn_exp_amd64.s) computes the
// same bits. x is clamped to [−87, 0] (a positive x gives 1); below −87
// (e^x < 2^−125, nothing beside the maximum's 1) it gives +0, and NaN
// gives NaN. Within a few float32 ulps of exp (TestExpAttnAccuracy).
func expAttn(x float32) float32 {
	if x != x {
		return x
	}
	if x < -87 {
		return 0
	}
	x = min(x, 0)
	const (
		log2e = 1.44269504088896341
		c1    = 0.693359375 // ln 2 = c1 − c2, c1 with few bits: n·c1 is exact
		c2    = -2.12194440e-4
		p0    = 1.9875691500e-4
		p1    = 1.3981999507e-3
		p2    = 8.3334519073e-3
		p3    = 4.1665795894e-2
		p4    = 1.6666665459e-1
		p5    = 5.0000001201e-1
	)
	// The float32 conversions round each product on its own (Go may
	// otherwise fuse a product into the following sum on some machines).
	n := float32(math.RoundToEven(float64(float32(x * log2e))))
	r := x - float32(n*c1)
	r -= float32(n * c2)
	z := float32(r * r)
	p := float32(p0*r) + p1
	p = float32(p*r) + p2
	p = float32(p*r) + p3
	p = float32(p*r) + p4
	p = float32(p*r) + p5
	y := float32(p*z) + r
	y++
	return y * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// attnExpGo is the softmax exponential pass of Attend and the plain twin
// of attnExpAVX2: for each head h < g, over the positions of scores
// ([n][g], already scaled) in order, e = expAttn(s − m[h]), s is replaced
// by e and sums[h] = Σ float64(e).
func attnExpGo(scores []float32, g int, m []float32, sums []float64) {
	for h := 0; h < g; h++ {
		var sum float64
		for i := h; i < len(scores); i += g {
			e := expAttn(scores[i] - m[h])
			scores[i] = e
			sum += float64(e)
		}
		sums[h] = sum
	}
}
