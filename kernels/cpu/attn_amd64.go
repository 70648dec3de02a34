package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// AVX2 helpers of Attend's float32 path (attn_amd64.s); attn_simd.go holds
// their plain Go twins. All need d (or n) to be a multiple of 8.

//go:noescape
func attnCvtF16AVX2(src *uint16, dst *float32, n int)

//go:noescape
func attnDotsAVX2(k *float32, q *float32, nh, dim int, out *float32)

//go:noescape
func attnAxpyAVX2(v *float32, w *float32, nh, dim int, out *float32)

// attnAVX2 reports whether the AVX2/FMA/F16C helpers can run.
var attnAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// attnCvt widens n F16 values to float32 (n a multiple of 8 for AVX2).
func attnCvt(dst []float32, src []uint16) {
	if attnAVX2 && len(src)%8 == 0 && len(src) > 0 {
		_ = dst[len(src)-1]
		attnCvtF16AVX2(unsafe.SliceData(src), unsafe.SliceData(dst), len(src))
		return
	}
	attnCvtGo(dst, src)
}

// attnDots sets out[h] = q[h]·k for the g heads of q ([g][d], d = len(k)).
func attnDots(out, q, k []float32, g int) {
	d := len(k)
	if attnAVX2 && d%8 == 0 && d > 0 && g > 0 {
		_, _ = q[g*d-1], out[g-1]
		attnDotsAVX2(unsafe.SliceData(k), unsafe.SliceData(q), g, d, unsafe.SliceData(out))
		return
	}
	attnDotsGo(out, q, k, g)
}

// attnAxpy adds w[h]*v to each of the g rows of out ([g][d], d = len(v)).
func attnAxpy(out, v, w []float32, g int) {
	d := len(v)
	if attnAVX2 && d%8 == 0 && d > 0 && g > 0 {
		_, _ = out[g*d-1], w[g-1]
		attnAxpyAVX2(unsafe.SliceData(v), unsafe.SliceData(w), g, d, unsafe.SliceData(out))
		return
	}
	attnAxpyGo(out, v, w, g)
}
