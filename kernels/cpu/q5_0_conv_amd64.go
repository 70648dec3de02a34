package cpu

//go:noescape
func q5_0ToQ8_0AVX2(dst, src *byte, nb int)

//go:noescape
func gemv8Q5_0AVX2(rows *byte, ngroups int, qs *int8, d *float32, nb, pf int, out *float32)

// q5_0ToQ8_0Rows is q5_0ToQ8_0 in AVX2 (blkKernel.conv; the blocked
// kernels run only on CPUs with AVX2).
func q5_0ToQ8_0Rows(dst, src []byte, nb int) { convRows(q5_0ToQ8_0AVX2, 22, dst, src, nb) }

// q5_0Gemv8 is the blocked kernels' gemv for Q5_0 (blkKernel.gemv): out[r]
// for the leading rows of rows (len(out) rows of rb bytes) that fill whole
// groups of 8 against one token, bitwise blkDot1 on the rows converted to
// Q8_0; it returns how many rows it computed (0 when the rows are not
// contiguous).
func q5_0Gemv8(rows []byte, rb int, qs []int8, d []float32, s8 []int32, out []float32) int {
	n, nb := len(out), len(d)
	if nb == 0 || rb != 22*nb || n < 8 {
		return 0
	}
	g := n / 8
	_ = rows[8*g*rb-1]
	_ = qs[32*nb-1]
	gemv8Q5_0AVX2(&rows[0], g, &qs[0], &d[0], nb, gemvAhead*8*rb, &out[0])
	return 8 * g
}
