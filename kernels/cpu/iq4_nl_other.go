//go:build !amd64

package cpu

func iq4NLToQ8_0SIMD(dst, src []byte, nb int) bool { return false }

func iq4NLGemv(rows []byte, rb int, qs []int8, d []float32, s8 []int32, out []float32) int { return 0 }
