package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSwiGLUSIMDMatchesGo: the AVX2 SwiGLU gives swigluGo's values bit
// for bit, over normal ranges, the exp overflow/underflow ranges (the
// kernel's per-lane scaled path, alone and mixed with ordinary lanes), and
// special values.
func TestSwiGLUSIMDMatchesGo(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(41, 42))
	uniform := func(n int, lo, hi float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(lo + r.Float64()*(hi-lo))
		}
		return v
	}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	cases := []struct {
		name string
		gate []float32
	}{
		{"normal small", randVec(r, 4099, 1)},
		{"normal wide", randVec(r, 8192, 30)},
		{"scaled range", uniform(4096, -120, 120)},
		{"overflow range", uniform(4096, -250, 250)},
		{"mixed lanes", []float32{1, -100, 2, 95, -0.5, 130, -200, 3, 0.25, -0.25, 0, 0, 0, 0, 0, 87.9}},
		{"specials", []float32{0, float32(math.Copysign(0, -1)), inf, -inf, nan, 1e-40, -1e-40, 3.4e38, -3.4e38, 88.7, -88.7, 103, -104, 126, -127, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := len(c.gate)
			up := randVec(r, n, 1)
			got, want := make([]float32, n), make([]float32, n)
			SwiGLU(got, c.gate, up)
			swigluGo(want, c.gate, up)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("element %d: gate %g up %g: SIMD %g (%#x), Go %g (%#x)", i, c.gate[i], up[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		})
	}
}

// BenchmarkSwiGLUGo is the plain twin of BenchmarkSwiGLU.
func BenchmarkSwiGLUGo(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	g, u := randVec(r, 14336, 2), randVec(r, 14336, 1)
	dst := make([]float32, 14336)
	b.SetBytes(4 * 14336)
	for range b.N {
		swigluGo(dst, g, u)
	}
}

// TestAttendF16SIMD: attendF16SIMD gives AttendF16's Go arithmetic
// (attendF16Ref, its element-by-element twin) bit for bit, over GQA group
// sizes, head dimensions, KV head offsets, lengths that cross pages, and
// queries large enough to make the running maximum jump (rescales).
func TestAttendF16SIMD(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(43, 44))
	cases := []struct {
		name                       string
		g, d, kvHeads, n, pageSize int
		qScale                     float32
	}{
		{"decode_g8_d64", 8, 64, 4, 37, 16, 2},
		{"one_position", 4, 64, 2, 1, 16, 1},
		{"g1_d128", 1, 128, 3, 70, 8, 4},
		{"g2_d32_sharp", 2, 32, 2, 200, 16, 30},
		{"g4_d96", 4, 96, 1, 50, 4, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stride := c.kvHeads * c.d
			k, table, _ := pagedStore(r, c.n, c.pageSize, stride, true)
			v, _ := sameTable(r, k, table, c.n, true)
			scale := float32(1 / math.Sqrt(float64(c.d)))
			for kvh := 0; kvh < c.kvHeads; kvh++ {
				q := randVec(r, c.g*c.d, c.qScale)
				got := make([]float32, c.g*c.d)
				scratch := make([]float32, AttnScratch(c.g, c.n, c.d))
				if !attendF16SIMD(got, q, c.g, k, v, table, c.n, kvh*c.d, scale, AttnOpts{}, scratch) {
					t.Fatal("attendF16SIMD declined a supported shape")
				}
				want := make([]float32, c.g*c.d)
				attendF16Ref(want, q, c.g, k, v, table, c.n, kvh*c.d, scale, AttnOpts{})
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("kv head %d value %d: SIMD %g, twin %g", kvh, i, got[i], want[i])
					}
				}
			}
		})
	}
	// Shapes it must decline (AttendF16 then runs its Go code).
	k, table, _ := pagedStore(r, 4, 16, 48, true)
	v, _ := sameTable(r, k, table, 4, true)
	out, q := make([]float32, 48), randVec(r, 48, 1)
	if attendF16SIMD(out, q, 1, k, v, table, 4, 0, 1, AttnOpts{}, make([]float32, AttnScratch(1, 4, 48))) {
		t.Error("accepted head dimension 48")
	}
	if attendF16SIMD(out, q[:32], 1, k, v, table, 4, 0, 1, AttnOpts{}, make([]float32, 10)) {
		t.Error("accepted a short scratch")
	}
}

// TestRoundF16AVX2: the vector F16 rounding equals roundF16 on special,
// subnormal, overflow, tie and random values.
func TestRoundF16AVX2(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(45, 46))
	src := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65519, 65520, -65520, 1e10,
		float32(math.Inf(1)), float32(math.Inf(-1)), 6e-8, 3e-8, 2.9802322e-08, 5.9604645e-08, 1e-5, -1e-5,
		1 + 1.0/2048, 1 + 3.0/2048, 1e-7, 6.1035156e-05, 6.1e-05}
	for len(src)%8 != 0 {
		src = append(src, 0.5)
	}
	for i := 0; i < 4096; i++ {
		e := r.Float64()*40 - 28
		src = append(src, float32(math.Ldexp(r.Float64()*2-1, int(e))))
	}
	got := make([]float32, len(src))
	roundF16AVX2(&got[0], &src[0], len(src))
	for i, x := range src {
		if want := roundF16(x); math.Float32bits(got[i]) != math.Float32bits(want) {
			t.Fatalf("roundF16(%g): AVX2 %g, Go %g", x, got[i], want)
		}
	}
}

// TestF16UpdFMA32: the accumulator update of attnF16UpdAVX2 (float32 FMA,
// then F16) equals the Go twin's f16(float32(fma64(v, w, acc))) for F16
// acc and v and float32 w, on random values and on the far-apart scales
// where the float64 sum is inexact (|v·w| far below |acc|).
func TestF16UpdFMA32(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(49, 50))
	f16 := func() float32 { // random finite F16 value
		for {
			if x := F16ToF32(uint16(r.Uint32())); !math.IsInf(float64(x), 0) && x == x {
				return x
			}
		}
	}
	const d = 32
	acc, v16 := make([]float32, d), make([]uint16, d)
	mw := []float32{1, 0}
	for iter := 0; iter < 20000; iter++ {
		w := float32(r.Float64())
		if iter%2 == 1 { // tiny weights: v·w far below acc
			w = float32(math.Ldexp(1+r.Float64(), -20-r.IntN(40)))
		}
		mw[1] = w
		want := make([]float32, d)
		for j := range acc {
			acc[j] = f16()
			v16[j] = F32ToF16(f16())
			want[j] = roundF16(float32(math.FMA(float64(F16ToF32(v16[j])), float64(w), float64(acc[j]))))
		}
		attnF16UpdAVX2(&acc[0], &v16[0], d, 1, &mw[0])
		for j := range want {
			if math.Float32bits(acc[j]) != math.Float32bits(want[j]) {
				t.Fatalf("w %g v %g: AVX2 %g, Go %g", w, F16ToF32(v16[j]), acc[j], want[j])
			}
		}
	}
}
