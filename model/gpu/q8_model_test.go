package gpu_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmulatedReferenceModelsQ8 runs the quantized reference models with
// the int8-activation GEMVs (ExactMatMul off; every step holds fewer than
// cuda.MMAMinTokens tokens, so every matmul of a quantized weight is
// int8 quantization + gemv_q8_*) on the emulator, whose twins
// compute the kernels' integer dots, against llama.cpp within the README's
// bounds for quantized weights: int8 activations are what llama.cpp's CPU
// and CUDA backends use too. Every case, in chunks of 1, 7, 16, 63 and 33
// tokens (decode and prefill attention), every third position's logits
// (the twins' integer dots are plain Go: the output matrix dominates).
func TestEmulatedReferenceModelsQ8(t *testing.T) {
	root, _ := os.Getwd()
	models, _ := filepath.Glob(filepath.Join(root, "..", "..", "..", "shared", "testdata", "models", "*.gguf"))
	if len(models) == 0 {
		t.Skip("shared testdata models missing")
	}
	d := emuDevice(t)
	for _, path := range models {
		if strings.Contains(filepath.Base(path), "f16") {
			continue // no int8 path for F16 weights
		}
		r := refRun{int8: true, chunks: []int{1, 7, 16, 63, 33}, stride: 3}
		if testing.Short() || raceEnabled {
			r = refRun{int8: true, chunks: []int{8, 1}, stride: 3, cases: 1}
		}
		t.Run(filepath.Base(path), func(t *testing.T) { runReference(t, d, path, r) })
	}
}
