package sampling

import "golang.org/x/sys/cpu"

// sumExpAVX2: the CPU has the 256-bit integer and double operations of
// sumExpNegAVX2.
var sumExpAVX2 = cpu.X86.HasAVX2

//go:noescape
func sumExpNegAVX2(z *float32, n int, m float64) float64

// sumExpNeg is Σ expNeg(float64(x) − m) over z (every x ≤ m, no NaN):
// sumExpNegGo's exponentials, four at a time (sumexp_amd64.s), added in
// another order.
func sumExpNeg(z []float32, m float64) float64 {
	n := len(z) &^ 3
	if !sumExpAVX2 || n == 0 {
		return sumExpNegGo(z, m)
	}
	return sumExpNegAVX2(&z[0], n, m) + sumExpNegGo(z[n:], m)
}
