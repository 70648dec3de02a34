package cpu

import "math"

// Rotary position embedding (RoPE).
//
// A head vector of headDim values has its first nRot values rotated in
// nRot/2 pairs; values past nRot pass through. Pair j turns by the angle
//
//	theta_j = freqScale * pos * base^(-2j/nRot) / factor_j
//
// (factor_j from a rope_freqs tensor, Llama-3 style scaling; 1 without one).
// Two layouts choose which values form pair j:
//   - adjacent ("normal", llama): (x[2j], x[2j+1])
//   - half split ("NeoX", qwen2/qwen3): (x[j], x[j+nRot/2])
//
// ggml builds base^(-2j/nRot) by multiplying a float32 accumulator by
// base^(-2/nRot) once per pair, starting from pos; RopeCache does the same so
// that angles at large positions round as llama.cpp's do.

// RopeCache fills cs [nRot/2][2] with (cos theta_j, sin theta_j) for position pos.
// factors is [nRot/2] or nil.
func RopeCache(cs []float32, pos int32, nRot int, base, freqScale float32, factors []float32) {
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
		cs[2*j] = float32(math.Cos(float64(t)))
		cs[2*j+1] = float32(math.Sin(float64(t)))
		theta = float32(theta * thetaScale)
	}
}

// Rope rotates x [heads][headDim] in place with the angles in cs (from
// RopeCache for this token's position).
func Rope(x []float32, heads, headDim, nRot int, cs []float32, neox bool) {
	half := nRot / 2
	cs = cs[:2*half]
	for h := 0; h < heads; h++ {
		v := x[h*headDim : h*headDim+nRot]
		if neox {
			lo, hi := v[:half], v[half:2*half]
			for j := range lo {
				c, s := cs[2*j], cs[2*j+1]
				a, b := lo[j], hi[j]
				lo[j], hi[j] = rot(a, b, c, s)
			}
			continue
		}
		for j := 0; j < half; j++ {
			c, s := cs[2*j], cs[2*j+1]
			a, b := v[2*j], v[2*j+1]
			v[2*j], v[2*j+1] = rot(a, b, c, s)
		}
	}
}

// rot turns the pair (a, b) by the angle with cosine c and sine s. The
// rounding follows ggml's C code as GCC compiles it with FMA contraction:
// (a*c - b*s) becomes fma(a, c, -(b*s)) and (a*s + b*c) fma(a, s, b*c).
func rot(a, b, c, s float32) (float32, float32) {
	return fma32(a, c, -float32(b*s)), fma32(a, s, float32(b*c))
}

// YaRN describes YaRN rope scaling (ggml's rope_yarn): pairs below
// CorrLow turn by the extrapolated angle (theta before freqScale), pairs
// above CorrHigh by the interpolated one (after it), and pairs between by a
// linear mix; cos and sin are multiplied by MScale.
type YaRN struct {
	CorrLow, CorrHigh float32
	MScale            float32
}

// YaRNCorrDims is ggml's correction range of a YaRN rope: the first and
// last pair index whose wavelength crosses origCtx/betaFast and
// origCtx/betaSlow rotations, clamped to [0, nRot-1].
func YaRNCorrDims(nRot, origCtx int, base, betaFast, betaSlow float32) (lo, hi float32) {
	dim := func(beta float32) float32 {
		return float32(nRot) * float32(math.Log(float64(float32(origCtx)/(beta*2*float32(math.Pi))))) / (2 * float32(math.Log(float64(base))))
	}
	lo = max(0, float32(math.Floor(float64(dim(betaFast)))))
	hi = min(float32(nRot-1), float32(math.Ceil(float64(dim(betaSlow)))))
	return lo, hi
}

// RopeCacheYaRN is RopeCache with YaRN scaling y.
func RopeCacheYaRN(cs []float32, pos int32, nRot int, base, freqScale float32, factors []float32, y YaRN) {
	half := nRot / 2
	cs = cs[:2*half]
	thetaScale := float32(math.Pow(float64(base), float64(float32(-2)/float32(nRot))))
	theta := float32(pos)
	for j := 0; j < half; j++ {
		extrap := theta
		if factors != nil {
			extrap = float32(extrap / factors[j])
		}
		interp := float32(freqScale * extrap)
		ramp := (float32(j) - y.CorrLow) / max(0.001, y.CorrHigh-y.CorrLow)
		mix := 1 - min(1, max(0, ramp))
		t := float32(interp*(1-mix)) + float32(extrap*mix)
		cs[2*j] = float32(math.Cos(float64(t))) * y.MScale
		cs[2*j+1] = float32(math.Sin(float64(t))) * y.MScale
		theta = float32(theta * thetaScale)
	}
}
