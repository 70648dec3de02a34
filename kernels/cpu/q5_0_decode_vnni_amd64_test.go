package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestQ5ZPackRoundTrip: testPackRoundTrip for PackQ5_0Decode, the fifth
// bits' permutation undone exactly, and a matrix of another type is not
// packed.
func TestQ5ZPackRoundTrip(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(191, 193))
	testPackRoundTrip(t, rng, ggml.TypeQ5_0, PackQ5_0Decode, []struct{ rows, cols int }{{16, 32}, {37, 256}, {64, 2048}, {50, 96}})
	for range 1000 {
		qh := rng.Uint32()
		if q5zUnpermute(q5zPermute(qh)) != qh {
			t.Fatalf("qh %#x does not survive the permutation", qh)
		}
	}
	if p := q5zPermute(0x000f_000f); p != 0xff {
		t.Fatalf("bits 0-3 and 16-19 should fill byte 0: %#x", p)
	}
	q4 := randomMatrix(t, rng, ggml.TypeQ4_0, 32, 64)
	if _, ok := PackQ5_0Decode(q4, make([]byte, len(q4.Data))); ok {
		t.Fatal("Q4_0 matrix packed as Q5_0")
	}
}

// extremeQ5Rows sets the values of w to the extremes: rows of 15 (nibble
// 15, fifth bit set) and of -16 (nibble 0, bit clear) alternating, and
// every third row a random mix of fifth bits over nibbles of 15.
func extremeQ5Rows(rng *rand.Rand, w Matrix) {
	rb := w.rowBytes()
	for r := 0; r < w.Rows; r++ {
		for b := 0; b < w.Cols/32; b++ {
			blk := w.Data[r*rb+22*b : r*rb+22*b+22]
			nib, qh := byte(0xff), uint32(0xffffffff)
			switch r % 3 {
			case 1:
				nib, qh = 0, 0
			case 2:
				qh = rng.Uint32()
			}
			blk[2], blk[3], blk[4], blk[5] = byte(qh), byte(qh>>8), byte(qh>>16), byte(qh>>24)
			for i := 6; i < 22; i++ {
				blk[i] = nib
			}
		}
	}
}

// TestQ5ZGemv: the Q5_0 decode-layout kernels, one token and two, give
// every row exactly the bits of the row-major kernel (dotQ5_0AVX2 through
// kernels' dot) for random and extreme rows and saturated activations,
// and write nothing past their rows.
func TestQ5ZGemv(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(195, 196))
	dot := kernels[ggml.TypeQ5_0].dot
	for _, sh := range []struct{ rows, cols int }{{16, 32}, {32, 256}, {48, 2048}, {16, 5632}} {
		for _, extreme := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dx%d/extreme=%v", sh.rows, sh.cols, extreme), func(t *testing.T) {
				w := randomMatrix(t, rng, ggml.TypeQ5_0, sh.rows, sh.cols)
				if extreme {
					extremeQ5Rows(rng, w)
				}
				pk, ok := PackQ5_0Decode(w, make([]byte, len(w.Data)))
				if !ok {
					t.Fatal("not packed")
				}
				nb := sh.cols / 32
				x := randNormal(rng, 2*sh.cols, 1)
				for i := 0; i < len(x); i += 3 {
					x[i] = -30
				}
				var a actBuf
				a.prepare(actQ8_0, 2, sh.cols)
				corr := make([]int32, 2*sh.cols/4)
				for i := range 2 {
					a.quantizeToken(actQ8_0, i, sh.cols, x[i*sh.cols:(i+1)*sh.cols])
					q5zCorrections(corr[i*sh.cols/4:(i+1)*sh.cols/4], a.qs[i*sh.cols:(i+1)*sh.cols])
				}
				ostride := sh.rows + 3
				one := make([]float32, sh.rows+1)
				two := make([]float32, 2*ostride)
				for i := range two {
					two[i] = 777
				}
				one[sh.rows] = 777
				q5zGemv2(pk.Data, a.qs[:2*sh.cols], a.d[:2*nb], corr, two, ostride, sh.rows, 4096)
				for tok := range 2 {
					var v actView
					a.view(actQ8_0, tok, sh.cols, x, &v)
					q5zGemv(pk.Data, v.qs, v.d, corr[tok*sh.cols/4:(tok+1)*sh.cols/4], one[:sh.rows], 4096)
					for r := 0; r < sh.rows; r++ {
						want := dot(w.Row(r), v)
						if math.Float32bits(one[r]) != math.Float32bits(want) || math.Float32bits(two[tok*ostride+r]) != math.Float32bits(want) {
							t.Fatalf("token %d row %d: one-token %g, two-token %g, row-major %g", tok, r, one[r], two[tok*ostride+r], want)
						}
					}
					if one[sh.rows] != 777 || two[tok*ostride+sh.rows] != 777 {
						t.Fatal("wrote past the last row")
					}
				}
			})
		}
	}
}

// TestQ5ZMatMul: MatMul on the Q5_0 decode layout equals MatMul on the
// row-major matrix bit for bit, for decode, short batches and prefill
// tiles, with tail rows, on one and three threads, with the two-token
// kernel and without.
func TestQ5ZMatMul(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(197, 198))
	defer func(on bool) { q5zPairOn = on }(q5zPairOn)
	for _, threads := range []int{1, 3} {
		pool := NewPool(threads)
		for _, sh := range []struct{ rows, cols int }{{16, 64}, {37, 256}, {200, 512}} {
			w := randomMatrix(t, rng, ggml.TypeQ5_0, sh.rows, sh.cols)
			pk, ok := PackQ5_0Decode(w, make([]byte, len(w.Data)))
			if !ok {
				t.Fatal("not packed")
			}
			for _, pair := range []bool{true, false} {
				for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 16, 17, 64, 71, 300} {
					t.Run(fmt.Sprintf("t%d/%dx%d/n%d/pair%v", threads, sh.rows, sh.cols, n, pair), func(t *testing.T) {
						q5zPairOn = pair
						sameMatMul(t, rng, pool, w, pk, n)
					})
				}
			}
		}
		pool.Close()
	}
}
