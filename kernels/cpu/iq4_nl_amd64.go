package cpu

//go:noescape
func iq4NLToQ8_0AVX2(dst, src *byte, nb int)

// One-token IQ4_NL kernels over groups of contiguous rows
// (iq4_gemv_amd64.s), bitwise blkDot1 on the rows converted to Q8_0.

//go:noescape
func gemv8IQ4_NLAVX2(rows *byte, ngroups int, qs *int8, d *float32, nb, pf int, out *float32)

//go:noescape
func gemv16IQ4_NLZ(rows *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)

// iq4NLGemv8 and iq4NLGemvZ are the blocked kernels' gemv for IQ4_NL
// (blkKernel.gemv) on AVX2 and on AVX-512 VNNI.
func iq4NLGemv8(rows []byte, rb int, qs []int8, d []float32, s8 []int32, out []float32) int {
	return iq4NLGemv(rows, rb, qs, d, s8, out, false)
}

func iq4NLGemvZ(rows []byte, rb int, qs []int8, d []float32, s8 []int32, out []float32) int {
	return iq4NLGemv(rows, rb, qs, d, s8, out, true)
}

// iq4NLGemv computes out[r] for the leading rows of rows (len(out) rows
// of rb bytes) that fill whole groups (16 rows with z, the AVX-512 VNNI
// kernel, then 8) against one token, and returns how many it computed: 0
// when the rows are not contiguous. The caller checked that the CPU runs
// the kernels.
func iq4NLGemv(rows []byte, rb int, qs []int8, d []float32, s8 []int32, out []float32, z bool) int {
	n, nb := len(out), len(d)
	if nb == 0 || rb != 18*nb || n < 8 {
		return 0
	}
	_ = rows[n*rb-1]
	_ = qs[32*nb-1]
	_ = s8[nb-1]
	pf := gemvAhead * 8 * rb
	done := 0
	if g := n / 16; z && g > 0 {
		gemv16IQ4_NLZ(&rows[0], g, &qs[0], &d[0], &s8[0], nb, 2*pf, &out[0])
		done = 16 * g
	}
	if g := (n - done) / 8; g > 0 {
		gemv8IQ4_NLAVX2(&rows[done*rb], g, &qs[0], &d[0], nb, pf, &out[done])
		done += 8 * g
	}
	return done
}

// iq4NLToQ8_0Rows is iq4NLToQ8_0 in AVX2 (blkKernel.conv; the blocked
// kernels run only on CPUs with AVX2).
func iq4NLToQ8_0Rows(dst, src []byte, nb int) { convRows(iq4NLToQ8_0AVX2, 18, dst, src, nb) }

// convRows runs the AVX2 conversion f of nb blocks of bb bytes in src into
// Q8_0 blocks in dst, checking the bounds it relies on.
func convRows(f func(dst, src *byte, nb int), bb int, dst, src []byte, nb int) {
	if nb <= 0 {
		return
	}
	_ = src[bb*nb-1]
	_ = dst[34*nb-1]
	f(&dst[0], &src[0], nb)
}

// The IQ4_NL decode-layout kernels (iq4_nl_decode_vnni_amd64.s, written by
// blk_decode_gen.go).

//go:noescape
func gemv16IQ4_NLP(grp *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)

//go:noescape
func gemv16IQ4_NLPT2(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16IQ4_NLPT3(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16IQ4_NLPT4(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16IQ4_NLPT5(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16IQ4_NLPT6(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16IQ4_NLPT7(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16IQ4_NLPT8(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

// iq4zLayout is the IQ4_NL decode layout's entry for tileBlkLayout.
var iq4zLayout = blkZLayout{
	block: q4zBlock,
	gemv:  gemv16IQ4_NLP,
	few: [...]func(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int){
		2: gemv16IQ4_NLPT2, 3: gemv16IQ4_NLPT3, 4: gemv16IQ4_NLPT4, 5: gemv16IQ4_NLPT5,
		6: gemv16IQ4_NLPT6, 7: gemv16IQ4_NLPT7, 8: gemv16IQ4_NLPT8,
	},
	simd: packPanelFromIQ4ZSIMD,
	twin: packPanelFromIQ4Z,
}
