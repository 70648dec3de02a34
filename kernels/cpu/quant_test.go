package cpu

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestQuantizeRoundTrip bounds the error of Quantize→Dequantize on random
// normal data (σ = 1): the RMS error and the worst error relative to the
// block's largest magnitude. RMS bounds are about 1.4x what was measured.
func TestQuantizeRoundTrip(t *testing.T) {
	cases := []struct {
		typ          ggml.Type
		rms, maxRel  float64 // RMS error / σ, max |err| / block amax
		exactOnBlock bool
	}{
		{ggml.TypeF32, 0, 0, true},
		{ggml.TypeF16, 4e-4, 5e-4, false},
		{ggml.TypeBF16, 3e-3, 4e-3, false},
		{ggml.TypeQ8_0, 0.006, 0.0045, false},
		// Legacy max errors are structural: Q4_0 clamps -vmax to 7·d (amax/8),
		// Q4_1 half a step of (max-min)/15 ≤ amax/15, Q5_0 amax/16, Q5_1 amax/31.
		{ggml.TypeQ4_0, 0.12, 0.126, false},
		{ggml.TypeQ4_1, 0.10, 0.068, false},
		{ggml.TypeQ5_0, 0.06, 0.063, false},
		{ggml.TypeQ5_1, 0.05, 0.033, false},
		{ggml.TypeQ2_K, 0.45, 0.5, false},
		{ggml.TypeQ3_K, 0.25, 0.3, false},
		{ggml.TypeQ4_K, 0.12, 0.12, false},
		{ggml.TypeQ5_K, 0.06, 0.06, false},
		{ggml.TypeQ6_K, 0.03, 0.03, false},
		// IQ4: the widest gap between levels is 24 of 127 (amax/10.6 at the
		// fitted scale); measured 0.074 / 0.114 for both.
		{ggml.TypeIQ4_NL, 0.1, 0.16, false},
		{ggml.TypeIQ4_XS, 0.1, 0.16, false},
		// MXFP4: a power-of-two scale and levels 0-12 whose widest gap is
		// 4 (8 to 12), and the scale that errs least overall, which may
		// clip the largest value; measured 0.112 / 0.200.
		{ggml.TypeMXFP4, 0.12, 0.21, false},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 64 * 256
	x := randNormal(rng, n, 1)
	for _, c := range cases {
		t.Run(c.typ.String(), func(t *testing.T) {
			if !CanQuantize(c.typ) {
				t.Fatal("CanQuantize false")
			}
			rb, _ := c.typ.RowBytes(n)
			enc := make([]byte, rb)
			if err := Quantize(c.typ, x, enc); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, n)
			if err := Dequantize(c.typ, enc, y); err != nil {
				t.Fatal(err)
			}
			be := max(c.typ.BlockElems(), 32)
			var se, worst float64
			for b := 0; b < n/be; b++ {
				amax, _ := absMax(x[b*be : (b+1)*be])
				for i := b * be; i < (b+1)*be; i++ {
					e := math.Abs(float64(y[i] - x[i]))
					se += e * e
					worst = math.Max(worst, e/float64(amax))
				}
			}
			rms := math.Sqrt(se / n)
			t.Logf("rms %.4g max/amax %.4g", rms, worst)
			if c.exactOnBlock && (rms != 0 || worst != 0) {
				t.Fatalf("not exact: rms %g", rms)
			}
			if rms > c.rms || worst > c.maxRel {
				t.Fatalf("rms %.4g (bound %g), max/amax %.4g (bound %g)", rms, c.rms, worst, c.maxRel)
			}
		})
	}
}

// TestRequantizeGolden re-encodes the decoded llama.cpp blocks: for the
// legacy types, where ggml's rounding is deterministic, our encoder must
// give back the very same bytes.
func TestRequantizeGolden(t *testing.T) {
	for _, name := range []string{"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"} {
		t.Run(name, func(t *testing.T) {
			gd := loadGolden(t, name)
			enc := make([]byte, len(gd.m.Data))
			if err := Quantize(gd.m.Type, gd.want, enc); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, gd.m.Data) {
				bb := gd.m.Type.BlockBytes()
				diff := 0
				for o := 0; o < len(enc); o += bb {
					if !bytes.Equal(enc[o:o+bb], gd.m.Data[o:o+bb]) {
						diff++
					}
				}
				t.Fatalf("%d of %d blocks differ", diff, len(enc)/bb)
			}
		})
	}
}

func TestQuantizeErrors(t *testing.T) {
	cases := []struct {
		name    string
		typ     ggml.Type
		n, have int
		err     error
	}{
		{"partial block", ggml.TypeQ4_0, 33, 1000, nil},
		{"short dst", ggml.TypeQ4_0, 64, 35, nil},
		{"unsupported", ggml.TypeIQ2_XXS, 256, 1000, ErrType},
		{"no encoder for Q8_1", ggml.TypeQ8_1, 32, 100, ErrType},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Quantize(c.typ, make([]float32, c.n), make([]byte, c.have))
			if err == nil {
				t.Fatal("no error")
			}
			if c.err != nil && !errors.Is(err, c.err) {
				t.Fatalf("error %v is not %v", err, c.err)
			}
			if derr := Dequantize(c.typ, make([]byte, c.have), make([]float32, c.n)); derr == nil {
				t.Fatal("Dequantize: no error")
			}
			if !math.IsNaN(DotRef(c.typ, make([]byte, c.have), make([]float32, c.n))) {
				t.Fatal("DotRef: want NaN")
			}
		})
	}
	if CanQuantize(ggml.TypeIQ2_XXS) {
		t.Error("CanQuantize(IQ2_XXS)")
	}
}

// TestQuantizeSpecialBlocks: all-zero and constant blocks encode without
// NaN and decode to (nearly) the input.
func TestQuantizeSpecialBlocks(t *testing.T) {
	for _, typ := range allTypes {
		for _, c := range []struct {
			name string
			v    float32
		}{{"zero", 0}, {"constant", 0.75}, {"negative constant", -3}} {
			t.Run(typ.String()+"/"+c.name, func(t *testing.T) {
				x := make([]float32, 256)
				for i := range x {
					x[i] = c.v
				}
				rb, _ := typ.RowBytes(256)
				enc := make([]byte, rb)
				if err := Quantize(typ, x, enc); err != nil {
					t.Fatal(err)
				}
				y := make([]float32, 256)
				if err := Dequantize(typ, enc, y); err != nil {
					t.Fatal(err)
				}
				for i, v := range y {
					if math.IsNaN(float64(v)) || math.Abs(float64(v-c.v)) > 0.02*math.Abs(float64(c.v))+1e-6 {
						t.Fatalf("element %d: %g, want %g", i, v, c.v)
					}
				}
			})
		}
	}
}
