package cpu

import (
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestIQ4NLToQ8_0: converted blocks decode to the IQ4_NL blocks' values
// exactly.
func TestIQ4NLToQ8_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, nb := range []int{1, 2, 7, 64} {
		src := randomRow(rng, ggml.TypeIQ4_NL, nb*qk)
		want := make([]byte, 34*nb)
		iq4NLToQ8_0(want, src, nb)
		a, b := make([]float32, nb*qk), make([]float32, nb*qk)
		if err := Dequantize(ggml.TypeIQ4_NL, src, a); err != nil {
			t.Fatal(err)
		}
		if err := Dequantize(ggml.TypeQ8_0, want, b); err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("nb %d element %d: IQ4_NL %g, as Q8_0 %g", nb, i, a[i], b[i])
			}
		}
	}
}
