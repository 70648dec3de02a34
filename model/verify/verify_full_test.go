//go:build !race

package verify

import "testing"

// TestReferenceModelsFull checks every prompt of every reference model,
// including the ~1000-token one that pages attention across 60+ pages and
// takes RoPE to large positions. It is left out of race-detector runs, where
// TestReferenceModelsShort covers the same code.
func TestReferenceModelsFull(t *testing.T) {
	if testing.Short() {
		t.Skip("long reference prompts skipped in -short mode")
	}
	checkModels(t, Options{})
}
