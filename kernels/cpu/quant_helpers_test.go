package cpu

import (
	"math"
	"math/rand/v2"
	"oengine/internal/refdata"
	"testing"

	"oengine/ggml"
)

// sharedTestdata returns ../shared/testdata relative to the repository root
// (found by walking up to go.mod), skipping the test if it is absent.
func sharedTestdata(t testing.TB) string {
	t.Helper()
	return refdata.Dir(t)
}

// allTypes are the weight types MatMul supports.
var allTypes = []ggml.Type{
	ggml.TypeF32, ggml.TypeF16, ggml.TypeBF16,
	ggml.TypeQ4_0, ggml.TypeQ4_1, ggml.TypeQ5_0, ggml.TypeQ5_1, ggml.TypeQ8_0,
	ggml.TypeQ2_K, ggml.TypeQ3_K, ggml.TypeQ4_K, ggml.TypeQ5_K, ggml.TypeQ6_K,
	ggml.TypeIQ4_NL, ggml.TypeIQ4_XS, ggml.TypeMXFP4,
}

func randNormal(rng *rand.Rand, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * scale
	}
	return x
}

// randMatrix quantizes random normal weights into a rows×cols matrix.
func randMatrix(t testing.TB, rng *rand.Rand, typ ggml.Type, rows, cols int) Matrix {
	t.Helper()
	w := randNormal(rng, rows*cols, 0.5)
	rb, err := typ.RowBytes(cols)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, rows*rb)
	if err := Quantize(typ, w, data); err != nil {
		t.Fatal(err)
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// quantActRef returns, for one token x, the activation values exactly as
// the kernels see them (dequantized activations) and, for Q8_1 types, the
// per-block correction s - d*Σq that the kernel adds through the m term.
func quantActRef(k actKind, x []float32) (xq []float32, sCorr []float64) {
	var a actBuf
	cols := len(x)
	a.prepare(k, 1, cols)
	a.quantizeToken(k, 0, cols, x)
	var v actView
	a.view(k, 0, cols, x, &v)
	xq = make([]float32, cols)
	switch k {
	case actF32:
		copy(xq, x)
	case actQ8_0, actQ8_1:
		for i := range xq {
			xq[i] = float32(v.qs[i]) * v.d[i/qk]
		}
		if k == actQ8_1 {
			sCorr = make([]float64, cols/qk)
			for b := range sCorr {
				var sum int
				for _, q := range v.qs[b*qk : (b+1)*qk] {
					sum += int(q)
				}
				sCorr[b] = float64(v.s[b]) - float64(v.d[b])*float64(sum)
			}
		}
	case actQ8K:
		for i := range xq {
			xq[i] = float32(v.qs[i]) * v.d[i/qkK]
		}
	}
	return xq, sCorr
}

// quantDotRef is the float64 value MatMul approximates for one row: the
// dequantized weights against the quantized activations (plus the Q8_1
// s-rounding term). mag is Σ|w·xq|, the scale of float32 rounding.
func quantDotRef(t testing.TB, typ ggml.Type, row []byte, xq []float32, sCorr []float64) (exp, mag float64) {
	t.Helper()
	w := make([]float32, len(xq))
	if err := Dequantize(typ, row, w); err != nil {
		t.Fatal(err)
	}
	for i := range w {
		exp += float64(w[i]) * float64(xq[i])
		mag += math.Abs(float64(w[i]) * float64(xq[i]))
	}
	if sCorr != nil {
		bb := typ.BlockBytes()
		for b, c := range sCorr {
			m := F16ToF32(le16(row[b*bb+2:])) // Q4_1/Q5_1: m follows d
			exp += float64(m) * c
			mag += math.Abs(float64(m) * c)
		}
	}
	return exp, mag
}

// actErrBound bounds |MatMul - DotRef| for one row: the activation
// quantization error per element (0.57·d for Q8_0/Q8_1 with d = amax/127
// rounded to F16, 0.5·d for Q8_K) times |w|, the Q8_1 s rounding (2^-11 of
// |d·Σq| ≤ 32·amax per block, times |m|), plus float32 accumulation 2e-5·Σ|w·x|.
func actErrBound(t testing.TB, typ ggml.Type, row []byte, x []float32) float64 {
	t.Helper()
	k := kernels[typ]
	w := make([]float32, len(x))
	if err := Dequantize(typ, row, w); err != nil {
		t.Fatal(err)
	}
	blk := 0
	switch k.act {
	case actQ8_0, actQ8_1:
		blk = qk
	case actQ8K:
		blk = qkK
	}
	var bound, mag float64
	for i := range w {
		mag += math.Abs(float64(w[i]) * float64(x[i]))
	}
	if blk == 0 {
		return 2e-5*mag + 1e-6
	}
	for b := 0; b < len(x)/blk; b++ {
		var amax float64
		for _, v := range x[b*blk : (b+1)*blk] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		per := 0.5 * amax / 127
		if blk == qk {
			per = 0.57 * amax / 127
		}
		for _, v := range w[b*blk : (b+1)*blk] {
			bound += math.Abs(float64(v)) * per
		}
		if k.act == actQ8_1 {
			m := F16ToF32(le16(row[b*typ.BlockBytes()+2:]))
			bound += math.Abs(float64(m)) * 32 * amax * math.Exp2(-11)
		}
	}
	return bound + 2e-5*mag + 1e-6
}
