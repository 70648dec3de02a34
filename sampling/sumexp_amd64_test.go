package sampling

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSumExpNegLanesBitwise: each lane of sumExpNegAVX2 computes expNeg's
// bits. A block of four with one live lane (the others −Inf, which add
// +0) sums to that lane's exponential exactly, at every lane position,
// over the range, its ends and the rounding constant's edge cases.
func TestSumExpNegLanesBitwise(t *testing.T) {
	if !sumExpAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []float32{0, -0.5, -1, -math.Ln2 / 2, -math.Ln2, -707.9, -708, -708.1, -745, float32(math.Inf(-1)), -1e-30, -87.3}
	for i := 0; i < 20000; i++ {
		xs = append(xs, -float32(rng.Float64()*750), -float32(rng.ExpFloat64()))
	}
	ninf := float32(math.Inf(-1))
	for _, x := range xs {
		for lane := 0; lane < 4; lane++ {
			z := []float32{ninf, ninf, ninf, ninf}
			z[lane] = x
			got, want := sumExpNegAVX2(&z[0], 4, 0), expNeg(float64(x))
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("x = %v in lane %d: %v (%#x), expNeg %v (%#x)", x, lane, got, math.Float64bits(got), want, math.Float64bits(want))
			}
		}
	}
}

// TestSumExpNeg: the sum over rows of every length up to a few blocks and
// a vocabulary's, against the plain twin (same exponentials, added in
// another order: within a few ulps of the total).
func TestSumExpNeg(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 3, 4, 5, 7, 8, 9, 31, 32, 33, 100, 32000, 151936} {
		z := make([]float32, n)
		for i := range z {
			z[i] = float32(rng.NormFloat64() * 4)
			if i%97 == 5 {
				z[i] = float32(math.Inf(-1))
			}
		}
		m := float32(math.Inf(-1))
		for _, x := range z {
			m = max(m, x)
		}
		if n == 0 {
			m = 0
		}
		got, want := sumExpNeg(z, float64(m)), sumExpNegGo(z, float64(m))
		if math.Abs(got-want) > 1e-13*want {
			t.Fatalf("n %d: %v, plain %v", n, got, want)
		}
	}
}

func BenchmarkSumExpNeg(b *testing.B) {
	z := make([]float32, 32000)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range z {
		z[i] = float32(rng.NormFloat64()*4) - 20
	}
	for _, c := range []struct {
		name string
		f    func([]float32, float64) float64
	}{{"simd", sumExpNeg}, {"plain", sumExpNegGo}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = c.f(z, 0)
			}
		})
	}
}

// TestExpNegScaledBitwise: expNegScaled writes the plain twin's bits for
// every token at or below m, over lengths with and without a tail, the
// temperatures of sampling and −Inf logits.
func TestExpNegScaledBitwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 3, 4, 5, 8, 33, 1000, 32000} {
		for _, temp := range []float64{0.05, 0.7, 1, 1.3, 20} {
			z := make([]float32, n)
			m := float32(math.Inf(-1))
			for i := range z {
				z[i] = float32(rng.NormFloat64() * 6)
				if i%53 == 7 {
					z[i] = float32(math.Inf(-1))
				}
				m = max(m, z[i])
			}
			got, want := make([]float64, n), make([]float64, n)
			expNegScaled(got, z, float64(m), 1/temp)
			expNegScaledGo(want, z, float64(m), 1/temp)
			for i := range z {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("n %d T %v: w[%d] (z %v) = %v, plain %v", n, temp, i, z[i], got[i], want[i])
				}
			}
		}
	}
}
