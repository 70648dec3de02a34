package cpu

import (
	"math"
	"unsafe"
)

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
func AttnScratch(g, n, d int) int {
	return max(attnGroupsScratch(1, g, n, d), 2*g*d+d+2*g)
}

// AttnHeadsScratch is the scratch length AttendHeads needs for kvh KV
// heads of g query heads each over n positions of dimension d.
func AttnHeadsScratch(kvh, g, n, d int) int { return attnGroupsScratch(kvh, g, n, d) }

func attnGroupsScratch(kvh, g, n, d int) int {
	w := kvh * d
	return max(kvh*g*n+attnBlockRows(w)*w+kvh*d*attnPad(g), attnZScratch(kvh, g, n, d))
}

// attnPad is g rounded up to a multiple of 8: the width of the transposed
// query group (attnTransposeQ).
func attnPad(g int) int { return (g + 7) &^ 7 }

// attnBlockRows is the number of K or V rows of w values Attend widens
// into its scratch at a time: 32 rows of one 64-value head, 16 whole rows
// of tinyllama's four heads (16 KiB of float32, well inside L1).
func attnBlockRows(w int) int { return max(16, 2048/max(w, 1)) }

// Attend computes causal attention for g query heads that share one KV head:
//
//	out[h] = Σ_{p<n} softmax_p(scale · q[h]·k_p) · v_p
//
// q, out: [g][d] with d = len(q)/g; k_p, v_p: d values at column off of
// position p's row. n ≥ 1 positions are read through table. scratch must
// hold AttnScratch(g, n, d) values.
//
// Attend uses float32 dot products (one FMA chain over the head dimension
// per score, attnScoresGo), a two-pass softmax that subtracts the row
// maximum (float32 exponential expAttn, float64 sums), and float32 V
// accumulation in order of position, whatever the store type (F16 values
// are widened exactly). AttendF16 is the variant that rounds like
// llama.cpp's one-row flash attention.
func Attend(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, scratch []float32) {
	attendGroups(out, q, 1, g, k, v, table, n, AttnOpts{}, off, scale, scratch)
}

// AttnOpts are the variations of AttendWindow and AttendHeadsWindow.
type AttnOpts struct {
	// Skip: the first Skip positions (0 ≤ Skip < n) are masked out, the
	// attention of a sliding window whose first position lies Skip rows
	// into the first page of the table (a caller passes the table from the
	// page holding the window's start).
	Skip int
	// Softcap > 0 caps each scaled score s as Softcap·tanh(s/Softcap)
	// before the softmax (Gemma 2's attention logit soft-capping).
	Softcap float32
	// Sinks, when set, holds one logit per query head of the call ([kvh][g]
	// for AttendHeadsWindow, [g] for AttendWindow): gpt-oss's attention
	// sinks. Each joins its head's softmax as a position without a value,
	// so the weights of the real positions sum to less than 1:
	// out = Σ_p e^(s_p−m)·v_p / (Σ_p e^(s_p−m) + e^(sink−m)), m the maximum
	// of the scores and the sink.
	Sinks []float32
	// ALiBi, when set, holds one slope per query head of the call (laid
	// out as Sinks), and QPos the query's position: each scaled score of
	// position p gets −slope·|QPos − p| (ALiBi, jina-bert-v2's positions;
	// the table starts at position 0). Not with Softcap.
	ALiBi []float32
	QPos  int
}

// alibiBias is ALiBi's term for a query at qpos and a key at p, rounded
// as llama.cpp's soft_max adds slope·mask with mask = −|qpos − p|.
func alibiBias(slope float32, qpos, p int) float32 {
	d := qpos - p
	if d < 0 {
		d = -d
	}
	return float32(slope * float32(-d))
}

// raiseMax raises the maxima m of the g query heads from head first to
// their sinks (o.Sinks), before the exponentials.
func (o AttnOpts) raiseMax(m []float32, first, g int) {
	if o.Sinks == nil {
		return
	}
	for j, s := range o.Sinks[first : first+g] {
		m[j] = max(m[j], s)
	}
}

// addSinks adds each sink's weight e^(sink−m) to the softmax sums of the g
// query heads from head first, after the exponentials.
func (o AttnOpts) addSinks(sums []float64, m []float32, first, g int) {
	if o.Sinks == nil {
		return
	}
	for j, s := range o.Sinks[first : first+g] {
		sums[j] += float64(expAttn(s - m[j]))
	}
}

// AttendWindow is Attend with o's variations. With only Skip, its result
// is bit for bit Attend's over a table holding just the positions
// Skip..n-1 (TestAttendWindow).
func AttendWindow(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, o AttnOpts, scratch []float32) {
	attendGroups(out, q, 1, g, k, v, table, n, o, off, scale, scratch)
}

// AttendHeads is Attend for all kvh KV heads of one token at once: q,
// out: [kvh][g][d]; KV head h is at column h·d of the rows (0 ≤ h < kvh,
// kvh·d ≤ Stride). Each head's result is bit for bit Attend's (column
// h·d); the K and V rows are read whole, one contiguous stream per page
// instead of kvh strided ones (BenchmarkAttendStep). scratch must hold
// AttnHeadsScratch(kvh, g, n, d) values.
func AttendHeads(out, q []float32, kvh, g int, k, v KVRows, table []int32, n int, scale float32, scratch []float32) {
	attendGroups(out, q, kvh, g, k, v, table, n, AttnOpts{}, 0, scale, scratch)
}

// AttendHeadsWindow is AttendHeads with o's variations, as AttendWindow
// is Attend.
func AttendHeadsWindow(out, q []float32, kvh, g int, k, v KVRows, table []int32, n int, scale float32, o AttnOpts, scratch []float32) {
	attendGroups(out, q, kvh, g, k, v, table, n, o, 0, scale, scratch)
}

// attendGroups computes Attend for kvh consecutive KV heads starting at
// column off, reading rows of kvh·d values, with o's variations.
func attendGroups(out, q []float32, kvh, g int, k, v KVRows, table []int32, n int, o AttnOpts, off int, scale float32, scratch []float32) {
	if o.Skip < 0 || o.Skip >= n {
		panic("cpu: attention window skips every position")
	}
	if attnZOk(g, len(q)/(kvh*g), k, v) && o.ALiBi == nil {
		attendGroupsZ(out, q, kvh, g, k, v, table, n, o, off, scale, scratch)
		return
	}
	gq := kvh * g // query heads
	d := len(q) / gq
	w := kvh * d // values read per row
	q, out = q[:gq*d], out[:gq*d]
	scores := scratch[:gq*n] // [kvh][n][g]: position-major per KV head, a position's g weights contiguous
	// K and V rows go through the scratch in blocks of bs positions
	// ([bs][w]), widened from F16 or copied.
	bs := attnBlockRows(w)
	blk := scratch[gq*n : gq*n+bs*w]
	// The scores are one FMA chain per (position, head) (attnScoresGo),
	// computed with a group's g heads in the vector lanes: each K value
	// is read once for the whole group, against q transposed to [d][g].
	gp := attnPad(g)
	qts := scratch[gq*n+bs*w : gq*n+bs*w+kvh*d*gp]
	for h := 0; h < kvh; h++ {
		attnTransposeQ(qts[h*d*gp:(h+1)*d*gp], q[h*g*d:(h+1)*g*d], g, d)
	}
	// The K/V of a decode batch come from memory: the K pass prefetches
	// K two blocks ahead and, block by block, the V rows the V pass will
	// read (they wait in L2 while the softmax runs), so the V pass reads
	// from cache (BenchmarkAttendStep).
	k.prefetchRows(table, 0, min(2*bs, n), off, w)
	for p0 := 0; p0 < n; p0 += bs {
		nb := min(bs, n-p0)
		if next := p0 + 2*bs; next < n {
			k.prefetchRows(table, next, min(bs, n-next), off, w)
		}
		v.prefetchRows(table, p0, nb, off, w)
		k.loadRows(blk, table, p0, nb, off, w)
		for h := 0; h < kvh; h++ {
			sh := scores[h*n*g : (h+1)*n*g]
			attnScores(sh[p0*g:(p0+nb)*g], q[h*g*d:(h+1)*g*d], qts[h*d*gp:(h+1)*d*gp], blk[h*d:(nb-1)*w+(h+1)*d], nb, g, d, w)
		}
	}
	// Softmax per head, unnormalised; the sum is applied to the output.
	var small [64]float64 // no allocation for up to 64 query heads
	var smallM [64]float32
	sums, maxes := small[:0], smallM[:0]
	if gq <= len(small) {
		sums, maxes = small[:gq], smallM[:gq]
	} else {
		sums, maxes = make([]float64, gq), make([]float32, gq)
	}
	for h := 0; h < kvh; h++ {
		sh, hs := scores[h*n*g:(h+1)*n*g], h*g
		attnScaleMax(sh, g, o.prepare(sh, g, hs, scale), maxes[hs:hs+g]) // scores·scale in place, per-head maxima
		o.raiseMax(maxes[hs:hs+g], hs, g)
		attnExp(sh, g, maxes[hs:hs+g], sums[hs:hs+g]) // e = exp(s − max), sums (attn_exp.go)
		o.addSinks(sums[hs:hs+g], maxes[hs:hs+g], hs, g)
	}
	clear(out)
	// out accumulates position by position, as nb attnAxpy calls would.
	for p0 := 0; p0 < n; p0 += bs {
		nb := min(bs, n-p0)
		v.loadRows(blk, table, p0, nb, off, w)
		for h := 0; h < kvh; h++ {
			sh := scores[h*n*g : (h+1)*n*g]
			attnAxpyBlock(out[h*g*d:(h+1)*g*d], blk[h*d:(nb-1)*w+(h+1)*d], sh[p0*g:(p0+nb)*g], nb, g, d, w)
		}
	}
	attnNormalize(out, sums, d)
}

// prepare applies o to one head group's scores ([n][g], unscaled; first
// is the group's first query head) and returns the scale left for
// attnScaleMax: masked positions become −Inf (they weigh e^−Inf = 0 in the
// softmax, expAttn, so the result is that of the other positions alone);
// with Softcap, the others become Softcap·tanh(scale·s/Softcap), with
// ALiBi scale·s + alibiBias, and the scale left is 1.
func (o AttnOpts) prepare(scores []float32, g, first int, scale float32) float32 {
	if o.ALiBi != nil {
		for i := o.Skip * g; i < len(scores); i++ {
			scores[i] = float32(scores[i]*scale) + alibiBias(o.ALiBi[first+i%g], o.QPos, i/g)
		}
		scale = 1
	}
	if o.Softcap > 0 {
		c := float64(o.Softcap)
		for i, s := range scores[o.Skip*g:] {
			scores[o.Skip*g+i] = float32(c * math.Tanh(float64(s*scale)/c))
		}
		scale = 1
	}
	for i := range scores[:o.Skip*g] {
		scores[i] = float32(math.Inf(-1))
	}
	return scale
}

// attnNormalize divides each head's output row (out: [len(sums)][d]) by
// its softmax sum, as one float32 multiply by the rounded inverse.
func attnNormalize(out []float32, sums []float64, d int) {
	for h, sum := range sums {
		inv := float32(1 / sum)
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
	n := storeF16SIMD(dst, src) // the whole groups of 8, where there is SIMD
	for i, x := range src[n:] {
		dst[n+i] = F32ToF16(x)
	}
}
