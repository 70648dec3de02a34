package cpu

import "math"

// GGMLRopeCache is RopeCache (same arguments and layout) with the sine and
// cosine of glibc's sincosf (sincosfGlibc), as llama.cpp's
// ggml_rope_cache_init gets them on x86-64 Linux. The angle recurrence is
// the same float32 one: theta starts at pos and is multiplied by
// base^(-2/nRot) once per pair; pair j turns by freqScale·theta/factor_j.
func GGMLRopeCache(cs []float32, pos int32, nRot int, base, freqScale float32, factors []float32) {
	half := nRot / 2
	cs = cs[:2*half]
	thetaScale := float32(math.Pow(float64(base), float64(float32(-2)/float32(nRot))))
	theta := float32(pos)
	for j := 0; j < half; j++ {
		t := theta
		if factors != nil {
			t = float32(t / factors[j])
		}
		t = float32(freqScale * t)
		cs[2*j+1], cs[2*j] = sincosfGlibc(t)
		theta = float32(theta * thetaScale)
	}
}
