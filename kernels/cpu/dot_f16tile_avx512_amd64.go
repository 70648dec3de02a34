package cpu

import "unsafe"

// AVX-512 F16 prefill tile (dot_f16tile_avx512_amd64.s): four rows × six tokens =
// 24 (row, token) pairs per register tile, each pair bitwise the one-token
// dotF16AVX2 (one zmm holds both of its accumulator chains).

//go:noescape
func f16Tile4x6AVX512(rows *byte, rb, ng int, x *float32, n, xstride int, acc *byte, dst *float32, dstride int)

const (
	f16zRows, f16zToks = 4, 6
	// f16zAccBytes is one row group's accumulators: 24 pairs × 16 lanes.
	f16zAccBytes = f16zRows * f16zToks * 16 * 4
	// f16zMaxGroups row groups per kernel call: the 16-row work items of
	// prefill in one call.
	f16zMaxGroups = 4
)

// tileF16Z is tileF16 with the AVX-512 4×6 tile: it computes rows
// [r0, r1) × whole groups of six tokens from t0 and returns the first
// token it did not compute, or ok = false when it does not apply (no
// AVX-512, fewer than four rows or six tokens, rows whose length is not a
// multiple of 8, or a tile shape sh other than six tokens, which tests
// and benchmarks select; the caller checked the weight type). It takes
// over the 2×6 shape's token groups, so callers see the same tokens done.
// Rows left over from the row groups use the four-token and one-token
// kernels.
func (p *Pool) tileF16Z(op *opPlan, sh f16Shape, r0, r1, t0, t1 int) (int, bool) {
	w, x := op.w, p.scratch.x
	cols := w.Cols
	if !f16zOn || sh.toks != f16zToks || cols%8 != 0 || r1-r0 < f16zRows || t1-t0 < f16zToks {
		return t0, false
	}
	rb, dst := op.rb, op.dst
	// Bounds for the assembly: rows < r1, tokens < t1, elements < cols.
	_ = w.Data[r1*rb-1]
	_ = x[t1*cols-1]
	_ = dst[(t1-1)*w.Rows+r1-1]
	// Accumulators between 1024-element blocks, 64-byte aligned (no zmm
	// store split over two cache lines).
	var accBuf [f16zMaxGroups*f16zAccBytes + 64]byte
	nr := (r1 - r0) / f16zRows * f16zRows // rows in whole groups
	const T = f16zToks
	i := t0
	for ; i+T <= t1; i += T {
		xs := x[i*cols : (i+T)*cols]
		d := dst[i*w.Rows : (i+T)*w.Rows]
		for g0 := r0; g0 < r0+nr; g0 += f16zMaxGroups * f16zRows {
			ng := min(f16zMaxGroups, (r0+nr-g0)/f16zRows)
			acc := &accBuf[-uintptr(unsafe.Pointer(&accBuf[0]))&63]
			// d[t*w.Rows + r] for t < T, r in [g0, g0+4·ng): in bounds.
			f16Tile4x6AVX512(&w.Data[g0*rb], rb, ng, &xs[0], cols, 4*cols, acc, &d[g0], 4*w.Rows)
		}
		if nr < r1-r0 {
			f16LeftoverRows(op, xs, r0+nr, r1, T, d)
		}
	}
	return i, true
}
