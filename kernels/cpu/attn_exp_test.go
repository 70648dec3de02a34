package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttnExpBitwise: the softmax exponential pass (eight float32 lanes in
// assembly where available, 16 with AVX-512) gives bit for bit the scalar expAttn pass:
// every e and every per-head sum, across the whole float32 range of
// differences s − max, including the underflow edge, −Inf, NaN and
// heads that are not a multiple of four (scalar path).
func TestAttnExpBitwise(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	specials := []float32{0, -0, 1e-30, -1e-30, -103.9, -104, -104.1, -700, -699.99, -700.01,
		-708.4, -745.2, -800, -1e30, float32(math.Inf(-1)), float32(math.NaN()), 3, 88.7, 700.5}
	cases := []struct {
		name   string
		n, g   int
		spread float64 // scores are spread·N(0,1)
	}{
		{"typical g8", 300, 8, 3},
		{"wide g4", 257, 4, 200},
		{"huge g12", 100, 12, 1e4},
		{"one position", 1, 8, 1},
		{"scalar g5", 50, 5, 10},
		{"g16", 64, 16, 30},
		{"g32", 300, 32, 30},
		{"g48 one position", 1, 48, 3},
	}
	defer func(on bool) { attnZOn = on }(attnZOn)
	for _, c := range cases {
		for _, z := range attnLevels() {
			attnZOn = z
			t.Run(fmt.Sprintf("%s/z%v", c.name, z), func(t *testing.T) { testAttnExp(t, r, specials, c.n, c.g, c.spread) })
		}
	}
}

// testAttnExp is TestAttnExpBitwise for n positions of g heads, scores
// spread·N(0,1), at the current attnZOn.
func testAttnExp(t *testing.T, r *rand.Rand, specials []float32, n, g int, spread float64) {
	s := make([]float32, n*g)
	for i := range s {
		s[i] = float32(r.NormFloat64() * spread)
	}
	m := make([]float32, g)
	for h := range m {
		m[h] = float32(r.NormFloat64() * spread)
	}
	if n > 20 { // specials as differences: s = m + x
		for i, x := range specials {
			p := (7 * i) % n
			h := i % g
			s[p*g+h] = m[h] + x
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				s[p*g+h] = x
			}
		}
	}
	sameAttnExp(t, s, g, m)
}

// sameAttnExp fails t unless attnExp over the scores s ([n][g]) with
// maxima m gives every e and every head's sum bit for bit as the scalar
// pass attnExpGo does.
func sameAttnExp(t *testing.T, s []float32, g int, m []float32) {
	t.Helper()
	got, want := append([]float32(nil), s...), append([]float32(nil), s...)
	gs, ws := make([]float64, g), make([]float64, g)
	attnExp(got, g, m, gs)
	attnExpGo(want, g, m, ws)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("position %d head %d: x = %g: e = %g (%#x), scalar gives %g (%#x)",
				i/g, i%g, s[i]-m[i%g], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
	for h := range gs {
		if math.Float64bits(gs[h]) != math.Float64bits(ws[h]) {
			t.Fatalf("head %d: sum %g, scalar %g", h, gs[h], ws[h])
		}
	}
}

// TestAttnExpDense sweeps differences densely over [−110, 0] (where the
// float32 results are nonzero) and compares with the scalar pass bit for
// bit.
func TestAttnExpDense(t *testing.T) {
	const g = 8
	n := 1 << 14
	if testing.Short() {
		n = 1 << 11
	}
	s := make([]float32, n*g)
	m := make([]float32, g)
	for i := range s {
		s[i] = -110 * float32(i) / float32(len(s))
	}
	sameAttnExp(t, s, g, m)
}

// TestExpAttnAccuracy: expAttn is within 2 float32 ulps of exp over
// [−87, 0] (the softmax's range; x = s − max), 0 below, 1 above.
func TestExpAttnAccuracy(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 1<<20; i++ {
		x := -87 * float32(i) / (1 << 20)
		got := float64(expAttn(x))
		want := math.Exp(float64(x))
		ulp := float64(math.Nextafter32(float32(want), 1)) - float64(float32(want))
		if e := math.Abs(got-want) / ulp; e > worst {
			worst = e
		}
	}
	if worst > 2 {
		t.Fatalf("worst error %.2f ulp", worst)
	}
	t.Logf("worst error %.2f ulp", worst)
	for _, c := range []struct{ x, want float32 }{{-87.01, 0}, {float32(math.Inf(-1)), 0}, {0, 1}, {5, 1}} {
		if got := expAttn(c.x); got != c.want {
			t.Fatalf("expAttn(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	if nan := float32(math.NaN()); !math.IsNaN(float64(expAttn(nan))) {
		t.Fatal("expAttn(NaN) is not NaN")
	}
}

// BenchmarkAttnExp: the softmax exponentials of one query group (8 heads ×
// 512 positions), vector pass against the scalar twin; ns per exponential.
func BenchmarkAttnExp(b *testing.B) {
	const g, n = 8, 512
	r := rand.New(rand.NewPCG(73, 74))
	s0 := make([]float32, n*g)
	for i := range s0 {
		s0[i] = float32(-5 * r.Float64())
	}
	m := make([]float32, g)
	sums := make([]float64, g)
	s := make([]float32, n*g)
	for _, v := range []struct {
		name string
		f    func([]float32, int, []float32, []float64)
	}{{"vector", attnExp}, {"scalar", attnExpGo}} {
		b.Run(fmt.Sprint(v.name), func(b *testing.B) {
			best := bestOf(b, func() {
				copy(s, s0)
				v.f(s, g, m, sums)
			})
			b.ReportMetric(best/float64(n*g), "ns/exp-best")
		})
	}
}
