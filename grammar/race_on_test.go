//go:build race

package grammar

// raceEnabled: the race detector slows the mask walks many times, so the
// widest sweeps run reduced under it (the plain run keeps them whole).
const raceEnabled = true
