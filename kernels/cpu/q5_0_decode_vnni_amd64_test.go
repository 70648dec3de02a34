package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestQ5ZPackRoundTrip: testPackRoundTrip for PackQ5_0Decode and
// PackQ5_1Decode, one fifth bit's place in the masks, and a matrix of
// another type is not packed.
func TestQ5ZPackRoundTrip(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(191, 193))
	shapes := []struct{ rows, cols int }{{16, 32}, {37, 256}, {64, 2048}, {50, 96}}
	testPackRoundTrip(t, rng, ggml.TypeQ5_0, PackQ5_0Decode, shapes)
	testPackRoundTrip(t, rng, ggml.TypeQ5_1, PackQ5_1Decode, shapes)
	// The fifth-bit masks: row 5's bit for element 17 (the high nibble of
	// byte 1: value vector 4, j = 1) is bit 4·5+1 of mask 4.
	w := randomMatrix(t, rng, ggml.TypeQ5_0, 16, 32)
	for r := 0; r < 16; r++ {
		qh := uint32(0)
		if r == 5 {
			qh = 1 << 17
		}
		binary.LittleEndian.PutUint32(w.Data[r*22+2:], qh)
	}
	pk, _ := PackQ5_0Decode(w, make([]byte, len(w.Data)))
	for v := 0; v < 8; v++ {
		want := uint64(0)
		if v == 4 {
			want = 1 << (4*5 + 1)
		}
		if got := binary.LittleEndian.Uint64(pk.Data[32+8*v:]); got != want {
			t.Fatalf("mask %d: %#x, want %#x", v, got, want)
		}
	}
	q4 := randomMatrix(t, rng, ggml.TypeQ4_0, 32, 64)
	q51 := randomMatrix(t, rng, ggml.TypeQ5_1, 32, 64)
	if _, ok := PackQ5_0Decode(q4, make([]byte, len(q4.Data))); ok {
		t.Fatal("Q4_0 matrix packed as Q5_0")
	}
	if _, ok := PackQ5_0Decode(q51, make([]byte, len(q51.Data))); ok {
		t.Fatal("Q5_1 matrix packed as Q5_0")
	}
	if _, ok := PackQ5_1Decode(q4, make([]byte, len(q4.Data))); ok {
		t.Fatal("Q4_0 matrix packed as Q5_1")
	}
}

// extremeQ5Rows sets the values of w (Q5_0 or Q5_1) to the extremes:
// rows of all fifth bits set over nibbles of 15 (Q5_0: 15) and of none
// over nibbles of 0 (Q5_0: -16), and every third row a random mix of
// fifth bits over nibbles of 15.
func extremeQ5Rows(rng *rand.Rand, w Matrix) {
	rb := w.rowBytes()
	bb, qh, _, _, _, _ := q5zShape(w.Type == ggml.TypeQ5_1)
	for r := 0; r < w.Rows; r++ {
		for b := 0; b < w.Cols/32; b++ {
			blk := w.Data[r*rb+bb*b : r*rb+bb*b+bb]
			nib, bits := byte(0xff), uint32(0xffffffff)
			switch r % 3 {
			case 1:
				nib, bits = 0, 0
			case 2:
				bits = rng.Uint32()
			}
			blk[qh], blk[qh+1], blk[qh+2], blk[qh+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
			for i := qh + 4; i < bb; i++ {
				blk[i] = nib
			}
		}
	}
}

// TestQ5ZGemv: the Q5_1 decode-layout kernels, one token and two, give
// every row exactly the bits of the row-major kernel (dotQ5_1AVX2
// through kernels' dot) for random and extreme rows and saturated
// activations, and write nothing past their rows. (Q5_0's layout kernels
// are blocked kernels: TestQ4ZGemv.)
func TestQ5ZGemv(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(195, 196))
	for _, sh := range []struct{ rows, cols int }{{16, 32}, {32, 256}, {48, 2048}, {16, 5632}} {
		for _, extreme := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dx%d/extreme=%v", sh.rows, sh.cols, extreme), func(t *testing.T) {
				testQ5_1ZGemv(t, rng, sh.rows, sh.cols, extreme)
			})
		}
	}
}

func testQ5_1ZGemv(t *testing.T, rng *rand.Rand, rows, cols int, extreme bool) {
	typ := ggml.TypeQ5_1
	k := kernels[typ]
	w := randomMatrix(t, rng, typ, rows, cols)
	if extreme {
		extremeQ5Rows(rng, w)
	}
	pk, ok := PackDecodeLayout(w, make([]byte, len(w.Data)))
	if !ok {
		t.Fatal("not packed")
	}
	nb := cols / 32
	x := randNormal(rng, 2*cols, 1)
	for i := 0; i < len(x); i += 3 {
		x[i] = -30
	}
	var a actBuf
	a.prepare(k.act, 2, cols)
	for i := range 2 {
		a.quantizeToken(k.act, i, cols, x[i*cols:(i+1)*cols])
	}
	ostride := rows + 3
	one := make([]float32, rows+1)
	two := make([]float32, 2*ostride)
	for i := range two {
		two[i] = 777
	}
	one[rows] = 777
	q51zK.gemv2(pk.Data, a.qs[:2*cols], a.d[:2*nb], a.s[:2*nb], two, ostride, rows, 4096)
	for tok := range 2 {
		var v actView
		a.view(k.act, tok, cols, x, &v)
		q51zK.gemv(pk.Data, v.qs, v.d, v.s, one[:rows], 4096)
		for r := 0; r < rows; r++ {
			want := k.dot(w.Row(r), v)
			if math.Float32bits(one[r]) != math.Float32bits(want) || math.Float32bits(two[tok*ostride+r]) != math.Float32bits(want) {
				t.Fatalf("token %d row %d: one-token %g, two-token %g, row-major %g", tok, r, one[r], two[tok*ostride+r], want)
			}
		}
		if one[rows] != 777 || two[tok*ostride+rows] != 777 {
			t.Fatal("wrote past the last row")
		}
	}
}

// TestQ5ZMatMul: MatMul on the Q5_1 decode layout equals MatMul on the
// row-major matrix bit for bit, for decode, short batches and prefill
// tiles, with tail rows, on one and three threads, with the two-token
// kernel and without. (Q5_0's layout: TestQ4ZMatMul.)
func TestQ5ZMatMul(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(197, 198))
	defer func(on bool) { q51zPairOn = on }(q51zPairOn)
	for _, threads := range []int{1, 3} {
		pool := NewPool(threads)
		for _, typ := range []ggml.Type{ggml.TypeQ5_1} {
			for _, sh := range []struct{ rows, cols int }{{16, 64}, {37, 256}, {200, 512}} {
				w := randomMatrix(t, rng, typ, sh.rows, sh.cols)
				pk, ok := PackDecodeLayout(w, make([]byte, len(w.Data)))
				if !ok {
					t.Fatal("not packed")
				}
				for _, pair := range []bool{true, false} {
					for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 16, 17, 64, 71, 300} {
						t.Run(fmt.Sprintf("t%d/%s/%dx%d/n%d/pair%v", threads, typ, sh.rows, sh.cols, n, pair), func(t *testing.T) {
							q51zPairOn = pair
							sameMatMul(t, rng, pool, w, pk, n)
						})
					}
				}
			}
		}
		pool.Close()
	}
}
