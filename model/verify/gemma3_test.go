package verify

import (
	"strings"
	"testing"
)

// TestGemma3Reference: a Gemma 3 model (testdata/gemma3, README there:
// F16 weights, a head width apart from dim/heads, a sliding window of 96
// on five layers of six, global layers on another rope base) matches
// llama.cpp's logits on every prompt, the long one (1391 tokens, most of
// them past the window) included, prefilled in chunks of several sizes:
// tokenization, teacher-forced log-probabilities within the F16
// tolerances, argmax, and free-running greedy decoding.
func TestGemma3Reference(t *testing.T) {
	for _, chunks := range [][]int{nil, {1, 5, 16, 3, 33}} {
		rep, err := Run("testdata/gemma3/tiny-gemma3-f16.gguf", "testdata/gemma3/tiny-gemma3-f16.ref.json", Options{Chunks: chunks})
		if err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + strings.TrimSpace(rep.String()))
		if rep.Class != ClassFloat {
			t.Fatalf("weight class %v, want float tolerances", rep.Class)
		}
		for _, c := range rep.Cases {
			if !c.Pass {
				t.Errorf("chunks %v case %d failed: %s", chunks, c.Index, strings.Join(c.Failures, "; "))
			}
			if !c.TokensChecked || !c.TokensMatch {
				t.Errorf("case %d: tokenization not checked or different", c.Index)
			}
		}
	}
}
