package cpu

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestIQ4NLToQ8_0: the SIMD conversion writes the Go twin's bytes, and the
// converted blocks decode to the IQ4_NL blocks' values exactly.
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
		got := make([]byte, 34*nb+1)
		got[34*nb] = 0xA5
		if !iq4NLToQ8_0SIMD(got[:34*nb], src, nb) {
			t.Skip("no SIMD conversion on this CPU")
		}
		if !bytes.Equal(got[:34*nb], want) || got[34*nb] != 0xA5 {
			t.Fatalf("nb %d: SIMD conversion differs from the twin", nb)
		}
	}
}
