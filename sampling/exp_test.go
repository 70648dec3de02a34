package sampling

import (
	"math"
	"testing"
)

func TestExpNegMatchesMathExp(t *testing.T) {
	r := newRand(8)
	check := func(x float64) {
		t.Helper()
		got, want := expNeg(x), math.Exp(x)
		if want == 0 || x < -708 {
			if got != 0 && got > 1e-300 {
				t.Fatalf("expNeg(%v) = %v, want ~0", x, got)
			}
			return
		}
		if rel := math.Abs(got-want) / want; rel > 1e-13 {
			t.Fatalf("expNeg(%v) = %v, math.Exp = %v (rel err %g)", x, got, want, rel)
		}
	}
	for _, x := range []float64{0, -0.0, -1e-300, -0.34657359, -0.34657360, -1, -math.Ln2, -20.5, -87.3, -103.9, -700, -707.9, -708, -708.1, -745, math.Inf(-1)} {
		check(x)
	}
	for range 50000 {
		check(-r.Float64() * 750)
		check(-r.ExpFloat64())
	}
}

func FuzzExpNeg(f *testing.F) {
	f.Add(0.0)
	f.Add(-1.5)
	f.Add(-708.0)
	f.Fuzz(func(t *testing.T, x float64) {
		if math.IsNaN(x) || x > 0 {
			return
		}
		got, want := expNeg(x), math.Exp(x)
		if x < -708 {
			if got != 0 {
				t.Fatalf("expNeg(%v) = %v, want 0", x, got)
			}
			return
		}
		if math.Abs(got-want) > 1e-13*want {
			t.Fatalf("expNeg(%v) = %v, math.Exp = %v", x, got, want)
		}
	})
}
