//go:build !race

package verify

import "testing"

// TestReferenceModelsFull checks every prompt of every reference model,
// including the ~1000-token one that pages attention across 60+ pages and
// takes RoPE to large positions, with the free-running greedy check in GGML
// arithmetic mode with AVX-512 summation orders (the CLI's default; the
// reference data was written by an AVX-512 build of llama.cpp): greedy must
// follow the reference token for token up to its first near-tie, with no
// tolerated divergence. It is left out of race-detector runs, where
// TestReferenceModelsShort covers the same code.
func TestReferenceModelsFull(t *testing.T) {
	if testing.Short() {
		t.Skip("long reference prompts skipped in -short mode")
	}
	checkModels(t, Options{GGML: true, GGMLAVX512: true})
}
