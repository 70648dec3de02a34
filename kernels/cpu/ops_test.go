package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randVec(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64()) * scale
	}
	return v
}

// maxRelErr returns max |a-b| / (|b| + floor).
func maxRelErr(a, b []float32, floor float64) float64 {
	var m float64
	for i := range a {
		e := math.Abs(float64(a[i])-float64(b[i])) / (math.Abs(float64(b[i])) + floor)
		if e > m || math.IsNaN(e) {
			m = math.Max(m, e)
			if math.IsNaN(e) {
				return math.Inf(1)
			}
		}
	}
	return m
}

func TestRMSNormMatchesRef(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name  string
		n     int
		scale float32
		noW   bool
	}{
		{"dim256", 256, 1, false},
		{"odd7", 7, 3, false},
		{"one", 1, 0.5, false},
		{"large_values", 2048, 100, false},
		{"tiny_values", 64, 1e-4, false},
		{"no_weight", 96, 2, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := randVec(r, c.n, c.scale)
			var w []float32
			if !c.noW {
				w = randVec(r, c.n, 1)
			}
			got := make([]float32, c.n)
			want := make([]float32, c.n)
			RMSNorm(got, x, w, 1e-5)
			RMSNormRef(want, x, w, 1e-5)
			if e := maxRelErr(got, want, 1e-6); e > 1e-5 {
				t.Fatalf("max rel err %g", e)
			}
			// In place gives the same result.
			RMSNorm(x, x, w, 1e-5)
			for i := range x {
				if x[i] != got[i] {
					t.Fatalf("in-place differs at %d", i)
				}
			}
		})
	}
}

func TestRMSNormUnitRMS(t *testing.T) {
	x := []float32{3, -4, 0, 0}
	got := make([]float32, 4)
	RMSNorm(got, x, nil, 0)
	// rms = sqrt(25/4) = 2.5
	want := []float32{1.2, -1.6, 0, 0}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-6 {
			t.Fatalf("got %v want %v", got, want)
		}
	}
}

func TestSwiGLUMatchesRef(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, scale := range []float32{0.1, 1, 10, 60} {
		g, u := randVec(r, 515, scale), randVec(r, 515, 1) // 64 vector groups and a tail of 3
		got, want := make([]float32, 515), make([]float32, 515)
		SwiGLU(got, g, u)
		SwiGLURef(want, g, u)
		if e := maxRelErr(got, want, 1e-6); e > 1e-5 {
			t.Fatalf("scale %g: max rel err %g", scale, e)
		}
	}
	// Known values: silu(0)=0, silu(large)≈x, silu(-large)≈0.
	d := make([]float32, 3) // tail path
	SwiGLU(d, []float32{0, 50, -50}, []float32{1, 2, 3})
	if d[0] != 0 || math.Abs(float64(d[1]-100)) > 1e-4 || math.Abs(float64(d[2])) > 1e-15 {
		t.Fatalf("known values: %v", d)
	}
	d = make([]float32, 8) // vector path
	SwiGLU(d, []float32{0, 50, -50, 0, 0, 0, 0, 0}, []float32{1, 2, 3, 0, 0, 0, 0, 0})
	if d[0] != 0 || math.Abs(float64(d[1]-100)) > 1e-4 || math.Abs(float64(d[2])) > 1e-15 {
		t.Fatalf("known values (vector path): %v", d)
	}
}

// TestSwiGLUOAI: gpt-oss's clamped SwiGLU against the float64 formula
// over gates and ups that the clamps cut, and known values: the gate is
// capped at the limit only from above, the up at both ends, and the up
// is offset by 1.
func TestSwiGLUOAI(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, scale := range []float32{0.1, 1, 10} {
		g, u := randVec(r, 300, scale), randVec(r, 300, scale)
		got, want := make([]float32, 300), make([]float32, 300)
		SwiGLUOAI(got, g, u, 1.702, 7)
		SwiGLUOAIRef(want, g, u, 1.702, 7)
		if e := maxRelErr(got, want, 1e-6); e > 1e-5 {
			t.Fatalf("scale %g: max rel err %g", scale, e)
		}
	}
	d := make([]float32, 4)
	SwiGLUOAI(d, []float32{0, 20, 20, -30}, []float32{5, 20, -20, 1}, 1.702, 7)
	sig7 := 7 / (1 + math.Exp(-1.702*7))
	if d[0] != 0 || math.Abs(float64(d[1])-sig7*8) > 1e-4 || math.Abs(float64(d[2])-sig7*-6) > 1e-4 || math.Abs(float64(d[3])) > 1e-15 {
		t.Fatalf("known values: %v", d)
	}
}

// TestGeGLU: GeGLU against the float64 formula (GeGLURef) over small to
// large gates, within a few float32 ulps (relative to |gelu·up| with a
// small floor for the values near zero), at the cut-offs, and in place.
func TestGeGLU(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, scale := range []float32{0.01, 1, 4, 30} {
		g, u := randVec(r, 515, scale), randVec(r, 515, 1)
		got, want := make([]float32, 515), make([]float32, 515)
		GeGLU(got, g, u)
		GeGLURef(want, g, u)
		if e := maxRelErr(got, want, 1e-6); e > 4e-6 {
			t.Fatalf("scale %g: max rel err %g", scale, e)
		}
	}
	gate := []float32{0, 1, -1, 9.6, -9.6, 9.8, -9.8, 50, -50}
	up := []float32{1, 1, 1, 1, 1, 1, 1, 2, 3}
	got, want := make([]float32, len(gate)), make([]float32, len(gate))
	GeGLU(got, gate, up)
	GeGLURef(want, gate, up)
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*math.Abs(float64(want[i]))+1e-30 {
			t.Fatalf("gelu(%g)·%g = %g, want %g", gate[i], up[i], got[i], want[i])
		}
	}
	if got[1] < 0.841 || got[1] > 0.842 || got[7] != 100 || got[8] != 0 {
		t.Fatalf("known values: gelu(1) = %g, gelu(50)·2 = %g, gelu(−50)·3 = %g", got[1], got[7], got[8])
	}
	inPlace := append([]float32(nil), gate...)
	GeGLU(inPlace, inPlace, up)
	if i := firstDiff(inPlace, got); i >= 0 {
		t.Fatalf("in place: value %d is %g, want %g", i, inPlace[i], got[i])
	}
	// The SIMD groups and the Go twin give the same bits (large gates
	// take the exponential's scaled forms).
	for _, scale := range []float32{0.5, 3, 40, 1e4} {
		g, u := randVec(r, 515, scale), randVec(r, 515, 1)
		simd, twin := make([]float32, 515), make([]float32, 515)
		GeGLU(simd, g, u)
		geluGo(twin, g, u)
		if i := firstDiff(simd, twin); i >= 0 {
			t.Fatalf("scale %g: value %d: GeGLU %g, geluGo %g", scale, i, simd[i], twin[i])
		}
	}
}

func TestExpGGML(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for i := 0; i < 200000; i++ {
		x := float32(r.Float64()*175 - 87) // normal results only
		got := float64(expGGML(x))
		want := math.Exp(float64(x))
		// ggml documents a max error of 1.45 ulp plus 0.5 ulp rounding.
		if math.Abs(got-want) > 2*want*0x1p-23 { // 2 ulp
			t.Fatalf("expGGML(%g) = %g, want %g", x, got, want)
		}
	}
	cases := []struct {
		x    float32
		want float32
	}{{0, 1}, {1, float32(math.E)}, {-200, 0}, {100, float32(math.Inf(1))}}
	for _, c := range cases {
		got := expGGML(c.x)
		if math.Abs(float64(got-c.want)) > 1e-6*math.Max(1, float64(c.want)) && !(math.IsInf(float64(c.want), 1) && math.IsInf(float64(got), 1)) {
			t.Errorf("expGGML(%g) = %g, want %g", c.x, got, c.want)
		}
	}
}

func TestSoftmaxMatchesRef(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	cases := []struct {
		name  string
		n     int
		scale float32
	}{{"small", 5, 1}, {"vocab", 32000, 5}, {"peaked", 100, 80}, {"one", 1, 1}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := randVec(r, c.n, c.scale)
			y := append([]float32(nil), x...)
			Softmax(x)
			SoftmaxRef(y)
			var sum float64
			for i := range x {
				if math.Abs(float64(x[i]-y[i])) > 1e-6*math.Max(1, float64(y[i])*10) {
					t.Fatalf("at %d: %g vs %g", i, x[i], y[i])
				}
				sum += float64(x[i])
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Fatalf("sum %g", sum)
			}
		})
	}
}

func TestAddAndBias(t *testing.T) {
	a := []float32{1, 2, 3, 4}
	b := []float32{10, 20, 30, 40}
	Add(a, a, b)
	want := []float32{11, 22, 33, 44}
	for i := range a {
		if a[i] != want[i] {
			t.Fatalf("Add: %v", a)
		}
	}
	x := []float32{1, 1, 2, 2, 3, 3}
	AddBias(x, []float32{0.5, -1})
	wantB := []float32{1.5, 0, 2.5, 1, 3.5, 2}
	for i := range x {
		if x[i] != wantB[i] {
			t.Fatalf("AddBias: %v", x)
		}
	}
	// The SIMD groups and the tail give Go's float32 sums at every
	// length, in place too (signed zeros, infinities and NaNs included).
	r := rand.New(rand.NewPCG(23, 24))
	for n := 0; n < 70; n++ {
		p, q := randVec(r, n, 100), randVec(r, n, 1e-3)
		if n > 3 {
			p[0], q[0], p[1], q[1], p[2], q[2] = float32(math.Copysign(0, -1)), 0, float32(math.Inf(1)), float32(math.Inf(-1)), 1e38, 1e38
		}
		got := make([]float32, n)
		Add(got, p, q)
		for i := range got {
			want := p[i] + q[i]
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d value %d: %g + %g = %g, want %g", n, i, p[i], q[i], got[i], want)
			}
		}
		Add(p, p, q)
		for i := range p {
			if math.Float32bits(p[i]) != math.Float32bits(got[i]) {
				t.Fatalf("n=%d value %d: in place %g, want %g", n, i, p[i], got[i])
			}
		}
	}
}

func TestRopeMatchesRef(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	factors := make([]float32, 32)
	for i := range factors {
		factors[i] = 1 + float32(i)/4
	}
	cases := []struct {
		name      string
		heads, hd int
		nRot      int
		base      float32
		freqScale float32
		factors   []float32
		neox      bool
	}{
		{"llama_adjacent", 4, 64, 64, 10000, 1, nil, false},
		{"qwen_neox", 4, 64, 64, 1e6, 1, nil, true},
		{"partial_rot", 2, 64, 32, 10000, 1, nil, false},
		{"partial_rot_neox", 2, 64, 32, 10000, 1, nil, true},
		{"linear_scaling", 2, 64, 64, 10000, 0.25, nil, false},
		{"freq_factors", 2, 64, 64, 500000, 1, factors, true},
		{"head128", 2, 128, 128, 10000, 1, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, pos := range []int32{0, 1, 17, 300, 1500} {
				x := randVec(r, c.heads*c.hd, 1)
				want := append([]float32(nil), x...)
				cs := make([]float32, c.nRot)
				RopeCache(cs, pos, c.nRot, c.base, c.freqScale, c.factors)
				Rope(x, c.heads, c.hd, c.nRot, cs, c.neox)
				RopeRef(want, c.heads, c.hd, c.nRot, pos, c.base, c.freqScale, c.factors, c.neox)
				// ggml's float32 angle recurrence drifts by ~1e-7 relative per
				// step, so the angle error grows with the position.
				tol := 1e-5 + 4e-6*float64(pos)
				for i := range x {
					if e := math.Abs(float64(x[i] - want[i])); e > tol {
						t.Fatalf("pos %d idx %d: %g vs %g (tol %g)", pos, i, x[i], want[i], tol)
					}
				}
			}
		})
	}
}

func TestRopeLayouts(t *testing.T) {
	// One head of 4 values at pos 1 with base 1: every pair turns by 1 radian
	// (theta_j = 1 * 1^(...)). Adjacent layout pairs (0,1),(2,3); NeoX (0,2),(1,3).
	c, s := float32(math.Cos(1)), float32(math.Sin(1))
	cs := make([]float32, 4)
	RopeCache(cs, 1, 4, 1, 1, nil)
	x := []float32{1, 0, 0, 1}
	Rope(x, 1, 4, 4, cs, false)
	want := []float32{c, s, -s, c}
	for i := range x {
		if math.Abs(float64(x[i]-want[i])) > 1e-6 {
			t.Fatalf("adjacent: got %v want %v", x, want)
		}
	}
	x = []float32{1, 0, 0, 1}
	Rope(x, 1, 4, 4, cs, true)
	want = []float32{c, -s, s, c}
	for i := range x {
		if math.Abs(float64(x[i]-want[i])) > 1e-6 {
			t.Fatalf("neox: got %v want %v", x, want)
		}
	}
}

func TestRopePassThrough(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	x := randVec(r, 64, 1)
	orig := append([]float32(nil), x...)
	cs := make([]float32, 32)
	RopeCache(cs, 42, 32, 10000, 1, nil)
	Rope(x, 1, 64, 32, cs, false)
	for i := 32; i < 64; i++ {
		if x[i] != orig[i] {
			t.Fatalf("value %d past nRot changed", i)
		}
	}
	for j := 0; j < 16; j++ {
		n0 := orig[2*j]*orig[2*j] + orig[2*j+1]*orig[2*j+1]
		n1 := x[2*j]*x[2*j] + x[2*j+1]*x[2*j+1]
		if math.Abs(float64(n0-n1)) > 1e-5*float64(n0+1) {
			t.Fatalf("pair %d norm changed: %g -> %g", j, n0, n1)
		}
	}
}

// TestRopeCacheMatchesGGMLRecurrence pins the float32 recurrence: the angle
// of pair j is pos * s^j with s rounded to float32 and each product rounded.
func TestRopeCacheMatchesGGMLRecurrence(t *testing.T) {
	cs := make([]float32, 64)
	RopeCache(cs, 1000, 64, 10000, 1, nil)
	s := float32(math.Pow(10000, -2.0/64))
	theta := float32(1000)
	for j := 0; j < 32; j++ {
		if cs[2*j] != float32(math.Cos(float64(theta))) {
			t.Fatalf("pair %d: cos %g, want cos(%g)", j, cs[2*j], theta)
		}
		theta *= s
	}
}

// TestRopeCacheYaRN: YaRN's angles and scale against the float64 formula,
// the correction range against ggml's worked values, and with no pair in
// the extrapolated range and MScale 1 it is RopeCache bit for bit.
func TestRopeCacheYaRN(t *testing.T) {
	const nRot, base, scale = 64, 10000, 0.25
	lo, hi := YaRNCorrDims(nRot, 4096, base, 32, 1)
	// 64·ln(4096/(32·2π))/(2·ln 10000) = 10.47 → 10; 64·ln(4096/2π)/(2·ln 10000) = 22.5 → 23.
	if lo != 10 || hi != 23 {
		t.Fatalf("corr dims %g, %g; want 10, 23", lo, hi)
	}
	y := YaRN{CorrLow: lo, CorrHigh: hi, MScale: 1.1386}
	cs := make([]float32, nRot)
	for _, pos := range []int32{0, 1, 17, 1000} {
		RopeCacheYaRN(cs, pos, nRot, base, scale, nil, y)
		for j := 0; j < nRot/2; j++ {
			extrap := float64(pos) * math.Pow(base, -2*float64(j)/nRot)
			mix := 1 - math.Min(1, math.Max(0, (float64(j)-float64(lo))/(float64(hi)-float64(lo))))
			theta := scale*extrap*(1-mix) + extrap*mix
			wc, ws := math.Cos(theta)*float64(y.MScale), math.Sin(theta)*float64(y.MScale)
			if math.Abs(float64(cs[2*j])-wc) > 2e-4 || math.Abs(float64(cs[2*j+1])-ws) > 2e-4 {
				t.Fatalf("pos %d pair %d: (%g, %g), want (%g, %g)", pos, j, cs[2*j], cs[2*j+1], wc, ws)
			}
		}
	}
	plain := make([]float32, nRot)
	for _, pos := range []int32{3, 999} {
		RopeCacheYaRN(cs, pos, nRot, base, scale, nil, YaRN{CorrLow: -2, CorrHigh: -1, MScale: 1})
		RopeCache(plain, pos, nRot, base, scale, nil)
		for i := range cs {
			if cs[i] != plain[i] {
				t.Fatalf("pos %d value %d: %g, RopeCache %g", pos, i, cs[i], plain[i])
			}
		}
	}
}

func TestLayerNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 7, 384, 1027} {
		for _, offset := range []float32{0, 3, -40} { // a large mean tests the centring
			x := randVec(r, n, 2)
			for i := range x {
				x[i] += offset
			}
			w, b := randVec(r, n, 1), randVec(r, n, 0.5)
			for _, wb := range [][2][]float32{{w, b}, {nil, nil}, {w, nil}} {
				got, want := make([]float32, n), make([]float32, n)
				LayerNorm(got, x, wb[0], wb[1], 1e-12)
				LayerNormRef(want, x, wb[0], wb[1], 1e-12)
				if n == 1 { // one value: centred to 0, only the bias remains
					if got[0] != want[0] {
						t.Fatalf("n=1: got %g, want %g", got[0], want[0])
					}
					continue
				}
				for i := range got {
					if d := math.Abs(float64(got[i] - want[i])); d > 2e-5*(1+math.Abs(float64(want[i]))) {
						t.Fatalf("n=%d offset %g: value %d is %g, want %g", n, offset, i, got[i], want[i])
					}
				}
			}
		}
	}
	// Known values: [1, 2, 3] has mean 2 and variance 2/3.
	got := make([]float32, 3)
	LayerNorm(got, []float32{1, 2, 3}, []float32{1, 2, 1}, []float32{0, 0, 1}, 0)
	s := float32(math.Sqrt(1.5))
	if math.Abs(float64(got[0]+s)) > 1e-6 || got[1] != 0 || math.Abs(float64(got[2]-(s+1))) > 1e-6 {
		t.Fatalf("LayerNorm([1 2 3]) = %v, want [%g 0 %g]", got, -s, s+1)
	}
	in := []float32{1, 2, 3}
	LayerNorm(in, in, nil, nil, 0) // in place
	if math.Abs(float64(in[0]+s)) > 1e-6 {
		t.Fatalf("in place: %v", in)
	}
}

func TestGELU(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, scale := range []float32{0.01, 1, 4, 30} {
		x := randVec(r, 515, scale)
		got, want := make([]float32, 515), make([]float32, 515)
		GELU(got, x)
		GELURef(want, x)
		if e := maxRelErr(got, want, 1e-6); e > 4e-6 {
			t.Fatalf("scale %g: max rel err %g", scale, e)
		}
		// GELU is GeGLU with an up projection of ones, bit for bit.
		ones := make([]float32, len(x))
		for i := range ones {
			ones[i] = 1
		}
		glu := make([]float32, len(x))
		geluGo(glu, x, ones)
		if i := firstDiff(got, glu); i >= 0 {
			t.Fatalf("scale %g: value %d is %g, GeGLU's %g", scale, i, got[i], glu[i])
		}
	}
	got := make([]float32, 3)
	GELU(got, []float32{1, 50, -50})
	if got[0] < 0.841 || got[0] > 0.842 || got[1] != 50 || got[2] != 0 {
		t.Fatalf("gelu(1), gelu(50), gelu(-50) = %v", got)
	}
}
