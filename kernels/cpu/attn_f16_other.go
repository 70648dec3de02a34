//go:build !amd64

package cpu

// storeF16SIMD: no SIMD F16 rounding on this architecture.
func storeF16SIMD(dst []uint16, src []float32) int { return 0 }

// attendF16SIMD: no SIMD one-row attention on this architecture.
func attendF16SIMD(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, o AttnOpts, scratch []float32) bool {
	return false
}
