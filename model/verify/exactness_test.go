package verify

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestExactnessCounts(t *testing.T) {
	r := Report{Cases: []CaseReport{
		{PosMaxAbs: []float64{0, 0, 0.3, 0}},
		{PosMaxAbs: []float64{0, 5e-5}},
		{PosMaxAbs: []float64{0.2}},
	}}
	exact, total, first := r.Exactness()
	if exact != 5 || total != 7 || !slices.Equal(first, []int{2, -1, 0}) {
		t.Fatalf("got %d/%d %v", exact, total, first)
	}
}

// TestDiagExactness is a diagnostic for kernel work, run on demand with
// VERIFY_EXACTNESS=1: it prints, per reference model, how many short-prompt
// positions match llama.cpp bit for bit and where each case first differs,
// in oengine's arithmetic and in GGML arithmetic (llama.cpp's, fed as
// llama.cpp fed the reference: prompt in one batch, then one token a step;
// AVX-512 orders, as the build that wrote the reference).
func TestDiagExactness(t *testing.T) {
	if os.Getenv("VERIFY_EXACTNESS") == "" {
		t.Skip("set VERIFY_EXACTNESS=1 to print exactness per model")
	}
	models := filepath.Join(testdataDir(t), "models")
	for _, ggml := range []bool{false, true} {
		for _, name := range refModels {
			rep, err := Run(filepath.Join(models, name+".gguf"), filepath.Join(models, name+".ref.json"),
				Options{MaxTokens: 100, PerPosition: true, SkipTokenize: true, GGMLForced: ggml, GGMLAVX512: ggml})
			if err != nil {
				t.Fatal(err)
			}
			exact, total, first := rep.Exactness()
			t.Logf("ggml=%-5v %-20s exact %3d/%3d  first inexact per case %v  mean %.4f", ggml, name, exact, total, first, rep.MeanAbs())
		}
	}
}
