//go:build race

package conformance

// raceEnabled: the race detector slows the model many times, so the
// conformance run makes fewer generations per schema under it.
const raceEnabled = true
