package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/model/gguf"
)

// f16Fields lists the byte offsets of F16 scale fields inside one block.
var f16Fields = map[gguf.Type][]int{
	gguf.TypeQ4_0: {0}, gguf.TypeQ4_1: {0, 2}, gguf.TypeQ5_0: {0}, gguf.TypeQ5_1: {0, 2},
	gguf.TypeQ8_0: {0}, gguf.TypeQ2_K: {80, 82}, gguf.TypeQ3_K: {108},
	gguf.TypeQ4_K: {0, 2}, gguf.TypeQ5_K: {0, 2}, gguf.TypeQ6_K: {208},
}

// randomRow returns one row of cols elements whose quant bits are random
// bytes (every bit pattern, unlike the output of an encoder) and whose
// scales are random finite F16 values; float types get random values.
func randomRow(rng *rand.Rand, typ gguf.Type, cols int) []byte {
	rb, _ := typ.RowBytes(cols)
	row := make([]byte, rb)
	switch typ {
	case gguf.TypeF32:
		for i := 0; i < cols; i++ {
			quantF32([]float32{float32(rng.NormFloat64())}, row[4*i:])
		}
		return row
	case gguf.TypeF16, gguf.TypeBF16:
		for i := 0; i < cols; i++ {
			v := float32(rng.NormFloat64())
			if typ == gguf.TypeF16 {
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
