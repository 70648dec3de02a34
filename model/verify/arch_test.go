package verify

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestArchReferences: models of the architectures the shared reference
// data lacks (testdata/NAME, README there) match llama.cpp's logits on
// every prompt, the long one (1391 tokens) included, prefilled whole and
// in chunks of several sizes: tokenization, teacher-forced
// log-probabilities within the float tolerances, argmax, and free-running
// greedy decoding.
//   - gemma2: F16 weights, a sliding window of 80 on every other layer,
//     attention and final logits soft-capped (at 2 and 3, so the caps bind).
//   - gemma3: F16 weights, heads wider than dim/heads, a sliding window of
//     96 on five layers of six (most of the long prompt lies past it),
//     the global layer on another rope base.
//   - qwen3moe: F32 weights, 8 experts with 2 used per token.
//   - phi3: F16 weights, fused QKV and gate/up matrices, LongRoPE's long
//     factors and attention factor (long) or its short factors (short);
//     partial: 12 of 16 values rotated and the output tied to the
//     embedding, as Phi-4-mini.
//   - yarn: qwen3 with YaRN rope scaling (factor 4, original context 256).
//   - mistral3: YaRN with the file's betas and log multiplier, and the
//     query temperature over the original context.
func TestArchReferences(t *testing.T) {
	for _, name := range []string{"gemma2/tiny-gemma2-f16", "gemma3/tiny-gemma3-f16", "qwen3moe/tiny-qwen3moe-f32",
		"phi3/tiny-phi3-long-f16", "phi3/tiny-phi3-short-f16", "phi3/tiny-phi3-partial-f16",
		"yarn/tiny-qwen3-yarn-f16", "mistral3/tiny-mistral3-f16"} {
		for _, chunks := range [][]int{nil, {1, 5, 16, 3, 33}} {
			path := filepath.Join("testdata", name)
			rep, err := Run(path+".gguf", path+".ref.json", Options{Chunks: chunks})
			if err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + strings.TrimSpace(rep.String()))
			if rep.Class != ClassFloat {
				t.Fatalf("%s: weight class %v, want float tolerances", name, rep.Class)
			}
			for _, c := range rep.Cases {
				if !c.Pass {
					t.Errorf("%s chunks %v case %d failed: %s", name, chunks, c.Index, strings.Join(c.Failures, "; "))
				}
				if !c.TokensChecked || !c.TokensMatch {
					t.Errorf("%s case %d: tokenization not checked or different", name, c.Index)
				}
			}
		}
	}
}
