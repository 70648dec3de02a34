package cpu

import "oengine/ggml"

// F16 rows × two or three tokens (dot_f16rows_amd64.s): a row is read
// once for all the tokens, with the decode kernel's prefetch; each result
// is bitwise the one-token dotF16AVX2's.

//go:noescape
func f16Rows2AVX2(rows *byte, nr, rb int, x *float32, n8, xstride, pf int, out *float32, ostride int)

//go:noescape
func f16Rows3AVX2(rows *byte, nr, rb int, x *float32, n8, xstride, pf int, out *float32, ostride int)

// f16RowsKernels[n] is the kernel for n tokens.
var f16RowsKernels = [...]func(rows *byte, nr, rb int, x *float32, n8, xstride, pf int, out *float32, ostride int){
	2: f16Rows2AVX2, 3: f16Rows3AVX2,
}

// f16RowsMax is the most tokens the rows kernels take in one call.
const f16RowsMax = len(f16RowsKernels) - 1

// rowsF16 computes rows [r0, r1) × tokens [t0, t1) of op with a rows
// kernel when op is F16 and 2 ≤ t1-t0 ≤ f16RowsZMax on an AVX-512 CPU
// (dot_f16rowsz_avx512_amd64.go) or 2 ≤ t1-t0 ≤ f16RowsMax on an AVX2
// one, and reports whether it did (else it does nothing, and the tiles,
// the 2×2 kernel and the one-token kernel compute them).
func (p *Pool) rowsF16(op *opPlan, r0, r1, t0, t1 int) bool {
	w, x := op.w, p.scratch.x
	n, cols, rb, dst := t1-t0, w.Cols, op.rb, op.dst
	if w.Type != ggml.TypeF16 || r1 <= r0 {
		return false
	}
	n8 := cols &^ 7
	switch {
	case rowsZFits(op, n):
		p.rowsF16Z(op, r0, r1, t0, t1) // AVX-512, two to eight tokens
	case hasAVX2 && f16FewOn && n >= 2 && n <= f16RowsMax && n8 > 0:
		// Bounds for the assembly: rows < r1, tokens < t1, elements < cols.
		_ = w.Data[(r1-1)*rb+2*cols-1]
		_ = x[t1*cols-1]
		_ = dst[(t1-1)*w.Rows+r1-1]
		f16RowsKernels[n](&w.Data[r0*rb], r1-r0, rb, &x[t0*cols], n8, 4*cols, decodePF, &dst[t0*w.Rows+r0], 4*w.Rows)
	default:
		return false
	}
	if n8 < cols { // the last cols%8 elements, as the one-row kernel adds them
		tab := f16Table()
		for t := t0; t < t1; t++ {
			xt := x[t*cols : (t+1)*cols]
			for r := r0; r < r1; r++ {
				s := dst[t*w.Rows+r]
				row := w.Data[r*rb:]
				for i := n8; i < cols; i++ {
					s += tab[le16(row[2*i:])] * xt[i]
				}
				dst[t*w.Rows+r] = s
			}
		}
	}
	return true
}
