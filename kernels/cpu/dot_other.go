//go:build !amd64

package cpu

import (
	"oengine/ggml"
)

// Stubs where there are no SIMD kernels (the portable ones are used).

// quantQ8SIMD: no SIMD activation quantizer on this architecture.
func quantQ8SIMD(x []float32, qs []int8, d []float32) bool { return false }

// quantQ8KSIMD: no SIMD activation quantizer on this architecture.
func quantQ8KSIMD(x []float32, qs []int8, d []float32, bsums []int16) bool { return false }

func blkGemm(bk *blkKernel, row []byte, a *actBuf, g, cols int, out *[8]float32) {
	panic("cpu: no blocked kernels on this architecture")
}

func blkGemv(bk *blkKernel, rows []byte, rb int, a *actBuf, i, cols int, out *[8]float32) {
	panic("cpu: no blocked kernels on this architecture")
}

const blkPacked = false

func blkGemmPacked(bk *blkKernel, panel []byte, a *actBuf, i, cols int, out *[8]float32) {
	panic("cpu: no blocked kernels on this architecture")
}

func blkGemmPacked4(bk *blkKernel, panel []byte, a *actBuf, i, cols int, out *[32]float32) bool {
	return false
}

func blkDot1(bk *blkKernel, row []byte, qs []int8, d []float32, s8 []int32) float32 {
	panic("cpu: no blocked kernels on this architecture")
}

func blkDotRows(bk *blkKernel, rows []byte, rb int, qs []int8, d []float32, s8 []int32, out []float32) {
	panic("cpu: no blocked kernels on this architecture")
}

// decodeRows: no many-row decode kernels on this architecture.
func decodeRows(t ggml.Type, rows []byte, rb int, v actView, out []float32) bool { return false }

// packPanelSIMD: no SIMD panel packing on this architecture.
func packPanelSIMD(bk *blkKernel, panel, rows, next []byte, rb, nb int) bool { return false }

// blkDotRowsFew: no few-token decode kernels on this architecture (the
// caller takes the tokens one at a time).
func blkDotRowsFew(bk *blkKernel, rows []byte, rb int, qs []int8, d []float32, n int, out []float32, ostride int) bool {
	return false
}
