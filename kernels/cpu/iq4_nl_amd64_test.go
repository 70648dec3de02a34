package cpu

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestIQ4NLToQ8_0AVX2: the AVX2 conversion writes the Go twin's bytes.
func TestIQ4NLToQ8_0AVX2(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 on this CPU")
	}
	rng := rand.New(rand.NewPCG(45, 46))
	for _, nb := range []int{1, 2, 7, 64} {
		src := randomRow(rng, ggml.TypeIQ4_NL, nb*qk)
		want := make([]byte, 34*nb)
		iq4NLToQ8_0(want, src, nb)
		got := make([]byte, 34*nb+1)
		got[34*nb] = 0xA5
		iq4NLToQ8_0Rows(got[:34*nb], src, nb)
		if !bytes.Equal(got[:34*nb], want) || got[34*nb] != 0xA5 {
			t.Fatalf("nb %d: AVX2 conversion differs from the twin", nb)
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
	bk := blkKernels[ggml.TypeIQ4_NL]
	rng := rand.New(rand.NewPCG(43, 44))
	for _, z := range []bool{false, true} {
		if z && !hasBlkZ {
			continue
		}
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
				done := iq4NLGemv(rows, rb, a.qs, a.d, a.s8, out, z)
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
