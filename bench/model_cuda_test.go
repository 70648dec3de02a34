package bench

import (
	"path/filepath"
	"strings"
	"testing"

	"oengine/kernels/cuda/cudaemu"
	"oengine/model/gguf"
)

// BenchModel measures the CUDA forward pass when given a device (here the
// emulated one: the figures mean nothing, the path is what is tested).
func TestBenchModelOnEmulatedCUDA(t *testing.T) {
	path := filepath.Join("..", "..", "shared", "testdata", "models", "tiny-llama-q4_0.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Skipf("shared testdata missing: %v", err)
	}
	defer f.Close()
	d, err := cudaemu.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res, err := BenchModel(f, ModelBenchConfig{PP: 24, TG: 4, Reps: 1, Batch: 16, CUDA: d.Device})
	if err != nil {
		t.Fatal(err)
	}
	if res.PPTokensPerS <= 0 || res.TGTokensPerS <= 0 || !strings.Contains(res.Device, "Fake H200") {
		t.Fatalf("result %+v", res)
	}
	var b strings.Builder
	WriteModelTable(&b, []ModelBenchResult{res})
	if !strings.Contains(b.String(), "device: cuda:0 Fake H200") {
		t.Fatalf("table does not name the device:\n%s", b.String())
	}
}
