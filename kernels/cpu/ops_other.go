//go:build !amd64

package cpu

// swigluSIMD: no SIMD SwiGLU on this architecture.
func swigluSIMD(dst, gate, up []float32) bool { return false }
