package cpu

import "math"

// expGGML is the float32 exponential of ggml's SIMD code (ggml_v_expf,
// "adapted from arm limited optimized routine": max error about 1.5 ulp),
// which llama.cpp's SiLU uses. Written lane by lane with fused
// multiply-adds so that it gives the same float32 as the vector code.
// Results: +Inf above about 88.38, 0 below about -103.97.
func expGGML(x float32) float32 {
	const r = 0x1.8p23
	z := fma32(x, 0x1.715476p+0, r)
	n := z - r
	b := fnma32(n, 0x1.7f7d1cp-20, fnma32(n, 0x1.62e4p-1, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + math.Float32bits(1))
	u := b * b
	j := fma32(fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u, 0x1.ffffecp-1*b)
	an := float32(math.Abs(float64(n)))
	if !(an > 126) {
		return fma32(k, j, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	s2 := math.Float32frombits(e - g)
	if an > 192 {
		return s1 * s1
	}
	return fma32(s2, j, s2) * s1
}

// fma32 returns a*b+c rounded once to float32 (through float64: the product
// is exact there, so only a halfway case of the sum could round twice).
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

// fnma32 returns c - a*b rounded once to float32.
func fnma32(a, b, c float32) float32 {
	return float32(math.FMA(-float64(a), float64(b), float64(c)))
}
