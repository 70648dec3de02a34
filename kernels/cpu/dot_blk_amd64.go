package cpu

import (
	"oengine/ggml"
)

// Blocked AVX2 kernels (dot_blk_amd64.s); see dot_blk.go.

//go:noescape
func gemmQ4_0x8AVX2(row *byte, qs *int8, dT *float32, s8T *int32, nb, cols int, out *float32)

//go:noescape
func gemmQ8_0x8AVX2(row *byte, qs *int8, dT *float32, nb, cols int, out *float32)

//go:noescape
func gemvQ4_0x8AVX2(row *byte, rb int, qs *int8, d *float32, s8 *int32, nb int, out *float32)

//go:noescape
func gemvQ8_0x8AVX2(row *byte, rb int, qs *int8, d *float32, nb int, out *float32)

//go:noescape
func gemmQ4_0pAVX2(panel *byte, qs *int8, d *float32, s8 *int32, nb int, out *float32)

//go:noescape
func gemmQ4_0p4AVX2(panel *byte, qs *int8, d *float32, s8 *int32, nb, qstride, dstride int, out *float32)

//go:noescape
func gemmQ8_0p4AVX2(panel *byte, qs *int8, d *float32, nb, qstride, dstride int, out *float32)

// blkGemmPacked4: a packed panel against tokens i..i+3 (out[t*8+r]); it
// reports false (doing nothing) for types without a four-token kernel.
func blkGemmPacked4(bk *blkKernel, panel []byte, a *actBuf, i, cols int, out *[32]float32) bool {
	nb := cols / qk
	_ = panel[nb*panelBlock-1]
	_ = a.qs[(i+4)*cols-1]
	_ = a.d[(i+4)*nb-1]
	if !bk.q4 {
		gemmQ8_0p4AVX2(&panel[0], &a.qs[i*cols], &a.d[i*nb], nb, cols, 4*nb, &out[0])
		return true
	}
	_ = a.s8[(i+4)*nb-1]
	gemmQ4_0p4AVX2(&panel[0], &a.qs[i*cols], &a.d[i*nb], &a.s8[i*nb], nb, cols, 4*nb, &out[0])
	return true
}

//go:noescape
func gemmQ8_0pAVX2(panel *byte, qs *int8, d *float32, nb int, out *float32)

// blkPacked says blkGemmPacked exists.
const blkPacked = true

// blkGemmPacked: the 8 rows of a packed panel (packPanel) against token i.
func blkGemmPacked(bk *blkKernel, panel []byte, a *actBuf, i, cols int, out *[8]float32) {
	nb := cols / qk
	_ = panel[nb*panelBlock-1]
	_ = a.qs[(i+1)*cols-1]
	_ = a.d[(i+1)*nb-1]
	if bk.q4 {
		_ = a.s8[(i+1)*nb-1]
		gemmQ4_0pAVX2(&panel[0], &a.qs[i*cols], &a.d[i*nb], &a.s8[i*nb], nb, &out[0])
		return
	}
	gemmQ8_0pAVX2(&panel[0], &a.qs[i*cols], &a.d[i*nb], nb, &out[0])
}

var blkKernels = map[ggml.Type]*blkKernel{
	ggml.TypeQ4_0:   {q4: true},
	ggml.TypeQ8_0:   {q4: false},
	ggml.TypeIQ4_NL: {conv: iq4NLToQ8_0Rows, gemv: iq4NLGemv8, gemvMax: 4}, // with VNNI: iq4NLGemvZ, 6 (kernelSetFor)
	ggml.TypeQ5_0:   {conv: q5_0ToQ8_0Rows, gemv: q5_0Gemv8, gemvMax: 3},   // with VNNI, whole row groups in its decode layout
	ggml.TypeMXFP4:  {conv: mxfp4ToQ8_0Rows, gemv: mxfp4Gemv8, gemvMax: 4}, // mxfp4_amd64.s
}

func blkGemm(bk *blkKernel, row []byte, a *actBuf, g, cols int, out *[8]float32) {
	nb := cols / qk
	qs := a.qs[:cap(a.qs)] // padded to whole groups
	_ = qs[(g*8+8)*cols-1]
	_ = a.dT[(g+1)*nb*8-1]
	if bk.q4 {
		_ = row[18*nb-1]
		_ = a.s8T[(g+1)*nb*8-1]
		gemmQ4_0x8AVX2(&row[0], &qs[g*8*cols], &a.dT[g*nb*8], &a.s8T[g*nb*8], nb, cols, &out[0])
		return
	}
	_ = row[34*nb-1]
	gemmQ8_0x8AVX2(&row[0], &qs[g*8*cols], &a.dT[g*nb*8], nb, cols, &out[0])
}

func blkGemv(bk *blkKernel, rows []byte, rb int, a *actBuf, i, cols int, out *[8]float32) {
	nb := cols / qk
	_ = a.qs[(i+1)*cols-1]
	_ = a.d[(i+1)*nb-1]
	if bk.q4 {
		_ = rows[7*rb+18*nb-1]
		_ = a.s8[(i+1)*nb-1]
		gemvQ4_0x8AVX2(&rows[0], rb, &a.qs[i*cols], &a.d[i*nb], &a.s8[i*nb], nb, &out[0])
		return
	}
	_ = rows[7*rb+34*nb-1]
	gemvQ8_0x8AVX2(&rows[0], rb, &a.qs[i*cols], &a.d[i*nb], nb, &out[0])
}

//go:noescape
func gemv1Q4_0AVX2(row *byte, qs *int8, d *float32, s8 *int32, nb int) float32

//go:noescape
func gemv1Q8_0AVX2(row *byte, qs *int8, d *float32, nb int) float32

// blkSingle is the one-pair kernel of a blocked type (gemv1*: one row read
// as a single sequential stream, which is what decoding from DRAM wants).
// The view must come from an actBuf with s8 filled.
func blkSingle(bk *blkKernel) func(row []byte, v actView) float32 {
	if bk.conv != nil { // tests only: MatMul converts whole tiles (tileConv)
		return func(row []byte, v actView) float32 {
			q8 := make([]byte, 34*len(v.d))
			bk.conv(q8, row, len(v.d))
			return blkDot1(bk, q8, v.qs, v.d, v.s8)
		}
	}
	return func(row []byte, v actView) float32 {
		return blkDot1(bk, row, v.qs, v.d, v.s8)
	}
}

// blkDot1: one row against one token (qs, d, s8 of that token).
func blkDot1(bk *blkKernel, row []byte, qs []int8, d []float32, s8 []int32) float32 {
	nb := len(d)
	if nb == 0 {
		return 0
	}
	_ = qs[32*nb-1]
	if bk.q4 {
		_ = s8[nb-1]
		_ = row[18*nb-1]
		return gemv1Q4_0AVX2(&row[0], &qs[0], &d[0], &s8[0], nb)
	}
	_ = row[34*nb-1]
	return gemv1Q8_0AVX2(&row[0], &qs[0], &d[0], nb)
}
