package cpu

//go:noescape
func mxfp4ToQ8_0AVX2(dst, src *byte, nb int)

//go:noescape
func gemv8MXFP4AVX2(rows *byte, ngroups int, qs *int8, d *float32, nb, pf int, out *float32)

// mxfp4ToQ8_0Rows is mxfp4ToQ8_0 in AVX2 (blkKernel.conv; the blocked
// kernels run only on CPUs with AVX2).
func mxfp4ToQ8_0Rows(dst, src []byte, nb int) { convRows(mxfp4ToQ8_0AVX2, 17, dst, src, nb) }

// mxfp4Gemv8 is the blocked kernels' gemv for MXFP4 (blkKernel.gemv): the
// leading rows that fill whole groups of 8 against one token
// (mxfp4_amd64.s), bitwise blkDot1 on the rows converted to Q8_0; it
// returns how many rows it computed (0 when the rows are not contiguous).
func mxfp4Gemv8(rows []byte, rb int, qs []int8, d []float32, s8 []int32, out []float32) int {
	n, nb := len(out), len(d)
	if nb == 0 || rb != 17*nb || n < 8 {
		return 0
	}
	_ = rows[n*rb-1]
	_ = qs[32*nb-1]
	g := n / 8
	gemv8MXFP4AVX2(&rows[0], g, &qs[0], &d[0], nb, gemvAhead*8*rb, &out[0])
	return 8 * g
}
