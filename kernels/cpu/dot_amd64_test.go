package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"oengine/model/gguf"
)

// TestSIMDSelected: on a CPU with AVX2, MatMul must use the SIMD kernels.
func TestSIMDSelected(t *testing.T) {
	t.Logf("AVX2 kernels: %v", hasAVX2)
	if !hasAVX2 {
		t.Skip("no AVX2+FMA+F16C")
	}
	for typ := range simdKernels {
		if fmt.Sprintf("%p", kernels[typ].dot) == fmt.Sprintf("%p", portable[typ].dot) {
			t.Errorf("%s: MatMul uses the portable kernel", typ)
		}
		if kernels[typ].dot4 == nil && kernels[typ].blk == nil && typ != gguf.TypeF32 && typ != gguf.TypeBF16 {
			t.Errorf("%s: no multi-token kernel", typ)
		}
	}
}

// BenchmarkDot4Legacy: the four-token kernels that the blocked kernels
// replaced for Q4_0 and Q8_0 (kept for comparison), best-batch GOP/s.
func BenchmarkDot4Legacy(b *testing.B) {
	const cols = 2048
	rng := rand.New(rand.NewPCG(47, 48))
	for _, typ := range []gguf.Type{gguf.TypeQ4_0, gguf.TypeQ8_0} {
		row := randomRow(rng, typ, cols)
		x := randNormal(rng, 4*cols, 1)
		var a actBuf
		a.prepare(actQ8_0, 4, cols)
		for i := 0; i < 4; i++ {
			a.quantizeToken(actQ8_0, i, cols, x[i*cols:(i+1)*cols])
		}
		var v4 actView
		a.viewN(actQ8_0, 0, 4, cols, x, &v4)
		simd := simdKernels4[typ]
		var sink float32
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(row)))
			best := bestOf(b, func() { o := simd(row, v4, cols); sink += o[0] })
			b.ReportMetric(2*4*cols/best, "GOP/s-best")
		})
		_ = sink
	}
}

// BenchmarkDotLegacy: the one-token kernels that the blocked gemv replaced
// for Q4_0 and Q8_0, on 8 rows (compare with BenchmarkBlk/*/gemv).
func BenchmarkDotLegacy(b *testing.B) {
	const cols = 2048
	rng := rand.New(rand.NewPCG(55, 56))
	for _, typ := range []gguf.Type{gguf.TypeQ4_0, gguf.TypeQ8_0} {
		w := randomMatrix(b, rng, typ, 8, cols)
		x := randNormal(rng, cols, 1)
		var a actBuf
		a.prepare(actQ8_0, 1, cols)
		a.quantizeToken(actQ8_0, 0, cols, x)
		var v actView
		a.view(actQ8_0, 0, cols, x, &v)
		dot := simdKernels[typ]
		var sink float32
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(w.Data)))
			best := bestOf(b, func() {
				for r := 0; r < 8; r++ {
					sink += dot(w.Row(r), v)
				}
			})
			b.ReportMetric(2*8*cols/best, "GOP/s-best")
		})
		_ = sink
	}
}

// BenchmarkDecodeDRAM: one token against a Q4_0 matrix larger than the
// last-level cache (32768×2048, 38 MB), single thread, GB/s of weights:
// the legacy one-row kernel, the blocked one-row kernel (what decode uses)
// and the blocked 8-row gemv.
func BenchmarkDecodeDRAM(b *testing.B) {
	const rows, cols = 32768, 2048
	w := benchMatrix(b, gguf.TypeQ4_0, rows, cols)
	x := randNormal(rand.New(rand.NewPCG(57, 58)), cols, 1)
	var a actBuf
	a.prepare(actQ8_0, 1, cols)
	a.quantizeToken(actQ8_0, 0, cols, x)
	var v actView
	a.view(actQ8_0, 0, cols, x, &v)
	rb := w.rowBytes()
	var sink float32
	b.Run("legacy", func(b *testing.B) {
		dot := simdKernels[gguf.TypeQ4_0]
		b.SetBytes(int64(len(w.Data)))
		for range b.N {
			for r := 0; r < rows; r++ {
				sink += dot(w.Data[r*rb:(r+1)*rb], v)
			}
		}
	})
	b.Run("gemv1", func(b *testing.B) {
		bk := kernels[gguf.TypeQ4_0].blk
		b.SetBytes(int64(len(w.Data)))
		for range b.N {
			for r := 0; r < rows; r++ {
				sink += blkDot1(bk, w.Data[r*rb:(r+1)*rb], v.qs, v.d, v.s8)
			}
		}
	})
	b.Run("gemv8", func(b *testing.B) {
		bk := kernels[gguf.TypeQ4_0].blk
		var out [8]float32
		b.SetBytes(int64(len(w.Data)))
		for range b.N {
			for r := 0; r < rows; r += 8 {
				blkGemv(bk, w.Data[r*rb:(r+8)*rb], rb, &a, 0, cols, &out)
			}
		}
	})
	_ = sink
}
