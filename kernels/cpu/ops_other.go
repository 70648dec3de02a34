//go:build !amd64

package cpu

// swigluSIMD: no SIMD SwiGLU on this architecture.
func swigluSIMD(dst, gate, up []float32) bool { return false }

// gegluSIMD: no SIMD GeGLU on this architecture.
func gegluSIMD(dst, gate, up []float32) bool { return false }
