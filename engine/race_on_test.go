//go:build race

package engine

// raceEnabled: the race detector slows the model's kernels many times, so
// the real-model tests run a reduced sweep under it.
const raceEnabled = true
