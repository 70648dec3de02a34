package cpu

import (
	"bufio"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"oengine/ggml"
)

// fmaExact is a·b+c rounded once to float32 with exact arithmetic
// (math/big), the plain twin of fmaF32.
func fmaExact(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
	f, _ := x.Float32() // round to nearest even
	return f
}

func TestFmaF32MatchesExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(a, b, c float32) {
		t.Helper()
		if got, want := fmaF32(a, b, c), fmaExact(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fmaF32(%g, %g, %g) = %g, exact %g", a, b, c, got, want)
		}
	}
	// Halfway cases for a double-rounding fma: a·b+c lands exactly between
	// two float32 in float64 but the exact value lies just off it.
	check(1+0x1p-23, 1+0x1p-23, 0x1p-24) // 1 + 2^-22 + 2^-46 + 2^-24
	check(1+0x1p-12, 1+0x1p-12, -0x1p-24)
	check(3, 1.0/3, -1)
	for i := 0; i < 200000; i++ {
		a := float32(r.NormFloat64())
		b := float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(20)-10)))
		c := float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(40)-20)))
		if i%4 == 0 { // near-cancelling c
			c = -a * b * (1 + float32(r.NormFloat64())*1e-6)
		}
		check(a, b, c)
	}
}

// TestSincosfGlibc compares sincosfGlibc with glibc's own results
// (testdata/ggml_sincosf.txt), bit for bit.
func TestSincosfGlibc(t *testing.T) {
	f, err := os.Open("testdata/ggml_sincosf.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, crDiff := 0, 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		var xb, sb, cb uint32
		if _, err := fmt.Sscanf(line, "%x %x %x", &xb, &sb, &cb); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		x := math.Float32frombits(xb)
		s, c := sincosfGlibc(x)
		if math.Float32bits(s) != sb || math.Float32bits(c) != cb {
			t.Fatalf("sincosf(%g): got %g %g, glibc %g %g", x, s, c, math.Float32frombits(sb), math.Float32frombits(cb))
		}
		if float32(math.Sin(float64(x))) != s || float32(math.Cos(float64(x))) != c {
			crDiff++
		}
		n++
	}
	if n < 1000 || crDiff < n/2 {
		t.Fatalf("golden file too small or not discriminating: %d lines, %d differ from correctly rounded", n, crDiff)
	}
}

func TestGGMLRopeCacheAngles(t *testing.T) {
	a, b := make([]float32, 64), make([]float32, 64)
	for _, pos := range []int32{0, 1, 17, 999, 2047} {
		RopeCache(a, pos, 64, 10000, 1, nil)
		GGMLRopeCache(b, pos, 64, 10000, 1, nil)
		for j := range a { // same angles; libm rounding apart
			if d := math.Abs(float64(a[j] - b[j])); d > 1.2e-7 {
				t.Fatalf("pos %d [%d]: %g vs %g", pos, j, a[j], b[j])
			}
		}
	}
}

// TestGGMLMatMulVsRef checks GGMLMat.MatMul's emulated kernels against the
// float64 dot of the dequantized weights and quantized activations: they
// use the same integer sums as MatMul, so only float32 summation order may
// differ. A layout mistake gives errors of the order of the values.
func TestGGMLMatMulVsRef(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p := NewPool(2)
	defer p.Close()
	for _, typ := range []ggml.Type{ggml.TypeQ8_0, ggml.TypeQ6_K, ggml.TypeQ4_K, ggml.TypeF16} {
		for _, n := range []int{1, 3, 4, 7} { // Q4_K: gemv only, gemv only, gemm only, gemm + 3 gemv; F16: gemv, then tinyBLAS
			t.Run(fmt.Sprintf("%s/n%d", typ, n), func(t *testing.T) {
				rows, cols := 24, 512
				w := randMatrix(t, r, typ, rows, cols)
				x := randNormal(r, n*cols, 1)
				var g GGMLMat
				got := make([]float32, n*rows)
				g.MatMul(p, got, w, x, n)
				want := make([]float32, n*rows)
				p.MatMul(want, w, x, n)
				for i := 0; i < n; i++ {
					xi := x[i*cols : (i+1)*cols]
					k := kernels[typ].act
					xq, sCorr := quantActRef(k, xi)
					for rr := 0; rr < rows; rr++ {
						v := got[i*rows+rr]
						if typ == ggml.TypeF16 { // activations rounded to F16: compare with that
							xq = make([]float32, cols)
							for j := range xq {
								xq[j] = roundF16(xi[j])
							}
							sCorr = nil
						}
						exp, mag := quantDotRef(t, typ, w.Row(rr), xq, sCorr)
						if d := math.Abs(float64(v) - exp); d > 2e-6*mag+1e-6 {
							t.Fatalf("token %d row %d: %g, exact %g (mag %g)", i, rr, v, exp, mag)
						}
					}
				}
			})
		}
	}
}

// TestGGMLQ4KGemmDiffersFromGemv pins that the two Q4_K forms really are
// different roundings of the same sum (llama.cpp's batch dependence), so
// GGMLMat.MatMul must pick per token.
func TestGGMLQ4KGemmDiffersFromGemv(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	w := randMatrix(t, r, ggml.TypeQ4_K, 64, 1024)
	differ := 0
	for i := 0; i < 8; i++ {
		x := randNormal(r, 1024, 1)
		qs, d, bs := make([]int8, 1024), make([]float32, 4), make([]int16, 64)
		quantRowQ8K(x, qs, d, bs)
		for rr := 0; rr < w.Rows; rr++ {
			a := ggmlDotQ4_K(w.Row(rr), qs, d, bs, false)
			b := ggmlDotQ4_K(w.Row(rr), qs, d, bs, true)
			if a != b {
				differ++
			}
			if math.Abs(float64(a-b)) > 1e-5*math.Abs(float64(a))+1e-5 {
				t.Fatalf("gemm %g vs gemv %g", b, a)
			}
		}
	}
	if differ == 0 {
		t.Fatal("gemm and gemv forms never differ: the per-64 accumulation is not in effect")
	}
}

func TestGGMLAttentionVsRef(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		name string
		g, n int
	}{{"one", 1, 1}, {"tile_edge", 2, 64}, {"three_tiles", 2, 150}, {"split", 4, 700}} {
		t.Run(c.name, func(t *testing.T) {
			d, kvHeads := 64, 2
			stride := kvHeads * d
			k, table, _ := pagedStore(r, c.n, 16, stride, true)
			v, _ := sameTable(r, k, table, c.n, true)
			scale := float32(0.125)
			scratch := make([]float32, AttnScratch(c.g, c.n, d))
			for kvh := 0; kvh < kvHeads; kvh++ {
				q := randVec(r, c.g*d, 2)
				want := make([]float32, c.g*d)
				AttendRef(want, q, c.g, k, v, table, c.n, kvh*d, scale)
				tiled := make([]float32, c.g*d)
				AttendGGMLTiled(tiled, q, c.g, k, v, table, c.n, kvh*d, scale, scratch)
				split := make([]float32, c.g*d)
				GGMLSplitKV{Threads: 2}.Attend(split, q, c.g, k, v, table, c.n, kvh*d, scale, scratch)
				for i := range want {
					if e := math.Abs(float64(tiled[i] - want[i])); e > 2e-5 {
						t.Fatalf("tiled: kv head %d idx %d: %g vs %g", kvh, i, tiled[i], want[i])
					}
					if e := math.Abs(float64(split[i] - want[i])); e > 4e-3 {
						t.Fatalf("split: kv head %d idx %d: %g vs %g", kvh, i, split[i], want[i])
					}
				}
				// One chunk (one thread) is exactly the one-row F16 path.
				one := make([]float32, c.g*d)
				GGMLSplitKV{Threads: 1}.Attend(one, q, c.g, k, v, table, c.n, kvh*d, scale, scratch)
				f16 := make([]float32, c.g*d)
				AttendF16(f16, q, c.g, k, v, table, c.n, kvh*d, scale, scratch)
				if i := firstDiff(one, f16); i >= 0 {
					t.Fatalf("one-chunk split differs from AttendF16 at %d: %g vs %g", i, one[i], f16[i])
				}
			}
		})
	}
}

func TestGGMLKVView(t *testing.T) {
	for _, c := range [][2]int{{1, 256}, {256, 256}, {257, 512}, {969, 1024}} {
		if got := GGMLKVView(c[0]); got != c[1] {
			t.Errorf("GGMLKVView(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

// dotF16Order512Ref is dotF16Order512's plain twin: accumulator j, lane l
// summed over the 64-steps, the tree written out index by index.
func dotF16Order512Ref(a, b []float32) float32 {
	var lane [4][16]float32
	np := len(a) / 64 * 64
	for t := 0; t < np; t += 64 {
		for j := 0; j < 4; j++ {
			for l := 0; l < 16; l++ {
				lane[j][l] += a[t+16*j+l] * b[t+16*j+l]
			}
		}
	}
	var x [16]float32
	for l := 0; l < 16; l++ {
		x[l] = (lane[0][l] + lane[2][l]) + (lane[1][l] + lane[3][l])
	}
	h := [8]float32{}
	for i := 0; i < 8; i++ {
		h[i] = x[i+8] + x[i]
	}
	q := [4]float32{h[4] + h[0], h[5] + h[1], h[6] + h[2], h[7] + h[3]}
	sum := float64((q[0] + q[2]) + (q[1] + q[3]))
	for i := np; i < len(a); i++ {
		sum += float64(a[i] * b[i])
	}
	return float32(sum)
}

func TestDotF16Order512(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	differ := 0
	for _, n := range []int{64, 128, 80, 256, 30} {
		for it := 0; it < 200; it++ {
			a, b := make([]float32, n), make([]float32, n)
			var exact float64
			for i := range a {
				a[i], b[i] = roundF16(float32(r.NormFloat64())), roundF16(float32(r.NormFloat64()))
				exact += float64(a[i]) * float64(b[i])
			}
			got := dotF16Order512(a, b)
			if twin := dotF16Order512Ref(a, b); math.Float32bits(got) != math.Float32bits(twin) {
				t.Fatalf("n %d: %g vs twin %g", n, got, twin)
			}
			if math.Abs(float64(got)-exact) > 1e-5*float64(n) {
				t.Fatalf("n %d: %g vs exact %g", n, got, exact)
			}
			if got != dotF16Order(a, b) {
				differ++
			}
		}
	}
	if differ == 0 {
		t.Fatal("AVX-512 order never differs from the AVX2 one")
	}
}

func TestGGMLSplitKVAVX512VsRef(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	d, g, n := 64, 2, 600
	k, table, _ := pagedStore(r, n, 16, d, true)
	v, _ := sameTable(r, k, table, n, true)
	q := randVec(r, g*d, 2)
	want, got := make([]float32, g*d), make([]float32, g*d)
	AttendRef(want, q, g, k, v, table, n, 0, 0.125)
	for _, threads := range []int{1, 2} {
		GGMLSplitKV{Threads: threads, AVX512: true}.Attend(got, q, g, k, v, table, n, 0, 0.125, nil)
		for i := range want {
			if e := math.Abs(float64(got[i] - want[i])); e > 1.5e-2 { // F16 accumulator over 600 positions
				t.Fatalf("threads %d idx %d: %g vs %g", threads, i, got[i], want[i])
			}
		}
	}
}
