//go:build race

package llama

// ggmlRaceSteps bounds the decode steps each GGML golden checks under the
// race detector (the emulated kernels are plain Go and slow there).
const ggmlRaceSteps = 2
