package verify

import (
	"oengine/internal/refdata"
	"path/filepath"
	"strings"
	"testing"
)

// testdataDir returns shared/testdata next to the repository root (found by
// walking up to go.mod), skipping the test when it is absent.
func testdataDir(t testing.TB) string {
	t.Helper()
	return refdata.Dir(t)
}

// refModels are the reference models of shared/testdata/models.
var refModels = []string{
	"tiny-llama-f16", "tiny-llama-q8_0", "tiny-llama-q4_0", "tiny-llama-q4_k_m",
	"tiny-qwen2-q8_0", "tiny-qwen3-q4_k_m",
}

// softGreedyMargin: on quantized models the free-running greedy check
// tolerates a divergence at a step whose reference top-1/top-2 margin is
// below this (the testdata README's near-tie is 0.05). The reference is
// not self-consistent at that level: for tiny-llama-q4_k_m, llama.cpp gives
// the identical context (BOS alone, position 0) logprobs that differ by
// 0.07-0.11 between a 2-token prompt and longer ones (its repacked Q4_K
// gemm, used for groups of 4 batch rows, accumulates per 64 values, its
// gemv per 256; TestReferenceSelfConsistency pins this). oengine's default
// arithmetic does not depend on the batch, so it can match only one of the
// two, and a greedy step whose margin is inside llama.cpp's own spread may
// flip. GGML arithmetic mode (Options.GGML) reproduces both. Every tolerated divergence is logged; the CLI keeps
// 0.05 (--greedy-tie).
const softGreedyMargin = 0.2

// checkModels runs Run on every reference model with opts and fails on any
// failed case.
func checkModels(t *testing.T, opts Options, names ...string) {
	models := filepath.Join(testdataDir(t), "models")
	if len(names) == 0 {
		names = refModels
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			rep, err := Run(filepath.Join(models, name+".gguf"), filepath.Join(models, name+".ref.json"), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + strings.TrimSpace(rep.String()))
			for _, c := range rep.Cases {
				if c.Pass {
					continue
				}
				if !opts.GGML && rep.Class == ClassQuantized && len(c.Failures) == 1 && c.GreedyFailStep >= 0 && c.GreedyFailMargin < softGreedyMargin {
					t.Logf("KNOWN DIVERGENCE (not failed): case %d: %s", c.Index, c.Failures[0])
					continue
				}
				t.Errorf("case %d failed: %s", c.Index, strings.Join(c.Failures, "; "))
			}
			for _, c := range rep.Cases {
				if !c.TokensChecked || !c.TokensMatch {
					t.Errorf("case %d: tokenization not checked or different", c.Index)
				}
			}
		})
	}
}

// TestReferenceModelsShort checks the short prompts of every reference model
// (prompt + greedy continuation of at most 100 tokens): tokenization,
// teacher-forced log-probabilities and greedy decoding. The long prompt
// (about 1000 tokens) runs in TestReferenceModelsFull, which the race
// detector would make too slow.
func TestReferenceModelsShort(t *testing.T) {
	checkModels(t, Options{MaxTokens: 100, Chunks: []int{1, 5, 16, 3, 33}})
}

// TestWrongReferenceFails runs a reference against a model with other
// weights: the check must fail, with large errors.
func TestWrongReferenceFails(t *testing.T) {
	models := filepath.Join(testdataDir(t), "models")
	rep, err := Run(filepath.Join(models, "tiny-llama-f16.gguf"), filepath.Join(models, "tiny-llama-q4_k_m.ref.json"),
		Options{Cases: []int{0}, SkipTokenize: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pass || rep.MaxAbs() < 1 {
		t.Fatalf("wrong weights passed or came close (max abs %.3f):\n%s", rep.MaxAbs(), rep)
	}
	if !strings.Contains(rep.String(), "FAIL") {
		t.Fatalf("report does not say FAIL:\n%s", rep)
	}
}

// TestReferenceSelfConsistency documents why softGreedyMargin exists: in
// llama.cpp's own reference for tiny-llama-q4_k_m, position 0 (the BOS
// token alone, the same context in every case) has different logprobs in
// the 2-token case than in the others.
func TestReferenceSelfConsistency(t *testing.T) {
	ref, err := LoadReference(filepath.Join(testdataDir(t), "models", "tiny-llama-q4_k_m.ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lo, hi float64 = 1e9, -1e9
	for _, c := range ref.Cases {
		if len(c.PromptTopK) == 0 || len(c.PromptTopK[0]) == 0 || c.Tokens[0] != ref.Cases[0].Tokens[0] {
			continue
		}
		lp := c.PromptTopK[0][0].Logprob
		lo, hi = min(lo, lp), max(hi, lp)
	}
	spread := hi - lo
	t.Logf("llama.cpp's top-1 logprob at position 0 (BOS alone) spans %.4f across cases", spread)
	if spread < 0.05 || spread >= softGreedyMargin {
		t.Fatalf("reference spread %.4f: softGreedyMargin %.2f no longer matches the evidence", spread, softGreedyMargin)
	}
}
