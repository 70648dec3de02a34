package cpu

import "math"

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
func AttnScratch(g, n, d int) int { return max(g*n+d, 2*g*d+d+2*g) }

// Attend computes causal attention for g query heads that share one KV head:
//
//	out[h] = Σ_{p<n} softmax_p(scale · q[h]·k_p) · v_p
//
// q, out: [g][d] with d = len(q)/g; k_p, v_p: d values at column off of
// position p's row. n ≥ 1 positions are read through table. scratch must
// hold AttnScratch(g, n, d) values.
//
// Attend uses float32 dot products, a two-pass softmax that subtracts the
// row maximum, and float32 V accumulation, whatever the store type (F16
// values are widened exactly). AttendF16 is the variant that rounds like
// llama.cpp's one-row flash attention.
func Attend(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, scratch []float32) {
	d := len(q) / g
	q, out = q[:g*d], out[:g*d]
	scores := scratch[:n*g] // [n][g]: position-major, so a position's g weights are contiguous
	row := scratch[n*g : n*g+d]
	for p := 0; p < n; p++ {
		kr := k.loadRow(row, k.index(table, p, off), d)
		attnDots(scores[p*g:p*g+g], q, kr, g)
	}
	// Softmax per head, unnormalised; the sum is applied to the output.
	var small [16]float64 // GQA groups are small: no allocation
	sums := small[:0]
	if g <= len(small) {
		sums = small[:g]
	} else {
		sums = make([]float64, g)
	}
	for h := 0; h < g; h++ {
		m := float32(math.Inf(-1))
		for i := h; i < len(scores); i += g {
			s := scores[i] * scale
			scores[i] = s
			m = max(m, s)
		}
		var sum float64
		for i := h; i < len(scores); i += g {
			e := float32(math.Exp(float64(scores[i] - m)))
			scores[i] = e
			sum += float64(e)
		}
		sums[h] = sum
	}
	for i := range out {
		out[i] = 0
	}
	for p := 0; p < n; p++ {
		vr := v.loadRow(row, v.index(table, p, off), d)
		attnAxpy(out, vr, scores[p*g:p*g+g], g)
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
