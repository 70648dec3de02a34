package cpu

import (
	"oengine/ggml"
)

// F16 prefill tiles (dot_f16tile_amd64.s): 12 (row, token) pairs per
// register tile, several row groups per call, each pair bitwise the
// one-token dotF16AVX2.

//go:noescape
func f16Tile3x4AVX2(rows *byte, rb, ng int, x *float32, n, xstride int, acc *byte)

//go:noescape
func f16Tile2x6AVX2(rows *byte, rb, ng int, x *float32, n, xstride int, acc *byte)

//go:noescape
func f16Tile2x5AVX2(rows *byte, rb, ng int, x *float32, n, xstride int, acc *byte)

//go:noescape
func f16FinStoreAVX2(acc *byte, ng, nr, nt, pt int, dst *float32, dstride int)

// f16AccBytes is the size of one row group's accumulators: two chains ×
// 12 pairs × 8 float32 lanes.
const f16AccBytes = 2 * 12 * 8 * 4

// f16Shape is a tile kernel: groups of rows × toks pairs (at most 12),
// pair p = pt·row + token in the accumulators.
type f16Shape struct {
	rows, toks, pt int
}

var (
	f16Shape34 = f16Shape{3, 4, 4}
	f16Shape26 = f16Shape{2, 6, 6}
	// f16Shape25 is the 2×6 tile for five tokens.
	f16Shape25 = f16Shape{2, 5, 6}
	// f16TileShape is the shape tileF16 uses: 2×6 covers the 16-row work
	// items of prefill without rows left over.
	f16TileShape = f16Shape26
)

// tile runs ng row groups × one token group (see f16Tile3x4AVX2).
func (sh f16Shape) tile(rows *byte, rb, ng int, x *float32, n, xstride int, acc *byte) {
	switch sh {
	case f16Shape34:
		f16Tile3x4AVX2(rows, rb, ng, x, n, xstride, acc)
	case f16Shape25:
		f16Tile2x5AVX2(rows, rb, ng, x, n, xstride, acc)
	default:
		f16Tile2x6AVX2(rows, rb, ng, x, n, xstride, acc)
	}
}

// tileF16 computes as much of rows [r0, r1) × tokens [t0, t1) of op as the
// tile kernels cover, whole groups of f16TileShape.toks tokens from t0,
// then, when four or five are left, one group of those with the 3×4 or
// the 2×5 tile, and returns the first token it did not compute (t0 when
// the tile does not apply: other weight types, no AVX2, too few rows or
// tokens, or rows whose length is not a multiple of 8). Rows left over
// from the row groups use the four-token and one-token kernels, so every
// result is bitwise dot's.
//
// Loop order: for each token group, one kernel call runs up to 8 row
// groups over the whole rows, block by block (a block of the token group,
// 6 KiB, stays in L1 for all row groups; the rows stream from L2 or, with
// a prefetch one block ahead, from memory); the accumulators live in a
// 6 KiB stack scratch.
func (p *Pool) tileF16(op *opPlan, r0, r1, t0, t1 int) int {
	if n := t1 - t0; op.w.Type == ggml.TypeF16 && rowsZFits(op, n) && !(f16zOn && n == f16zToks) {
		// AVX-512: the rows kernels (dot_f16rowsz*) take products of up
		// to eight tokens, except six, where the 4×6 tile is as fast
		// (BenchmarkMatMulFewTokens).
		return t0
	}
	i := p.tileF16Shape(op, f16TileShape, r0, r1, t0, t1)
	if f16TileShape == f16Shape34 {
		return i
	}
	// Four or five tokens left (a few decoding sequences, or one
	// verifying drafts): one tile reads each weight row once for all of
	// them, instead of twice through the 2×2 tile and the one-token
	// kernel. Without f16FewOn, as before it: the 3×4 tile for four of
	// them.
	switch left := t1 - i; {
	case rowsZFits(op, left):
		// AVX-512: the rows kernels (dot_f16rowsz*) take two to eight.
	case left == 5 && f16FewOn:
		i = p.tileF16Shape(op, f16Shape25, r0, r1, i, t1)
	case left >= 4:
		i = p.tileF16Shape(op, f16Shape34, r0, r1, i, t1)
	}
	return i
}

// tileF16Shape is tileF16 with one tile shape.
func (p *Pool) tileF16Shape(op *opPlan, sh f16Shape, r0, r1, t0, t1 int) int {
	w, x := op.w, p.scratch.x
	cols := w.Cols
	if w.Type != ggml.TypeF16 || !hasAVX2 || !f16TileOn || cols%8 != 0 || r1-r0 < sh.rows || t1-t0 < sh.toks {
		return t0
	}
	if i, ok := p.tileF16Z(op, sh, r0, r1, t0, t1); ok {
		return i // AVX-512 4×6 tile (dot_f16tile_avx512_amd64.go)
	}
	rb, dst := op.rb, op.dst
	// Bounds for the assembly: rows < r1, tokens < t1, elements < cols.
	_ = w.Data[r1*rb-1]
	_ = x[t1*cols-1]
	_ = dst[(t1-1)*w.Rows+r1-1]
	const maxGroups = 8
	var acc [maxGroups * f16AccBytes]byte // zero, and zeroed again by f16FinStoreAVX2
	nr := (r1 - r0) / sh.rows * sh.rows   // rows in whole groups
	T := sh.toks
	i := t0
	for ; i+T <= t1; i += T {
		xs := x[i*cols : (i+T)*cols]
		d := dst[i*w.Rows : (i+T)*w.Rows]
		for g0 := r0; g0 < r0+nr; g0 += maxGroups * sh.rows {
			ng := min(maxGroups, (r0+nr-g0)/sh.rows)
			sh.tile(&w.Data[g0*rb], rb, ng, &xs[0], cols, 4*cols, &acc[0])
			// d[t*w.Rows + r] for t < T, r in [g0, g0+ng·rows): in bounds.
			f16FinStoreAVX2(&acc[0], ng, sh.rows, T, sh.pt, &d[g0], 4*w.Rows)
		}
		if nr < r1-r0 {
			f16LeftoverRows(op, xs, r0+nr, r1, T, d)
		}
	}
	return i
}

// f16LeftoverRows computes rows [r0, r1) for the T tokens of xs ([T][cols])
// into d ([T][w.Rows]) with the four-token and one-token kernels.
func f16LeftoverRows(op *opPlan, xs []float32, r0, r1, T int, d []float32) {
	w, k := op.w, op.k
	cols, rb := w.Cols, op.rb
	var v actView
	t := 0
	for ; t+4 <= T; t += 4 {
		v.x = xs[t*cols : (t+4)*cols]
		for r := r0; r < r1; r++ {
			o := k.dot4(w.Data[r*rb:(r+1)*rb], v, cols)
			for j, val := range o {
				d[(t+j)*w.Rows+r] = val
			}
		}
	}
	for ; t < T; t++ {
		v.x = xs[t*cols : (t+1)*cols]
		for r := r0; r < r1; r++ {
			d[t*w.Rows+r] = k.dot(w.Data[r*rb:(r+1)*rb], v)
		}
	}
}
