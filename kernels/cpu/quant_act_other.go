//go:build !amd64

package cpu

// sumQ8SIMD: no SIMD block sums on this architecture.
func sumQ8SIMD(qs []int8, s8 []int32) bool { return false }
