package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// f16Fields lists the byte offsets of F16 scale fields inside one block.
var f16Fields = map[ggml.Type][]int{
	ggml.TypeQ4_0: {0}, ggml.TypeQ4_1: {0, 2}, ggml.TypeQ5_0: {0}, ggml.TypeQ5_1: {0, 2},
	ggml.TypeQ8_0: {0}, ggml.TypeQ2_K: {80, 82}, ggml.TypeQ3_K: {108},
	ggml.TypeQ4_K: {0, 2}, ggml.TypeQ5_K: {0, 2}, ggml.TypeQ6_K: {208},
	ggml.TypeIQ4_NL: {0}, ggml.TypeIQ4_XS: {0},
}

// randomRow returns one row of cols elements whose quant bits are random
// bytes (every bit pattern, unlike the output of an encoder) and whose
// scales are random finite F16 values; float types get random values.
func randomRow(rng *rand.Rand, typ ggml.Type, cols int) []byte {
	rb, _ := typ.RowBytes(cols)
	row := make([]byte, rb)
	switch typ {
	case ggml.TypeF32:
		for i := 0; i < cols; i++ {
			quantF32([]float32{float32(rng.NormFloat64())}, row[4*i:])
		}
		return row
	case ggml.TypeF16, ggml.TypeBF16:
		for i := 0; i < cols; i++ {
			v := float32(rng.NormFloat64())
			if typ == ggml.TypeF16 {
				put16(row[2*i:], F32ToF16(v))
			} else {
				put16(row[2*i:], F32ToBF16(v))
			}
		}
		return row
	}
	for i := range row {
		row[i] = byte(rng.Uint32())
	}
	bb := typ.BlockBytes()
	for o := 0; o < rb; o += bb {
		for _, f := range f16Fields[typ] {
			put16(row[o+f:], F32ToF16(float32(rng.NormFloat64()*0.01)))
		}
		if typ == ggml.TypeMXFP4 { // scales 2^-24..2^15, where the products are exact (mxfp4.go)
			row[o] = byte(104 + rng.IntN(40))
		}
	}
	return row
}

// TestDotKernelsMatchPortable compares the kernels MatMul uses (SIMD where
// the CPU has it) with their portable twins: the same exact integer block
// sums, so the only difference is float32 summation order, bounded by
// 1e-5·Σ|w·xq| (+1e-6).
func TestDotKernelsMatchPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, typ := range allTypes {
		colsList := []int{256, 512, 2048}
		if typ.BlockElems() == 1 {
			colsList = append(colsList, 8, 100, 33)
		}
		for _, cols := range colsList {
			t.Run(fmt.Sprintf("%s/%d", typ, cols), func(t *testing.T) {
				k, ref := kernels[typ], portable[typ]
				for rep := 0; rep < 20; rep++ {
					row := randomRow(rng, typ, cols)
					x := randNormal(rng, cols, 1)
					if rep%5 == 0 { // saturate the activations: every q8 is ±127
						for i := range x {
							x[i] = float32(1 - 2*float64(rng.IntN(2)))
						}
					}
					var a actBuf
					a.prepare(k.act, 1, cols)
					a.quantizeToken(k.act, 0, cols, x)
					var v actView
					a.view(k.act, 0, cols, x, &v)
					got, want := k.dot(row, v), ref.dot(row, v)
					xq, sCorr := quantActRef(k.act, x)
					exp, mag := quantDotRef(t, typ, row, xq, sCorr)
					if d := math.Abs(float64(got) - float64(want)); d > 1e-5*mag+1e-6 {
						t.Fatalf("rep %d: kernel %g, portable %g (diff %g, scale %g)", rep, got, want, d, mag)
					}
					if d := math.Abs(float64(got) - exp); d > 2e-5*mag+1e-6 {
						t.Fatalf("rep %d: kernel %g, float64 reference %g", rep, got, exp)
					}
				}
			})
		}
	}
}

// TestDot4BitwiseEqualsDot: a four-token kernel must give, per token,
// exactly the one-token kernel's bits (batch invariance).
func TestDot4BitwiseEqualsDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, typ := range allTypes {
		k := kernels[typ]
		if k.dot4 == nil {
			continue
		}
		colsList := []int{256, 1024}
		if typ.BlockElems() == 1 {
			colsList = append(colsList, 8, 24, 100)
		}
		for _, cols := range colsList {
			t.Run(fmt.Sprintf("%s/%d", typ, cols), func(t *testing.T) {
				var a actBuf
				a.prepare(k.act, 4, cols)
				for rep := 0; rep < 10; rep++ {
					row := randomRow(rng, typ, cols)
					x := randNormal(rng, 4*cols, 1)
					for i := 0; i < 4; i++ {
						a.quantizeToken(k.act, i, cols, x[i*cols:(i+1)*cols])
					}
					var v4 actView
					a.viewN(k.act, 0, 4, cols, x, &v4)
					got := k.dot4(row, v4, cols)
					for i := 0; i < 4; i++ {
						var v actView
						a.view(k.act, i, cols, x, &v)
						if want := k.dot(row, v); math.Float32bits(got[i]) != math.Float32bits(want) {
							t.Fatalf("rep %d token %d: dot4 %g, dot %g", rep, i, got[i], want)
						}
					}
				}
			})
		}
	}
}

// TestQuantRowQ8MatchesBlock: the row quantizer MatMul uses (SIMD where
// present) equals q8Block bit for bit, zero blocks and ties included.
func TestQuantRowQ8MatchesBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	const nb = 40
	x := randNormal(rng, nb*qk, 3)
	clear(x[5*qk : 6*qk]) // all-zero block
	for i := 7 * qk; i < 8*qk; i++ {
		x[i] = float32(rng.IntN(255) - 127) // exact ties after scaling
	}
	x[9*qk] = 1e-30 // tiny amax
	qs, d, s := make([]int8, nb*qk), make([]float32, nb), make([]float32, nb)
	quantRowQ8(x, qs, d, s)
	for b := 0; b < nb; b++ {
		var wq [qk]int8
		var wd float32
		sum := q8Block(x[b*qk:(b+1)*qk], wq[:], &wd)
		if math.Float32bits(d[b]) != math.Float32bits(wd) {
			t.Fatalf("block %d: d %g, want %g", b, d[b], wd)
		}
		for j := range wq {
			if qs[b*qk+j] != wq[j] {
				t.Fatalf("block %d elem %d: q %d, want %d (x %g)", b, j, qs[b*qk+j], wq[j], x[b*qk+j])
			}
		}
		if want := fp16Round(wd * float32(sum)); s[b] != want {
			t.Fatalf("block %d: s %g, want %g", b, s[b], want)
		}
	}
}

// TestQuantRowQ8KMatchesBlock: the Q8_K row quantizer MatMul uses (SIMD
// where present) equals q8KBlock bit for bit: zero blocks, ±amax ties (the
// first wins), rounding ties.
func TestQuantRowQ8KMatchesBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	const nb = 12
	x := randNormal(rng, nb*qkK, 2)
	clear(x[2*qkK : 3*qkK])
	x[3*qkK+10], x[3*qkK+200] = -9, 9 // -amax first
	x[4*qkK+7], x[4*qkK+100] = 9, -9  // +amax first
	for i := 5 * qkK; i < 6*qkK; i++ {
		x[i] = float32(rng.IntN(255)-127) / 2 // halves: rounding ties
	}
	x[5*qkK+3] = -127
	x[6*qkK+255] = 50 // amax in the last element
	qs, d, bs := make([]int8, nb*qkK), make([]float32, nb), make([]int16, nb*16)
	quantRowQ8K(x, qs, d, bs)
	for b := 0; b < nb; b++ {
		var wq [qkK]int8
		var wb [16]int16
		wd := q8KBlock(x[b*qkK:(b+1)*qkK], wq[:], wb[:])
		if math.Float32bits(d[b]) != math.Float32bits(wd) {
			t.Fatalf("block %d: d %g, want %g", b, d[b], wd)
		}
		for j := range wq {
			if qs[b*qkK+j] != wq[j] {
				t.Fatalf("block %d elem %d: q %d, want %d", b, j, qs[b*qkK+j], wq[j])
			}
		}
		for j := range wb {
			if bs[b*16+j] != wb[j] {
				t.Fatalf("block %d bsum %d: %d, want %d", b, j, bs[b*16+j], wb[j])
			}
		}
	}
}
