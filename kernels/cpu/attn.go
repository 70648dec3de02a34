package cpu

import "unsafe"

// Paged attention.
//
// K and V of one layer live in pages of PageSize token rows; each row holds
// Stride values (all KV heads: [kvHeads][headDim]). Row r of page p starts at
// element (p*PageSize + r)*Stride. A sequence's page table lists its pages in
// position order, so position pos is row pos%PageSize of page
// table[pos/PageSize].

// KVRows is one layer's K (or V) store as attention reads it. Exactly one of
// F16 (IEEE half bits) and F32 is non-nil.
type KVRows struct {
	F16      []uint16
	F32      []float32
	PageSize int // token rows per page
	Stride   int // values per row
}

// row returns the index of the first value of position pos, column off.
func (kv KVRows) index(table []int32, pos, off int) int {
	return (int(table[pos/kv.PageSize])*kv.PageSize+pos%kv.PageSize)*kv.Stride + off
}

// AttnScratch is the scratch length Attend needs for g heads over n
// positions of dimension d (either path).
func AttnScratch(g, n, d int) int { return max(g*n+attnBlock*d+d*attnPad(g), 2*g*d+d+2*g) }

// attnPad is g rounded up to a multiple of 8: the width of the transposed
// query group (attnTransposeQ).
func attnPad(g int) int { return (g + 7) &^ 7 }

// attnBlock is the number of V rows Attend widens into its scratch and
// accumulates in one attnAxpyBlock call.
const attnBlock = 32

// Attend computes causal attention for g query heads that share one KV head:
//
//	out[h] = Σ_{p<n} softmax_p(scale · q[h]·k_p) · v_p
//
// q, out: [g][d] with d = len(q)/g; k_p, v_p: d values at column off of
// position p's row. n ≥ 1 positions are read through table. scratch must
// hold AttnScratch(g, n, d) values.
//
// Attend uses float32 dot products (one FMA chain over the head
// dimension per score), a two-pass softmax that subtracts the
// row maximum, and float32 V accumulation, whatever the store type (F16
// values are widened exactly). AttendF16 is the variant that rounds like
// llama.cpp's one-row flash attention.
func Attend(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, scratch []float32) {
	d := len(q) / g
	q, out = q[:g*d], out[:g*d]
	scores := scratch[:n*g] // [n][g]: position-major, so a position's g weights are contiguous
	// K and V rows go through the scratch in blocks of attnBlock
	// positions ([nb][d]), widened from F16 or copied; each block is one
	// assembly call that computes exactly what per-position calls would.
	blk := scratch[n*g : n*g+attnBlock*d]
	// The scores are one FMA chain per (position, head) (attnScoresGo),
	// computed with the g heads in the vector lanes: each K value is
	// read once for the whole group, against q transposed to [d][g].
	qt := scratch[n*g+attnBlock*d : n*g+attnBlock*d+d*attnPad(g)]
	attnTransposeQ(qt, q, g, d)
	// The K/V of a decode batch come from memory: the K pass prefetches
	// K two blocks ahead and, block by block, the V rows the V pass will
	// read (they wait in L2 while the softmax runs), so the V pass reads
	// from cache (BenchmarkAttendStep).
	k.prefetchRows(table, 0, min(2*attnBlock, n), off, d)
	for p0 := 0; p0 < n; p0 += attnBlock {
		nb := min(attnBlock, n-p0)
		if next := p0 + 2*attnBlock; next < n {
			k.prefetchRows(table, next, min(attnBlock, n-next), off, d)
		}
		v.prefetchRows(table, p0, nb, off, d)
		k.loadRows(blk, table, p0, nb, off, d)
		attnScores(scores[p0*g:(p0+nb)*g], q, qt, blk[:nb*d], nb, g, d)
	}
	// Softmax per head, unnormalised; the sum is applied to the output.
	var small [16]float64 // GQA groups are small: no allocation
	var smallM [16]float32
	sums, maxes := small[:0], smallM[:0]
	if g <= len(small) {
		sums, maxes = small[:g], smallM[:g]
	} else {
		sums, maxes = make([]float64, g), make([]float32, g)
	}
	attnScaleMax(scores, g, scale, maxes) // scores·scale in place, per-head maxima
	attnExp(scores, g, maxes, sums)       // e = exp(s − max), sums (attn_exp.go)
	for i := range out {
		out[i] = 0
	}
	// out accumulates position by position, as nb attnAxpy calls would.
	for p0 := 0; p0 < n; p0 += attnBlock {
		nb := min(attnBlock, n-p0)
		v.loadRows(blk, table, p0, nb, off, d)
		attnAxpyBlock(out, blk[:nb*d], scores[p0*g:(p0+nb)*g], nb, g, d)
	}
	for h := 0; h < g; h++ {
		inv := float32(1 / sums[h])
		o := out[h*d : h*d+d]
		for j := range o {
			o[j] *= inv
		}
	}
}

// loadRow returns the d values starting at element i as float32, converting
// F16 rows into buf.
func (kv KVRows) loadRow(buf []float32, i, d int) []float32 {
	if kv.F32 != nil {
		return kv.F32[i : i+d]
	}
	attnCvt(buf[:d], kv.F16[i:i+d])
	return buf[:d]
}

// loadRows writes the d values at column off of positions p0..p0+nb-1
// into dst ([nb][d] float32), widening F16 rows one page run at a time.
func (kv KVRows) loadRows(dst []float32, table []int32, p0, nb, off, d int) {
	for j := 0; j < nb; {
		p := p0 + j
		run := min(nb-j, kv.PageSize-p%kv.PageSize) // rows left in p's page
		i := kv.index(table, p, off)
		if kv.F32 != nil {
			for r := 0; r < run; r++ {
				copy(dst[(j+r)*d:(j+r+1)*d], kv.F32[i+r*kv.Stride:i+r*kv.Stride+d])
			}
		} else {
			attnCvtRows(dst[j*d:(j+run)*d], kv.F16[i:], kv.Stride, run, d)
		}
		j += run
	}
}

// prefetchRows prefetches what loadRows(_, table, p0, nb, off, d) reads.
func (kv KVRows) prefetchRows(table []int32, p0, nb, off, d int) {
	for j := 0; j < nb; {
		p := p0 + j
		run := min(nb-j, kv.PageSize-p%kv.PageSize) // rows left in p's page
		i := kv.index(table, p, off)
		if kv.F32 != nil {
			attnPrefetchRows(unsafe.Pointer(&kv.F32[i]), false, kv.Stride, run, d)
		} else {
			attnPrefetchRows(unsafe.Pointer(&kv.F16[i]), true, kv.Stride, run, d)
		}
		j += run
	}
}

// dotF32 is a float32 dot product with four accumulators.
func dotF32(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy does y += a*x.
func axpy(y, x []float32, a float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// StoreRowF16 writes src as F16 (round to nearest even) into dst.
func StoreRowF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, x := range src {
		dst[i] = F32ToF16(x)
	}
}
