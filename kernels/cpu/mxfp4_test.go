package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestMXFP4Scales: the block scale is 2^(e-128) for every exponent byte
// (ggml's halved E8M0, subnormals included), and the F16 scale the
// products use equals it from 2^-24 to 2^15, is 0 below and 2^15 above.
func TestMXFP4Scales(t *testing.T) {
	for e := 0; e < 256; e++ {
		want := float32(math.Ldexp(1, e-128))
		if got := E8M0Half(byte(e)); got != want {
			t.Fatalf("E8M0Half(%d) = %g, want %g", e, got, want)
		}
		f16 := F16ToF32(mxfp4F16Scale(byte(e)))
		switch {
		case e < 104 && f16 != 0, e > 143 && f16 != 32768, e >= 104 && e <= 143 && f16 != want:
			t.Fatalf("F16 scale of %d = %g (2^(e-128) = %g)", e, f16, want)
		}
	}
}

// TestMXFP4ToQ8_0: a converted block decodes to the MXFP4 block's values
// exactly when its scale is in F16's range.
func TestMXFP4ToQ8_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const nb = 64
	src := make([]byte, 17*nb)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	for b := 0; b < nb; b++ {
		src[17*b] = byte(104 + b%40)
	}
	dst := make([]byte, 34*nb)
	mxfp4ToQ8_0(dst, src, nb)
	want, got := make([]float32, 32*nb), make([]float32, 32*nb)
	if err := Dequantize(ggml.TypeMXFP4, src, want); err != nil {
		t.Fatal(err)
	}
	if err := Dequantize(ggml.TypeQ8_0, dst, got); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("element %d: %g after conversion, %g before", i, got[i], want[i])
		}
	}
}
