package cpu

import (
	"oengine/ggml"
)

// Decode kernels over groups of 8 rows (dot_gemv_amd64.s): per (row,
// token) pair bitwise the one-row kernels gemv1Q4_0AVX2 / gemv1Q8_0AVX2.

//go:noescape
func gemv8Q4_0AVX2(rows *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)

//go:noescape
func gemv16Q4_0Z(rows *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)

//go:noescape
func gemv8Q8_0AVX2(rows *byte, ngroups int, qs *int8, d *float32, nb, pf int, out *float32)

//go:noescape
func gemv8Q8_0x2AVX2(rows *byte, ngroups int, qs *int8, d *float32, nb, pf int, out *float32, qstride, dstride, ostride int)

//go:noescape
func gemv8Q8_0x3AVX2(rows *byte, ngroups int, qs *int8, d *float32, nb, pf int, out *float32, qstride, dstride, ostride int)

// readAVX2 reads n bytes at p (the read-bandwidth reference of the decode
// benchmarks).
//
//go:noescape
func readAVX2(p *byte, n, pf int) uint64

// gemvAhead is the prefetch distance of the 8-row kernels in groups of 8
// rows (BenchmarkDecodePF: one group ahead is clearly faster than none or
// half a group, and about as fast as two).
const gemvAhead = 1

// blkDotRows computes out[j] = row j of rows (len(out) contiguous rows of
// rb bytes each) against one token (qs, d, s8 of that token), bitwise
// blkDot1 of each row: whole groups of 8 rows through the 8-row kernels,
// the rest through blkDot1.
func blkDotRows(bk *blkKernel, rows []byte, rb int, qs []int8, d []float32, s8 []int32, out []float32) {
	blkDotRowsPF(bk, rows, rb, qs, d, s8, out, gemvAhead*8*rb)
}

// blkDotRowsPF is blkDotRows with the prefetch distance pf in bytes.
func blkDotRowsPF(bk *blkKernel, rows []byte, rb int, qs []int8, d []float32, s8 []int32, out []float32, pf int) {
	n, nb := len(out), len(d)
	if n == 0 {
		return
	}
	if nb == 0 {
		clear(out)
		return
	}
	_ = qs[32*nb-1]
	g := n / 8
	bb := 34
	if bk.q4 {
		bb = 18
	}
	if rb != bb*nb { // rows not contiguous: one at a time
		g = 0
	}
	if g >= 2 && bk.q4 && gemvZ {
		g16 := n / 16
		_ = rows[16*g16*rb-1]
		_ = out[16*g16-1]
		_ = s8[nb-1]
		gemv16Q4_0Z(&rows[0], g16, &qs[0], &d[0], &s8[0], nb, 2*pf, &out[0])
		r := 16 * g16
		rows, out, n = rows[r*rb:], out[r:], n-r
		g = n / 8
	}
	if g > 0 {
		_ = rows[8*g*rb-1]
		_ = out[8*g-1]
		if bk.q4 {
			_ = s8[nb-1]
			gemv8Q4_0AVX2(&rows[0], g, &qs[0], &d[0], &s8[0], nb, pf, &out[0])
		} else {
			gemv8Q8_0AVX2(&rows[0], g, &qs[0], &d[0], nb, pf, &out[0])
		}
	}
	for r := 8 * g; r < n; r++ {
		out[r] = blkDot1(bk, rows[r*rb:(r+1)*rb], qs, d, s8)
	}
}

//go:noescape
func gemvQ4_KAVX2(rows *byte, n int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)

//go:noescape
func gemvQ6_KAVX2(rows *byte, n int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)

//go:noescape
func gemvF16AVX2(rows *byte, n, rb int, x *float32, n8, pf int, out *float32)

// decodePF is the prefetch distance in bytes of the one-stream decode
// kernels (K-quants, F16), ahead of the byte being read (BenchmarkDecodePF:
// 1-2 KiB beat none and 4 KiB).
const decodePF = 2048

// rowsKernels are the decode kernels that read many rows in one call.
var rowsKernels = map[ggml.Type]rowsKernel{
	ggml.TypeQ4_K: func(rows []byte, rb int, v actView, out []float32, pf int) {
		gemvK(rows, rb, 144, v, out, pf, gemvQ4_KAVX2, ggml.TypeQ4_K)
	},
	ggml.TypeQ6_K: func(rows []byte, rb int, v actView, out []float32, pf int) {
		gemvK(rows, rb, 210, v, out, pf, gemvQ6_KAVX2, ggml.TypeQ6_K)
	},
	ggml.TypeF16: gemvF16,
}

// gemvK runs a K-quant rows kernel (bb bytes per super-block) over
// contiguous rows; other layouts go row by row through the one-row kernel.
func gemvK(rows []byte, rb, bb int, v actView, out []float32, pf int,
	f func(rows *byte, n int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32), t ggml.Type) {
	n, nb := len(out), len(v.d)
	if n == 0 {
		return
	}
	if nb == 0 || rb != bb*nb {
		dot := simdKernels[t]
		for r := range out {
			out[r] = dot(rows[r*rb:(r+1)*rb], v)
		}
		return
	}
	_ = rows[n*rb-1]
	_ = v.qs[qkK*nb-1]
	_ = v.bsums[16*nb-1]
	f(&rows[0], n, &v.qs[0], &v.d[0], &v.bsums[0], nb, pf, &out[0])
}

// gemvF16: F16 rows against float32 activations; the last cols%8
// elements of each row are added as in the one-row kernel.
func gemvF16(rows []byte, rb int, v actView, out []float32, pf int) {
	n, x := len(out), v.x
	if n == 0 {
		return
	}
	n8 := len(x) &^ 7
	if n8 == 0 || rb < 2*len(x) {
		dot := simdKernels[ggml.TypeF16]
		for r := range out {
			out[r] = dot(rows[r*rb:(r+1)*rb], v)
		}
		return
	}
	_ = rows[(n-1)*rb+2*len(x)-1]
	gemvF16AVX2(&rows[0], n, rb, &x[0], n8, pf, &out[0])
	if n8 < len(x) {
		tab := f16Table()
		for r := range out {
			s := out[r]
			row := rows[r*rb:]
			for i := n8; i < len(x); i++ {
				s += tab[le16(row[2*i:])] * x[i]
			}
			out[r] = s
		}
	}
}

// decodeRows computes out[j] = dot(row j of rows, v) with t's many-row
// kernel and reports whether t has one (else it does nothing).
func decodeRows(t ggml.Type, rows []byte, rb int, v actView, out []float32) bool {
	rk, ok := active.rows[t]
	if !ok {
		return false
	}
	rk(rows, rb, v, out, decodePF)
	return true
}

// blkDotRowsFew is blkDotRows for the n = 2 or 3 consecutive tokens of
// qs and d (token t at qs[t·32·nb:], d[t·nb:]), out[t·ostride + j] for
// row j: Q8_0 rows read once for all the tokens (gemv8Q8_0x2AVX2,
// gemv8Q8_0x3AVX2), each result bitwise blkDot1's. It reports whether it
// did; it does nothing for Q4_0, other token counts, rows that are not
// contiguous, or with q8FewOn off.
func blkDotRowsFew(bk *blkKernel, rows []byte, rb int, qs []int8, d []float32, n int, out []float32, ostride int) bool {
	nb := len(d) / max(n, 1)
	if bk.q4 || !q8FewOn || n < 2 || n > 3 || nb == 0 || rb != 34*nb || len(rows)%rb != 0 {
		return false
	}
	nr, cols := len(rows)/rb, qk*nb
	if g := nr / 8; g > 0 {
		_ = rows[8*g*rb-1]
		_ = qs[n*cols-1]
		_ = d[n*nb-1]
		_ = out[(n-1)*ostride+8*g-1]
		f := gemv8Q8_0x2AVX2
		if n == 3 {
			f = gemv8Q8_0x3AVX2
		}
		f(&rows[0], g, &qs[0], &d[0], nb, gemvAhead*8*rb, &out[0], cols, 4*nb, 4*ostride)
	}
	for r := nr / 8 * 8; r < nr; r++ {
		for t := range n {
			out[t*ostride+r] = blkDot1(bk, rows[r*rb:(r+1)*rb], qs[t*cols:(t+1)*cols], d[t*nb:(t+1)*nb], nil)
		}
	}
	return true
}
