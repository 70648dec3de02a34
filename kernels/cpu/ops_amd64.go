package cpu

//go:noescape
func swigluAVX2(dst, gate, up *float32, n int)

//go:noescape
func gegluAVX2(dst, gate, up *float32, n int)

//go:noescape
func addAVX2(dst, a, b *float32, n int)

// addSIMD adds the whole groups of 8 of a and b into dst with AVX2 (each
// sum the same float32 as Go's +) and returns how many it did.
func addSIMD(dst, a, b []float32) int {
	n := len(dst) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	_, _ = a[n-1], b[n-1]
	addAVX2(&dst[0], &a[0], &b[0], n)
	return n
}

// swigluSIMD computes the whole groups of 8 of SwiGLU (n = len(dst)&^7
// values) with the AVX2 kernel and reports whether it did.
func swigluSIMD(dst, gate, up []float32) bool { return gluSIMD(swigluAVX2, dst, gate, up) }

// gegluSIMD is swigluSIMD for GeGLU.
func gegluSIMD(dst, gate, up []float32) bool { return gluSIMD(gegluAVX2, dst, gate, up) }

// gluSIMD runs the AVX2 gated-activation kernel f over the whole groups of
// 8 of dst.
func gluSIMD(f func(dst, gate, up *float32, n int), dst, gate, up []float32) bool {
	n := len(dst) &^ 7
	if !hasAVX2 || n == 0 {
		return false
	}
	_, _ = gate[n-1], up[n-1]
	f(&dst[0], &gate[0], &up[0], n)
	return true
}
