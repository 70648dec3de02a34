//go:build !race

package llama

import "testing"

// ggmlRaceSteps: every step of the goldens outside race builds.
const ggmlRaceSteps = 1 << 30

// TestGGMLArithmeticLongPrompt reproduces llama.cpp on the ~1000-token
// prompt: two ubatches (512 + 456 rows, tiled flash attention) and decode
// steps over a KV view of 1024 cells (split-KV attention over 2 threads).
// Left out of race builds and -short for time.
func TestGGMLArithmeticLongPrompt(t *testing.T) {
	if testing.Short() {
		t.Skip("long prompt skipped in -short mode")
	}
	checkGGMLGolden(t, ggmlGolden{"tiny-llama-q4_k_m", 6, []uint32{0xe6bc90fa, 0x2b295139, 0x8a98ef43, 0x5d64334d, 0xd8a4d077, 0x78a6a41c}, true})
}
