package cuda

import (
	"math"
	"sort"
)

// Plain Go reference twins of the device kernels that have no twin in
// kernels/cpu. (RMSNorm, RoPE, attention, dequantization and matmul are
// checked against kernels/cpu: RMSNormRef, RopeCache+Rope, AttendRef,
// Dequantize, MatMulRef.)

// sampleKey maps NaN to -Inf so that ordering is total, as the kernels do.
func sampleKey(x float32) float64 {
	if x != x {
		return math.Inf(-1)
	}
	return float64(x)
}

// SampleCut returns the smallest logit value a token must reach to stay in
// the candidate set of sample_topk_topp: the topK-th largest value (topK
// <= 0 or >= len: no cut), then, when topP < 1, the largest value v whose
// kept mass Σ_{x >= v} exp((x-max)/temp) is at least topP of the top-k
// mass. Ties at a cut are all kept.
func SampleCut(logits []float32, temp float32, topK int, topP float32) float64 {
	n := len(logits)
	vals := make([]float64, n)
	mx := math.Inf(-1)
	for i, x := range logits {
		vals[i] = sampleKey(x)
		mx = math.Max(mx, vals[i])
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(vals)))
	cut := math.Inf(-1)
	if topK > 0 && topK < n {
		cut = vals[topK-1]
	}
	if topP >= 1 {
		return cut
	}
	w := func(v float64) float64 { return math.Exp((v - mx) / float64(temp)) }
	var z float64
	for _, v := range vals {
		if v >= cut {
			z += w(v)
		}
	}
	need := float64(topP) * z
	var cum float64
	for i := 0; i < n && vals[i] >= cut; {
		j := i
		for j < n && vals[j] == vals[i] {
			cum += w(vals[j])
			j++
		}
		if cum >= need {
			return math.Max(vals[i], cut)
		}
		i = j
	}
	return cut
}

// SampleRef is the reference twin of sample_topk_topp: among tokens with
// logit >= SampleCut, in index order, it returns the first whose running
// probability mass exceeds u (u in [0, 1)), in float64. It also returns the
// CDF interval [lo, hi) of u that selects that token, for tolerance checks.
func SampleRef(logits []float32, temp float32, topK int, topP float32, u float32) (tok int32, lo, hi float64) {
	cut := SampleCut(logits, temp, topK, topP)
	mx := math.Inf(-1)
	for _, x := range logits {
		mx = math.Max(mx, sampleKey(x))
	}
	var z float64
	for _, x := range logits {
		if v := sampleKey(x); v >= cut {
			z += math.Exp((v - mx) / float64(temp))
		}
	}
	target := float64(u) * z
	var run float64
	last := int32(-1)
	for i, x := range logits {
		v := sampleKey(x)
		if v < cut {
			continue
		}
		p := math.Exp((v - mx) / float64(temp))
		last = int32(i)
		if run+p > target {
			return int32(i), run / z, (run + p) / z
		}
		run += p
	}
	if last < 0 {
		return 0, 0, 1
	}
	return last, run / z, 1
}

// ArgmaxRef returns the index of the largest value (lowest index on ties,
// NaN as -Inf), the twin of argmax_f32.
func ArgmaxRef(x []float32) int32 {
	best, bi := math.Inf(-1), int32(0)
	for i, v := range x {
		if k := sampleKey(v); k > best {
			best, bi = k, int32(i)
		}
	}
	return bi
}
