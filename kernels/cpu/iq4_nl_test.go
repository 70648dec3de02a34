package cpu

import (
	"bytes"
	"math"
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

// TestIQ4NLGemv: the one-token IQ4_NL kernels (16-row with AVX-512 VNNI,
// 8-row AVX2) give, row by row, bitwise blkDot1 on the rows converted to
// Q8_0, for every level this CPU runs; rows past the whole groups are left
// to the caller.
func TestIQ4NLGemv(t *testing.T) {
	if !blkActive {
		t.Skip("no blocked kernels on this CPU")
	}
	defer func(v bool) { gemvZ = v }(gemvZ)
	bk := blkKernels[ggml.TypeIQ4_NL]
	rng := rand.New(rand.NewPCG(43, 44))
	for _, z := range []bool{false, true} {
		if z && !hasBlkZ {
			continue
		}
		gemvZ = z
		for _, nb := range []int{1, 3, 64} {
			cols := nb * qk
			for _, n := range []int{7, 8, 16, 23, 40} {
				rb := 18 * nb
				rows := make([]byte, 0, n*rb)
				for r := 0; r < n; r++ {
					rows = append(rows, randomRow(rng, ggml.TypeIQ4_NL, cols)...)
				}
				x := randNormal(rng, cols, 1)
				if n == 23 { // saturated activations: every q8 is ±127
					for i := range x {
						x[i] = float32(1 - 2*rng.IntN(2))
					}
				}
				var a actBuf
				a.prepare(actQ8_0, 1, cols)
				a.quantizeToken(actQ8_0, 0, cols, x)
				out := make([]float32, n)
				done := iq4NLGemv(rows, rb, a.qs, a.d, a.s8, out)
				want := n / 8 * 8
				if z {
					want = n/16*16 + (n%16)/8*8
				}
				if done != want {
					t.Fatalf("gemvZ %v nb %d n %d: %d rows computed, want %d", z, nb, n, done, want)
				}
				q8 := make([]byte, 34*nb)
				for r := 0; r < done; r++ {
					iq4NLToQ8_0(q8, rows[r*rb:(r+1)*rb], nb)
					if ref := blkDot1(bk, q8, a.qs, a.d, a.s8); math.Float32bits(out[r]) != math.Float32bits(ref) {
						t.Fatalf("gemvZ %v nb %d n %d row %d: %g, blkDot1 %g", z, nb, n, r, out[r], ref)
					}
				}
			}
		}
	}
}
