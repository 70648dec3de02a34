package cpu

import "unsafe"

// Attend's decode path on AVX-512 for the common GQA shape of eight
// query heads per KV head over an F16 store (attn_z_avx512_amd64.s): two
// positions share a vector, lane 2h+i holding head h at position p+i, so
// every instruction does twice the AVX2 helpers' work; the V rows are
// widened inside the output loop instead of through the scratch. Every
// result is bit for bit attendGroups' AVX2 path (TestAttendZ8Bitwise).

//go:noescape
func attnExpZ8(scores *float32, npairs int, m *float32, sums *float64)

//go:noescape
func attnCvtPairsZ(src *uint16, sstride int, dst *float32, nrows, w int, idx *int32)

//go:noescape
func attnScoresZ8(k *float32, qt *float32, npairs, dim, ks int, out *float32, perm *int32, pf *byte, pflines int)

//go:noescape
func attnAxpyF16Z8(v *uint16, vs int, w *float32, nb, dim int, out *float32, pf *byte, pflines int)

// attnPairIdx are the VPERMT2PS indices that interleave a 16-value chunk
// of two rows a, b into (a0, b0, a1, b1, ..., a7, b7) and (a8, b8, ...).
var attnPairIdx = func() (x [32]int32) {
	for i := range 8 {
		x[2*i], x[2*i+1] = int32(i), int32(16+i)
		x[16+2*i], x[16+2*i+1] = int32(8+i), int32(24+i)
	}
	return x
}()

// attnPairPerm reorders a pair's scores from lanes 2h+i (head h, position
// p+i) to position-major lanes 8i+h.
var attnPairPerm = func() (x [16]int32) {
	for h := range 8 {
		for i := range 2 {
			x[8*i+h] = int32(2*h + i)
		}
	}
	return x
}()

// attnZ8Scratch is the scratch attendGroupsZ8 needs.
func attnZ8Scratch(kvh, n, d int) int {
	w := kvh * d
	return kvh*8*((n+1)&^1) + attnZ8BlockRows(w)*w + kvh*d*16
}

// attnZ8BlockRows is attnBlockRows rounded up to whole pairs.
func attnZ8BlockRows(w int) int { return (attnBlockRows(w) + 1) &^ 1 }

// attnZ8Ok reports whether attendGroupsZ8 computes this call: g = 8,
// F16 K and V, d a multiple of 32, and pages of an even number of rows
// (a page run then starts at an even position and fills whole pairs).
func attnZ8Ok(g, d int, k, v KVRows) bool {
	return attnZ8On && attnAVX2 && g == 8 && d%32 == 0 && d > 0 && k.F16 != nil && v.F16 != nil &&
		k.PageSize%2 == 0 && v.PageSize%2 == 0
}

// pageSpan returns the 64-byte lines holding the w values at column off
// of the rows of positions [p, p+nb) that share p's page (rows of them):
// the first line's address and the count, for the kernels' spread
// prefetch (F16 rows).
func (kv KVRows) pageSpan(table []int32, p, nb, off, w int) (first unsafe.Pointer, lines, rows int) {
	rows = min(nb, kv.PageSize-p%kv.PageSize)
	i := kv.index(table, p, off)
	start := unsafe.Pointer(&kv.F16[i])
	skew := int(uintptr(start) & 63)
	bytes := ((rows-1)*kv.Stride + w) * 2
	return unsafe.Add(start, -skew), (skew + bytes + 63) / 64, rows
}

// attnPairQ writes q ([8][d]) into qt ([d][16]) with q[h][j] in lanes 2h
// and 2h+1 of row j: the query operand of attnScoresZ8.
func attnPairQ(qt, q []float32, d int) {
	qt, q = qt[:16*d], q[:8*d]
	for h := range 8 {
		for j, x := range q[h*d : (h+1)*d] {
			qt[16*j+2*h], qt[16*j+2*h+1] = x, x
		}
	}
}

// attendGroupsZ8 is attendGroups for g = 8 over F16 stores (attnZ8Ok):
// the same scores, softmax and output, computed two positions a vector.
func attendGroupsZ8(out, q []float32, kvh int, k, v KVRows, table []int32, n, off int, scale float32, scratch []float32) {
	const g = 8
	gq := kvh * g
	d := len(q) / gq
	w := kvh * d
	q, out = q[:gq*d], out[:gq*d]
	// scores: [kvh][np][g], each head's positions rounded up to whole
	// pairs (the last pair of an odd n computes one padding position).
	np := (n + 1) &^ 1
	scores := scratch[:kvh*np*g]
	bs := attnZ8BlockRows(w)
	blk := scratch[len(scores) : len(scores)+bs*w] // [bs/2][2w] pair rows
	qts := scratch[len(scores)+bs*w : len(scores)+bs*w+kvh*d*16]
	for h := range kvh {
		attnPairQ(qts[h*d*16:(h+1)*d*16], q[h*g*d:(h+1)*g*d], d)
	}
	// The K rows two blocks ahead are prefetched inside the scores
	// kernel, a line per step of its loop, and the V rows of the next
	// page run inside the output kernel (pageSpan): a whole block's lines
	// at once would stall the loads of the work in between.
	k.prefetchRows(table, 0, min(2*bs, n), off, w)
	for p0 := 0; p0 < n; p0 += bs {
		nb := min(bs, n-p0)
		var kpf unsafe.Pointer
		kl := 0
		if next := p0 + 2*bs; next < n {
			rows := 0
			kpf, kl, rows = k.pageSpan(table, next, min(bs, n-next), off, w)
			if rest := min(bs, n-next) - rows; rest > 0 { // pages smaller than a block
				k.prefetchRows(table, next+rows, rest, off, w)
			}
		}
		for j := 0; j < nb; { // j even: a run starts a pair
			p := p0 + j
			run := min(nb-j, k.PageSize-p%k.PageSize)
			i := k.index(table, p, off)
			_, _ = k.F16[i+(run-1)*k.Stride+w-1], blk[((run+1)/2+j/2)*2*w-1]
			attnCvtPairsZ(&k.F16[i], k.Stride, &blk[j*w], run, w, &attnPairIdx[0])
			j += run
		}
		npairs := (nb + 1) / 2
		for h := range kvh {
			_, _ = blk[(npairs-1)*2*w+(h+1)*2*d-1], scores[h*np*g+(p0+2*npairs)*g-1]
			lo, hi := h*kl/kvh, (h+1)*kl/kvh
			attnScoresZ8(&blk[h*2*d], &qts[h*d*16], npairs, d, 2*w, &scores[h*np*g+p0*g], &attnPairPerm[0],
				(*byte)(unsafe.Add(kpf, 64*lo)), hi-lo)
		}
	}
	var small [64]float64 // no allocation for up to 64 query heads
	var smallM [64]float32
	sums, maxes := small[:0], smallM[:0]
	if gq <= len(small) {
		sums, maxes = small[:gq], smallM[:gq]
	} else {
		sums, maxes = make([]float64, gq), make([]float32, gq)
	}
	v.prefetchRows(table, 0, min(n, v.PageSize), off, w) // while the softmax runs
	for h := range kvh {
		sh, hs := scores[h*np*g:h*np*g+n*g], h*g
		attnScaleMax(sh, g, scale, maxes[hs:hs+g])
		clear(sums[hs : hs+g])
		if n >= 2 {
			attnExpZ8(&sh[0], n/2, &maxes[hs], &sums[hs])
		}
		if n%2 == 1 { // the last position alone, continuing the sums
			attnExpAVX2(&sh[(n-1)*g], 1, g, &maxes[hs], &sums[hs])
		}
	}
	clear(out)
	for p := 0; p < n; {
		run := min(n-p, v.PageSize-p%v.PageSize)
		i := v.index(table, p, off)
		_ = v.F16[i+(run-1)*v.Stride+w-1]
		var vpf unsafe.Pointer
		vl := 0
		if next := p + run; next < n {
			vpf, vl, _ = v.pageSpan(table, next, n-next, off, w)
		}
		for h := range kvh {
			lo, hi := h*vl/kvh, (h+1)*vl/kvh
			attnAxpyF16Z8(&v.F16[i+h*d], v.Stride, &scores[h*np*g+p*g], run, d, &out[h*g*d],
				(*byte)(unsafe.Add(vpf, 64*lo)), hi-lo)
		}
		p += run
	}
	for h := range gq {
		inv := float32(1 / sums[h])
		o := out[h*d : h*d+d]
		for j := range o {
			o[j] *= inv
		}
	}
}
