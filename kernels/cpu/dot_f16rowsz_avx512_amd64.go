package cpu

// AVX-512 F16 rows × two to eight tokens (dot_f16rowsz_avx512_amd64.s):
// each weight row is read once for all the tokens, two rows at a time,
// and each result is bitwise the one-token dotF16AVX2's.

//go:noescape
func f16RowsZ2AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)

//go:noescape
func f16RowsZ3AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)

//go:noescape
func f16RowsZ4AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)

//go:noescape
func f16RowsZ5AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)

//go:noescape
func f16RowsZ6AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)

//go:noescape
func f16RowsZ7AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)

//go:noescape
func f16RowsZ8AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)

// f16RowsZKernels[n] is the kernel for n tokens.
var f16RowsZKernels = [...]func(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int){
	2: f16RowsZ2AVX512, 3: f16RowsZ3AVX512, 4: f16RowsZ4AVX512, 5: f16RowsZ5AVX512,
	6: f16RowsZ6AVX512, 7: f16RowsZ7AVX512, 8: f16RowsZ8AVX512,
}

// f16RowsZMax is the most tokens the AVX-512 rows kernels take in one call.
const f16RowsZMax = len(f16RowsZKernels) - 1

// rowsZFits reports whether the AVX-512 rows kernels compute n tokens of
// op (the caller checked the weight type and the rows).
func rowsZFits(op *opPlan, n int) bool {
	return f16RowsZOn && f16FewOn && n >= 2 && n <= f16RowsZMax && op.w.Cols >= 8
}

// rowsF16Z computes rows [r0, r1) × tokens [t0, t1) of op's first
// cols&^7 elements with the AVX-512 rows kernel (rowsZFits(op, t1-t0),
// r1 > r0): the range's first and second halves of rows are its two
// streams, and an odd last row runs as both streams of one more call,
// writing its result twice to the same place.
func (p *Pool) rowsF16Z(op *opPlan, r0, r1, t0, t1 int) {
	w, x := op.w, p.scratch.x
	cols, rb, dst := w.Cols, op.rb, op.dst
	n8 := cols &^ 7
	k := f16RowsZKernels[t1-t0]
	// Bounds for the assembly: rows < r1, tokens < t1, elements < n8.
	_ = w.Data[(r1-1)*rb+2*n8-1]
	_ = x[t1*cols-1]
	_ = dst[(t1-1)*w.Rows+r1-1]
	xs, ostride := &x[t0*cols], 4*w.Rows
	if h := (r1 - r0) / 2; h > 0 {
		k(&w.Data[r0*rb], h*rb, h, rb, xs, n8, 4*cols, decodePF, &dst[t0*w.Rows+r0], 4*h, ostride)
	}
	if (r1-r0)%2 == 1 {
		r := r1 - 1
		k(&w.Data[r*rb], 0, 1, rb, xs, n8, 4*cols, decodePF, &dst[t0*w.Rows+r], 0, ostride)
	}
}
