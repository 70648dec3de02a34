package cpu

import "unsafe"

// Attend's decode path on AVX-512 for g = 1 to 8 query heads per KV head
// over an F16 store (attn_z_avx512_amd64.s, written by attn_z_gen.go).
// The kernels compute G = 2, 4 or 8 heads (attnZGroup: g rounded up, the
// extra heads' queries zero and their results dropped): P = 16/G
// positions share a vector, lane P·h+i holding head h at position p+i,
// so every instruction does 16 lanes of work;
// the V rows are widened inside the output loop instead of through the
// scratch, and the prefetch of the rows ahead is spread over the kernels'
// loops. Every result is bit for bit attendGroups' AVX2 path
// (TestAttendZBitwise).

//go:generate go run attn_z_gen.go

//go:noescape
func attnExpZ2(scores *float32, nvec int, m *float32, sums *float64)

//go:noescape
func attnExpZ4(scores *float32, nvec int, m *float32, sums *float64)

//go:noescape
func attnExpZ8(scores *float32, nvec int, m *float32, sums *float64)

//go:noescape
func attnCvtInterleave2(src *uint16, sstride int, dst *float32, nrows, w int, idx *int32)

//go:noescape
func attnCvtInterleave4(src *uint16, sstride int, dst *float32, nrows, w int, idx *int32)

//go:noescape
func attnCvtInterleave8(src *uint16, sstride int, dst *float32, nrows, w int, idx *int32)

//go:noescape
func attnScoresZ2(k *float32, qt *float32, ngroups, dim, ks int, out *float32, perm *int32, pf *byte, pflines, pfstep int)

//go:noescape
func attnScoresZ4(k *float32, qt *float32, ngroups, dim, ks int, out *float32, perm *int32, pf *byte, pflines, pfstep int)

//go:noescape
func attnScoresZ8(k *float32, qt *float32, ngroups, dim, ks int, out *float32, perm *int32, pf *byte, pflines, pfstep int)

//go:noescape
func attnAxpyF16Z2(v *uint16, vs int, w *float32, nb, dim int, out *float32, pf *byte, pflines, pfstep int)

//go:noescape
func attnAxpyF16Z4(v *uint16, vs int, w *float32, nb, dim int, out *float32, pf *byte, pflines, pfstep int)

//go:noescape
func attnAxpyF16Z8(v *uint16, vs int, w *float32, nb, dim int, out *float32, pf *byte, pflines, pfstep int)

// attnZKernel is the kernel set of one group size g.
type attnZKernel struct {
	cvt    func(src *uint16, sstride int, dst *float32, nrows, w int, idx *int32) // P = 16/g rows interleaved
	scores func(k *float32, qt *float32, ngroups, dim, ks int, out *float32, perm *int32, pf *byte, pflines, pfstep int)
	axpy   func(v *uint16, vs int, w *float32, nb, dim int, out *float32, pf *byte, pflines, pfstep int)
	perm   [16]int32 // lanes P·h+i to position-major lanes g·i+h
}

var attnZKernels = [9]*attnZKernel{
	2: {cvt: attnCvtInterleave8, scores: attnScoresZ2, axpy: attnAxpyF16Z2, perm: attnGroupPerm(2)},
	4: {cvt: attnCvtInterleave4, scores: attnScoresZ4, axpy: attnAxpyF16Z4, perm: attnGroupPerm(4)},
	8: {cvt: attnCvtInterleave2, scores: attnScoresZ8, axpy: attnAxpyF16Z8, perm: attnGroupPerm(8)},
}

// attnExpZ calls the exponential kernel of group size g directly: through
// a func value its pointer arguments would escape, and the caller's
// stack arrays of maxima and sums would move to the heap on every call.
func attnExpZ(g int, scores *float32, nvec int, m *float32, sums *float64) {
	switch g {
	case 2:
		attnExpZ2(scores, nvec, m, sums)
	case 4:
		attnExpZ4(scores, nvec, m, sums)
	case 8:
		attnExpZ8(scores, nvec, m, sums)
	default:
		panic("cpu: attnExpZ group size")
	}
}

// attnGroupPerm is the VPERMPS index that reorders a vector of P = 16/g
// positions from lanes P·h+i (head h, position p+i) to position-major
// lanes g·i+h.
func attnGroupPerm(g int) (x [16]int32) {
	p := 16 / g
	for h := range g {
		for i := range p {
			x[g*i+h] = int32(p*h + i)
		}
	}
	return x
}

// attnGroupIdx are the index vectors of attnCvtInterleave*: float32 pairs
// of two rows (a0, b0, ..., a7, b7) and (a8, b8, ..., a15, b15)
// (VPERMT2PS), then qword pairs and 128-bit pairs of two such vectors,
// low and high halves (VPERMT2PD, one qword index per two int32).
var attnGroupIdx = func() (x [6][16]int32) {
	for i := range 8 {
		x[0][2*i], x[0][2*i+1] = int32(i), int32(16+i)
		x[1][2*i], x[1][2*i+1] = int32(8+i), int32(24+i)
	}
	q := [4][8]int32{
		{0, 8, 1, 9, 2, 10, 3, 11}, {4, 12, 5, 13, 6, 14, 7, 15},
		{0, 1, 8, 9, 2, 3, 10, 11}, {4, 5, 12, 13, 6, 7, 14, 15},
	}
	for v := range q {
		for i, ix := range q[v] {
			x[2+v][2*i] = ix
		}
	}
	return x
}()

// attnZChunk is the output values per head the axpy kernel of group
// size g keeps in registers (16·min(4, 16/g), as attn_z_gen.go writes
// it): d must be a multiple.
func attnZChunk(g int) int { return 16 * min(4, 16/g) }

// attnZPositions is P = 16/g, the positions of one vector.
func attnZPositions(g int) int { return 16 / g }

// attnZBlockRows is the K rows attendGroupsZ widens per block: whole
// groups of eight vectors (8P rows, the scores kernel's eight chains), at
// least attnBlockRows(w).
func attnZBlockRows(g, w int) int {
	u := 8 * attnZPositions(g)
	return (max(attnBlockRows(w), u) + u - 1) / u * u
}

// attnZGroup is the group size G of the kernels that compute g query
// heads per KV head: g rounded up to 2, 4 or 8 (0 for g outside 1..8).
// The G-g extra heads cost lanes: at g = 5 (Qwen2.5-14B, -32B), 6
// (Qwen2.5-1.5B) and 7 (Qwen2.5-0.5B, -7B) the AVX2 helpers also spend
// eight lanes on them, and at g = 1 (multi-head attention, Llama-2-7B)
// half of each vector still beats them (BenchmarkAttendStepZ g1: 1.8-2.0x).
func attnZGroup(g int) int {
	switch {
	case g < 1 || g > 8:
		return 0
	case g <= 2:
		return 2
	case g <= 4:
		return 4
	}
	return 8
}

// attnZScratch is the scratch attendGroupsZ needs (0 for a group size it
// does not compute).
func attnZScratch(kvh, g, n, d int) int {
	G := attnZGroup(g)
	if G == 0 {
		return 0
	}
	p := attnZPositions(G)
	need := kvh*G*((n+p-1)/p*p) + attnZBlockRows(G, kvh*d)*d + kvh*d*16
	if G != g {
		need += kvh * G * d // the padded output
	}
	return need
}

// attnZOk reports whether attendGroupsZ computes this call: g of 1 to 8,
// F16 K and V, d a multiple of the output chunk, and pages of a multiple
// of P rows (a page run then starts a whole vector group).
func attnZOk(g, d int, k, v KVRows) bool {
	G := attnZGroup(g)
	if !attnZOn || !attnAVX2 || G == 0 || k.F16 == nil || v.F16 == nil || d <= 0 || d%attnZChunk(G) != 0 {
		return false
	}
	p := attnZPositions(G)
	return k.PageSize%p == 0 && v.PageSize%p == 0
}

// pfSpan is a prefetch spread over a kernel's loop (PF2 in the
// kernels): lines 64-byte lines, two per step, a step's pair at
// first + k·step.
type pfSpan struct {
	first       unsafe.Pointer
	lines, step int
}

// part returns the share of the span that call h of n issues: whole
// steps, so that a step's two lines stay together.
func (s pfSpan) part(h, n int) (*byte, int) {
	steps := (s.lines + 1) / 2
	lo, hi := h*steps/n, (h+1)*steps/n
	return (*byte)(unsafe.Add(s.first, lo*s.step)), min(s.lines, 2*hi) - 2*lo
}

// pageSpan returns the prefetch of the w values at column off of the
// rows of positions [p, p+nb) that share p's page (rows of them), F16
// rows: whole rows (w = Stride) as one contiguous span, 128 bytes a
// step; one head's columns of up to 128 bytes as a row a step (two
// lines). Wider columns give no span (lines 0): the caller prefetches
// them with prefetchRows. The span's Go pointers (first + k·step) stay
// inside it; a step's second line may lie past a narrow column, which a
// prefetch may address (it never faults).
func (kv KVRows) pageSpan(table []int32, p, nb, off, w int) (span pfSpan, rows int) {
	rows = min(nb, kv.PageSize-p%kv.PageSize)
	first := unsafe.Pointer(&kv.F16[kv.index(table, p, off)])
	switch {
	case w == kv.Stride:
		return pfSpan{first, (rows*w*2 + 63) / 64, 128}, rows
	case w*2 <= 128:
		return pfSpan{first, 2 * rows, kv.Stride * 2}, rows
	}
	return pfSpan{}, rows
}

// attnGroupQ writes q ([g][d]) into qt ([d][16]) with q[h][j] in lanes
// P·h to P·h+P-1 of row j, P = 16/G, and zeros in the lanes of heads g to
// G-1: the query operand of the scores kernels of group size G.
func attnGroupQ(qt, q []float32, g, G, d int) {
	p := attnZPositions(G)
	qt, q = qt[:16*d], q[:g*d]
	if g != G {
		clear(qt)
	}
	for h := range g {
		for j, x := range q[h*d : (h+1)*d] {
			for i := range p {
				qt[16*j+p*h+i] = x
			}
		}
	}
}

// attendGroupsZ is attendGroups for attnZOk calls: the same scores,
// softmax and output, computed P positions a vector by the kernels of
// group size G ≥ g.
func attendGroupsZ(out, q []float32, kvh, g int, k, v KVRows, table []int32, n int, o AttnOpts, off int, scale float32, scratch []float32) {
	G := attnZGroup(g)
	kz := attnZKernels[G]
	p := attnZPositions(G)
	gq := kvh * g
	d := len(q) / gq
	w := kvh * d
	q, out = q[:gq*d], out[:gq*d]
	// scores: [kvh][np][G], each head's positions rounded up to whole
	// vectors (the last one may compute padding positions).
	np := (n + p - 1) / p * p
	scores := scratch[:kvh*np*G]
	bs := attnZBlockRows(G, w)
	blk := scratch[len(scores) : len(scores)+bs*d] // one head's K block, [bs/P][P·d]
	used := len(scores) + bs*d
	qts := scratch[used : used+kvh*d*16]
	used += len(qts)
	for h := range kvh {
		attnGroupQ(qts[h*d*16:(h+1)*d*16], q[h*g*d:(h+1)*g*d], g, G, d)
	}
	// The output of G heads per KV head: out itself, or with padding heads
	// a scratch [kvh][G][d] whose first g heads of each KV head are
	// copied to out at the end.
	outG := out
	if G != g {
		outG = scratch[used : used+kvh*G*d]
	}
	// The K rows two blocks ahead are prefetched inside the scores kernel
	// and the V rows of the next page run inside the output kernel
	// (pageSpan), two lines per step of their loops: a whole block's
	// lines at once would stall the loads of the work between.
	k.prefetchRows(table, 0, min(2*bs, n), off, w)
	for p0 := 0; p0 < n; p0 += bs {
		nb := min(bs, n-p0)
		var kpf pfSpan
		if next := p0 + 2*bs; next < n {
			rows := 0
			kpf, rows = k.pageSpan(table, next, min(bs, n-next), off, w)
			if kpf.lines == 0 {
				rows = 0
			}
			if rest := min(bs, n-next) - rows; rest > 0 { // pages smaller than a block, wide columns
				k.prefetchRows(table, next+rows, rest, off, w)
			}
		}
		ng := (nb + p - 1) / p
		for h := range kvh {
			for j := 0; j < nb; { // j a multiple of P: a run starts a group
				pos := p0 + j
				run := min(nb-j, k.PageSize-pos%k.PageSize)
				i := k.index(table, pos, off+h*d)
				_, _ = k.F16[i+(run-1)*k.Stride+d-1], blk[(j+(run+p-1)/p*p)*d-1]
				kz.cvt(&k.F16[i], k.Stride, &blk[j*d], run, d, &attnGroupIdx[0][0])
				j += run
			}
			pf, lines := kpf.part(h, kvh)
			_ = scores[h*np*G+(p0+ng*p)*G-1]
			kz.scores(&blk[0], &qts[h*d*16], ng, d, p*d, &scores[h*np*G+p0*G], &kz.perm[0], pf, lines, kpf.step)
		}
	}
	var small [64]float64 // no allocation for up to 64 query heads
	var smallM [64]float32
	gqG := kvh * G
	sums, maxes := small[:0], smallM[:0]
	if gqG <= len(small) {
		sums, maxes = small[:gqG], smallM[:gqG]
	} else {
		sums, maxes = make([]float64, gqG), make([]float32, gqG)
	}
	v.prefetchRows(table, 0, min(n, v.PageSize), off, w) // while the softmax runs
	for h := range kvh {
		sh, hs := scores[h*np*G:h*np*G+n*G], h*G
		m, sm := maxes[hs:hs+G], sums[hs:hs+G]
		// No ALiBi on this path (attendGroups does not take it here).
		attnScaleMax(sh, G, o.prepare(sh, G, hs, scale), m)
		o.raiseMax(m, h*g, g) // the padding heads have no sinks
		clear(sm)
		if full := n / p; full > 0 {
			attnExpZ(G, &sh[0], full, &m[0], &sm[0])
		}
		for i := n / p * p * G; i < n*G; i++ { // the positions after the last whole vector
			e := expAttn(sh[i] - m[i%G])
			sh[i] = e
			sm[i%G] += float64(e)
		}
		o.addSinks(sm, m, h*g, g)
	}
	clear(outG)
	for pos := 0; pos < n; {
		run := min(n-pos, v.PageSize-pos%v.PageSize)
		i := v.index(table, pos, off)
		_ = v.F16[i+(run-1)*v.Stride+w-1]
		var vpf pfSpan
		if next := pos + run; next < n {
			rows := 0
			if vpf, rows = v.pageSpan(table, next, n-next, off, w); vpf.lines == 0 {
				v.prefetchRows(table, next, rows, off, w)
			}
		}
		for h := range kvh {
			pf, lines := vpf.part(h, kvh)
			kz.axpy(&v.F16[i+h*d], v.Stride, &scores[h*np*G+pos*G], run, d, &outG[h*G*d], pf, lines, vpf.step)
		}
		pos += run
	}
	attnNormalize(outG, sums, d)
	if G != g {
		for h := range kvh {
			copy(out[h*g*d:(h+1)*g*d], outG[h*G*d:h*G*d+g*d])
		}
	}
}
