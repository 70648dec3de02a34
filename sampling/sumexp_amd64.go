package sampling

import "golang.org/x/sys/cpu"

// sumExpAVX2: the CPU has the 256-bit integer and double operations of
// sumExpNegAVX2.
var sumExpAVX2 = cpu.X86.HasAVX2

//go:noescape
func sumExpNegAVX2(z *float32, n int, m float64) float64

//go:noescape
func expNegScaledAVX2(z *float32, n int, m, invT float64, w *float64)

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

// expNegScaled writes w[i] = expNeg((float64(z[i]) − m) · invT) for every i
// (w at least as long as z; z[i] ≤ m where the value is used: other lanes
// may hold anything): expNegScaledGo's values, four at a time.
func expNegScaled(w []float64, z []float32, m, invT float64) {
	n := len(z) &^ 3
	if sumExpAVX2 && n > 0 {
		_ = w[len(z)-1]
		expNegScaledAVX2(&z[0], n, m, invT, &w[0])
	} else {
		n = 0
	}
	expNegScaledGo(w[n:], z[n:], m, invT)
}
