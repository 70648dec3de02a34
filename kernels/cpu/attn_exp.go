package cpu

import "math"

// attnExpGo is the softmax exponential pass of Attend and the plain twin
// of attnExpAVX2: for each head h < g, over the positions of scores
// ([n][g], already scaled) in order, e = float32(exp(float64(s − m[h]))),
// s is replaced by e and sums[h] = Σ float64(e).
func attnExpGo(scores []float32, g int, m []float32, sums []float64) {
	for h := 0; h < g; h++ {
		var sum float64
		for i := h; i < len(scores); i += g {
			e := float32(math.Exp(float64(scores[i] - m[h])))
			scores[i] = e
			sum += float64(e)
		}
		sums[h] = sum
	}
}
