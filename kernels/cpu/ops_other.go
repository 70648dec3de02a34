//go:build !amd64

package cpu

// swigluSIMD: no SIMD SwiGLU on this architecture.
func swigluSIMD(dst, gate, up []float32) bool { return false }

// addSIMD: no SIMD add on this architecture.
func addSIMD(dst, a, b []float32) int { return 0 }

// gegluSIMD: no SIMD GeGLU on this architecture.
func gegluSIMD(dst, gate, up []float32) bool { return false }
