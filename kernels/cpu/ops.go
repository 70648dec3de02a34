package cpu

import "math"

// Element-wise kernels of the transformer block: RMSNorm, LayerNorm, residual
// add, GELU and the SiLU-gated linear unit. Each has a plain float64 reference twin in
// ops_ref.go; ops_test.go compares them.
//
// The arithmetic follows ggml's CPU backend where it affects the numbers:
// RMSNorm sums squares in float64 and scales in float32, SiLU is
// x/(1+exp(-x)) in float32.

// RMSNorm writes dst[i] = x[i] * 1/sqrt(mean(x²) + eps) * w[i].
// x, dst: [n] (dst may alias x); w: [n] or nil for no weight.
//
// As ggml: the squares are rounded to float32 and summed in order in
// float64, the mean is rounded to float32, then scale = 1/sqrtf(mean+eps)
// with float32 sqrt and division, y = x*scale, then y*w.
func RMSNorm(dst, x, w []float32, eps float32) {
	n := len(x)
	if n == 0 {
		return
	}
	dst = dst[:n]
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(n))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	if w == nil {
		for i := range dst {
			dst[i] = x[i] * scale
		}
		return
	}
	w = w[:n]
	for i := range dst {
		dst[i] = float32(x[i]*scale) * w[i]
	}
}

// LayerNorm writes dst[i] = (x[i] − mean(x)) / sqrt(var(x) + eps) · w[i] +
// b[i], the norm of BERT's blocks. x, dst: [n] (dst may alias x); w, b:
// [n], or nil for none.
//
// As ggml: the sum is taken in float64 and the mean rounded to float32,
// the centred values are rounded to float32 and their squares summed in
// float64, then scale = 1/sqrtf(var+eps) in float32, y = (x−mean)·scale,
// then y·w, then + b, each rounded to float32.
func LayerNorm(dst, x, w, b []float32, eps float32) {
	n := len(x)
	if n == 0 {
		return
	}
	dst = dst[:n]
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := float32(sum) / float32(n)
	var ss float64
	for i, v := range x {
		c := v - mean
		dst[i] = c
		ss += float64(c) * float64(c)
	}
	scale := 1 / float32(math.Sqrt(float64(float32(ss/float64(n))+eps)))
	for i := range dst {
		dst[i] *= scale
	}
	if w != nil {
		w = w[:n]
		for i := range dst {
			dst[i] *= w[i]
		}
	}
	if b != nil {
		b = b[:n]
		for i := range dst {
			dst[i] += b[i]
		}
	}
}

// GELU writes dst[i] = gelu(x[i]) in GeGLU's tanh form and arithmetic
// (dst may alias x): the activation of BERT's feed-forward. It is GeGLU
// with an up projection of ones, its SIMD kernel included (x·1 is x), so
// each value is bit for bit geluGo's (TestGELU).
func GELU(dst, x []float32) {
	x = x[:len(dst)]
	for lo := 0; lo < len(dst); lo += len(geluOnes) {
		hi := min(lo+len(geluOnes), len(dst))
		GeGLU(dst[lo:hi], x[lo:hi], geluOnes[:hi-lo])
	}
}

// geluOnes is GELU's up projection, read in chunks (a multiple of 8, so
// the SIMD groups fall where they would over the whole row).
var geluOnes = func() []float32 {
	v := make([]float32, 4096)
	for i := range v {
		v[i] = 1
	}
	return v
}()

// Add writes dst[i] = a[i] + b[i] (dst may alias a or b).
func Add(dst, a, b []float32) {
	n := len(dst)
	a, b = a[:n], b[:n]
	for i := addSIMD(dst, a, b); i < n; i++ {
		dst[i] = a[i] + b[i]
	}
}

// Scale writes dst = s·x elementwise (dst may alias x).
func Scale(dst, x []float32, s float32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] = v * s
	}
}

// AddBias adds bias (length m) to each of the len(x)/m rows of x: x [rows][m].
func AddBias(x, bias []float32) {
	m := len(bias)
	if m == 0 {
		return
	}
	for r := 0; r+m <= len(x); r += m {
		Add(x[r:r+m], x[r:r+m], bias)
	}
}

// SwiGLU writes dst[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x),
// for one row. dst may alias gate or up.
//
// As ggml's AVX2 build (ggml_vec_swiglu_f32): whole groups of 8 values use
// its vector expf approximation (expGGML), the last len%8 values libm's
// expf; then x/(1+e) and the product are float32 operations.
//
// The groups of 8 run in AVX2 where present (swigluSIMD, bitwise the same
// as swigluGo, its plain twin).
func SwiGLU(dst, gate, up []float32) {
	n := len(dst)
	gate, up = gate[:n], up[:n]
	if swigluSIMD(dst, gate, up) {
		swigluTail(dst, gate, up, n&^7)
		return
	}
	swigluGo(dst, gate, up)
}

// SwiGLUOAI computes gpt-oss's clamped SwiGLU: with x = min(gate_i,
// limit) and y = clamp(up_i, −limit, limit), dst_i = x·σ(alpha·x)·(y + 1)
// (gpt-oss: alpha 1.702, limit 7), with float32 exponentials as ggml's
// swiglu_oai computes it. Twin: SwiGLUOAIRef.
func SwiGLUOAI(dst, gate, up []float32, alpha, limit float32) {
	n := len(dst)
	gate, up = gate[:n], up[:n]
	for i := range dst {
		x := min(gate[i], limit)
		y := max(-limit, min(up[i], limit))
		dst[i] = x / (1 + float32(math.Exp(float64(alpha*-x)))) * (y + 1)
	}
}

// swigluGo is SwiGLU in plain Go (expGGML lane by lane).
func swigluGo(dst, gate, up []float32) {
	n := len(dst)
	gate, up = gate[:n], up[:n]
	nv := n &^ 7
	for i := 0; i < nv; i++ {
		g := gate[i]
		dst[i] = g / (1 + expGGML(0-g)) * up[i]
	}
	swigluTail(dst, gate, up, nv)
}

// swigluTail computes SwiGLU's values from nv on with libm's expf.
func swigluTail(dst, gate, up []float32, nv int) {
	for i := nv; i < len(dst); i++ {
		g := gate[i]
		dst[i] = g / float32(1+float32(math.Exp(float64(-g)))) * up[i]
	}
}

// GeGLU computes dst = gelu(gate) * up elementwise (Gemma's feed-forward
// gate), with the tanh form of GELU, 0.5·x·(1 + tanh(√(2/π)·(x +
// 0.044715·x³))), written as x / (1 + e^(−u)) with u = 2·√(2/π)·x·(1 +
// 0.044715·x²) and evaluated in float32 with expGGML: AVX2 for whole
// groups of 8 (gegluAVX2), geluGo for the rest, bit for bit the same.
// llama.cpp looks GELU up in a table of x rounded to F16; this stays
// within a few float32 ulps of the formula instead (TestGeGLU). dst may
// alias gate or up.
func GeGLU(dst, gate, up []float32) {
	n := len(dst)
	gate, up = gate[:n], up[:n]
	nv := 0
	if gegluSIMD(dst, gate, up) {
		nv = n &^ 7
	}
	geluGo(dst[nv:], gate[nv:], up[nv:])
}

// GeGLU's constants: a, and 2·√(2/π).
const (
	geluA  = 0.044715
	geluC2 = 2 * 0.79788456080286535587989211986876
)

// geluGo is GeGLU in plain Go, gegluAVX2's twin: one float32 rounding a
// step, in its order.
func geluGo(dst, gate, up []float32) {
	up = up[:len(gate)]
	dst = dst[:len(gate)]
	for i, x := range gate {
		xx := float32(x * x)
		q := float32(geluA*xx) + 1
		u := float32(geluC2 * float32(x*q))
		dst[i] = x / (1 + expGGML(0-u)) * up[i]
	}
}

// Softmax replaces x by softmax(x) in place, computed in float32 with a
// float64 sum (the max is subtracted first). An empty x is left alone.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - m)))
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}
