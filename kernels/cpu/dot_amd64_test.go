package cpu

import (
	"fmt"
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
		if kernels[typ].dot4 == nil && typ != gguf.TypeF32 && typ != gguf.TypeBF16 {
			t.Errorf("%s: no four-token kernel", typ)
		}
	}
}
