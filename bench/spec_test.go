package bench

import (
	"strings"
	"testing"

	"oengine/internal/refdata"
	"oengine/kernels/cuda/cudaemu"
	"oengine/model/gguf"
)

// TestBenchSpec: the speculative benchmark runs both engines on the same
// weights, reports rates, acceptance and that greedy outputs agree; a
// draft with another vocabulary is refused.
func TestBenchSpec(t *testing.T) {
	open := func(name string) *gguf.File { return openRefModel(t, name) }
	target := open("tiny-llama-q8_0.gguf")
	for _, cfg := range []SpecBenchConfig{
		{NGram: true, Prompt: "Once upon a time", TG: 24, Reps: 1, Threads: 1},
		{Draft: open("tiny-llama-q4_0.gguf"), Tokens: 3, TG: 24, Reps: 1, Threads: 1, Prompt: "The capital of France is"},
	} {
		res, err := BenchSpec(target, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !res.SameOutput || res.PlainTokensPerS <= 0 || res.SpecTokensPerS <= 0 || res.DraftTokens == 0 ||
			res.AcceptanceRate != float64(res.AcceptedTokens)/float64(res.DraftTokens) || res.Mode == "" {
			t.Fatalf("result %+v", res)
		}
	}
	if _, err := BenchSpec(target, SpecBenchConfig{Draft: open("tiny-qwen2-q8_0.gguf"), TG: 4}); err == nil {
		t.Fatal("a draft with another vocabulary was accepted")
	}
}

// TestBenchSpecOnEmulatedCUDA: with a device, the speculative benchmark
// runs the target and the draft model there (the emulated device: the
// rates mean nothing, the path and the greedy agreement are tested).
func TestBenchSpecOnEmulatedCUDA(t *testing.T) {
	open := func(name string) *gguf.File { return openRefModel(t, name) }
	d, err := cudaemu.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	target := open("tiny-llama-q8_0.gguf")
	for _, cfg := range []SpecBenchConfig{
		{NGram: true, Prompt: "Once upon a time", TG: 12, Reps: 1, CUDA: d.Device},
		{Draft: open("tiny-llama-q4_0.gguf"), Tokens: 3, TG: 12, Reps: 1, Prompt: "The capital of France is", CUDA: d.Device},
	} {
		res, err := BenchSpec(target, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !res.SameOutput || res.PlainTokensPerS <= 0 || res.SpecTokensPerS <= 0 || res.DraftTokens == 0 ||
			!strings.Contains(res.Device, "Fake H200") {
			t.Fatalf("result %+v", res)
		}
	}
}

// openRefModel opens a reference model of the shared testdata, closed at
// the end of the test.
func openRefModel(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(refdata.Dir(t, "models", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
