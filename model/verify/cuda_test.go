package verify

import (
	"strings"
	"testing"

	"oengine/kernels/cuda/cudaemu"
)

// TestReferenceModelsEmulatedCUDA runs the short check of every reference
// model on the CUDA forward pass (model/gpu) over the emulated device (the
// kernels emulated on the CPU): what `oengine verify --device cuda` runs
// on a GPU.
func TestReferenceModelsEmulatedCUDA(t *testing.T) {
	d, err := cudaemu.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	opts := Options{MaxTokens: 100, Chunks: []int{1, 5, 16, 3, 33}, CUDA: d.Device}
	names := refModels
	if testing.Short() || raceEnabled { // all six run without the detector (make test's second pass)
		opts.Cases, names = []int{0}, []string{"tiny-llama-q4_0", "tiny-qwen3-q4_k_m"}
	}
	checkModels(t, opts, names...)
	live := d.Live() // the stream's scratch buffers, sized by the checks above
	rep, err := Run(testdataDir(t)+"/models/tiny-llama-f16.gguf", testdataDir(t)+"/models/tiny-llama-f16.ref.json",
		Options{Cases: []int{0}, CUDA: d.Device, GGML: true, SkipTokenize: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Live(); got != live {
		t.Fatalf("device allocations: %d after a check, %d before: the model or its K/V leaked", got, live)
	}
	if !rep.Pass || rep.GGMLGreedy || !strings.Contains(rep.String(), "oengine on cuda:0 Fake H200") {
		t.Fatalf("report on the CUDA model:\n%s", rep)
	}
}
