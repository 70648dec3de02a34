package gpu_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEmulatedReferenceModelsMMA runs reference models with ExactMatMul
// off on the emulated device (sm_90, no cuBLAS): every prompt chunk of 64
// tokens takes MatMul's tensor-core path (gemm_mma_<type>, F16 operands;
// F16 weights too, cuBLAS being absent), whose emulator twin computes what
// the kernel computes. Only the last case (~990 tokens) fills 64-token
// chunks. The logprobs must stay within the reduced-precision bounds
// runReference applies (twice the README's). The four llama models cover
// every gemm_mma kernel (F16, Q4_0, Q8_0, Q4_K and Q6_K in q4_k_m); under
// the race detector or -short only q4_k_m, every 7th position.
func TestEmulatedReferenceModelsMMA(t *testing.T) {
	root, _ := os.Getwd()
	dir := filepath.Join(root, "..", "..", "..", "shared", "testdata", "models")
	names := []string{"tiny-llama-f16", "tiny-llama-q4_0", "tiny-llama-q8_0", "tiny-llama-q4_k_m"}
	r := refRun{exact: false, chunks: []int{64}, stride: 3}
	if testing.Short() || raceEnabled {
		names, r.stride = names[3:], 7
	}
	d := emuDevice(t)
	for _, name := range names {
		path := filepath.Join(dir, name+".gguf")
		if _, err := os.Stat(path); err != nil {
			t.Skipf("shared testdata models missing: %v", err)
		}
		t.Run(name, func(t *testing.T) { runReference(t, d, path, r) })
	}
}
