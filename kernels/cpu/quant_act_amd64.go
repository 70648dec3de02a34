package cpu

//go:noescape
func sumQ8AVX2(qs *int8, s8 *int32, nb int)

// sumQ8SIMD writes s8[b] = 8·Σ qs[32b:32b+32] for the len(s8) blocks with
// AVX2 and reports whether it did.
func sumQ8SIMD(qs []int8, s8 []int32) bool {
	nb := len(s8)
	if !hasAVX2 || nb == 0 {
		return false
	}
	_ = qs[nb*qk-1]
	sumQ8AVX2(&qs[0], &s8[0], nb)
	return true
}
