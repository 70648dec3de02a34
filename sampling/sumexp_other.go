//go:build !amd64

package sampling

// sumExpNeg is Σ expNeg(float64(x) − m) over z (sumExpNegGo).
func sumExpNeg(z []float32, m float64) float64 { return sumExpNegGo(z, m) }

// expNegScaled is expNegScaledGo.
func expNegScaled(w []float64, z []float32, m, invT float64) { expNegScaledGo(w, z, m, invT) }
