//go:build race

package verify

import "testing"

// TestReferenceLongPromptRace runs one model's ~1000-token prompt under the
// race detector (TestReferenceModelsFull, which runs all of them, is left
// out of race builds for time): attention across 60+ pages, large RoPE
// positions and both attention paths, with the detector watching.
func TestReferenceLongPromptRace(t *testing.T) {
	if testing.Short() {
		t.Skip("long reference prompt skipped in -short mode")
	}
	checkModels(t, Options{Cases: []int{6}}, "tiny-llama-q8_0")
}
