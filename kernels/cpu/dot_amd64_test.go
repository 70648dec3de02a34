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
