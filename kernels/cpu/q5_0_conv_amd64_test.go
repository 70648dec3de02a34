package cpu

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestQ5_0ToQ8_0: converted blocks decode to the Q5_0 blocks' values
// exactly, and the AVX2 conversion writes the Go twin's bytes.
func TestQ5_0ToQ8_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	for _, nb := range []int{1, 2, 7, 64} {
		src := randomRow(rng, ggml.TypeQ5_0, nb*qk)
		want := make([]byte, 34*nb)
		q5_0ToQ8_0(want, src, nb)
		a, b := make([]float32, nb*qk), make([]float32, nb*qk)
		if err := Dequantize(ggml.TypeQ5_0, src, a); err != nil {
			t.Fatal(err)
		}
		if err := Dequantize(ggml.TypeQ8_0, want, b); err != nil {
			t.Fatal(err)
		}
		if i := firstDiffF32(a, b); i >= 0 {
			t.Fatalf("nb %d element %d: Q5_0 %g, as Q8_0 %g", nb, i, a[i], b[i])
		}
		if !hasAVX2 {
			continue
		}
		got := make([]byte, 34*nb+1)
		got[34*nb] = 0xA5
		q5_0ToQ8_0Rows(got[:34*nb], src, nb)
		if !bytes.Equal(got[:34*nb], want) || got[34*nb] != 0xA5 {
			t.Fatalf("nb %d: AVX2 conversion differs from the twin", nb)
		}
	}
}

// TestQ5_0Gemv8: the one-token Q5_0 kernel of the blocked path gives, row
// by row, bitwise blkDot1 on the rows converted to Q8_0; rows past the
// whole groups of 8 are left to the caller.
func TestQ5_0Gemv8(t *testing.T) {
	if !blkActive {
		t.Skip("no blocked kernels on this CPU")
	}
	bk := blkKernels[ggml.TypeQ5_0]
	rng := rand.New(rand.NewPCG(63, 64))
	for _, nb := range []int{1, 3, 64} {
		cols := nb * qk
		for _, n := range []int{7, 8, 16, 23, 40} {
			rb := 22 * nb
			rows := make([]byte, 0, n*rb)
			for r := 0; r < n; r++ {
				rows = append(rows, randomRow(rng, ggml.TypeQ5_0, cols)...)
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
			done := q5_0Gemv8(rows, rb, a.qs, a.d, a.s8, out)
			if done != n/8*8 {
				t.Fatalf("nb %d n %d: %d rows computed", nb, n, done)
			}
			q8 := make([]byte, 34*nb)
			for r := 0; r < done; r++ {
				q5_0ToQ8_0(q8, rows[r*rb:(r+1)*rb], nb)
				if ref := blkDot1(bk, q8, a.qs, a.d, a.s8); math.Float32bits(out[r]) != math.Float32bits(ref) {
					t.Fatalf("nb %d n %d row %d: %g, blkDot1 %g", nb, n, r, out[r], ref)
				}
			}
		}
	}
}
