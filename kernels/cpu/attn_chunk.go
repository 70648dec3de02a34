package cpu

// Multi-query attention for a prefill chunk.
//
// AttendHeads runs one query token at a time: for a chunk of T tokens deep
// into a long prompt every token re-reads, re-widens (F16 -> float32) and
// re-streams the whole K/V prefix, and with g = 4 query heads per KV head
// half of the score vector's eight lanes hold padding. AttendChunk takes
// the tokens of a chunk in tiles: the lanes of a tile are (token, head)
// pairs, token-major, AttnChunkTokens(g)·g of them (about attnChunkLanes),
// so one pass over each KV head's K blocks and one over its V blocks serve
// the whole tile with the vector lanes full.
//
// Every value is computed by the same helpers with the same arithmetic as
// AttendHeads computes it for a single token, so each token's result is
// AttendHeads' bit for bit (TestAttendChunkMatchesAttendHeads):
//   - a score is one FMA chain over the head dimension (attnScores; the
//     lane a chain runs in does not change it);
//   - scaling and the per-head maximum are exact operations (the maximum
//     of the same values is the same value; only a ±0 maximum can differ,
//     and s − (±0) and exp(±0) = 1 are the same either way);
//   - the exponentials are expAttn (attnExp and its twin give equal bits)
//     and each head's float64 sum adds them in position order;
//   - the output accumulates the weighted V rows in position order
//     (attnAxpyBlock) and is scaled by float32(1/sum) at the end.
//
// Causality inside a tile: token t of a tile whose first token attends to
// n0 positions attends to n0+t. Rows below n0 are common to every lane;
// row p ≥ n0 belongs to the tokens t > p − n0, which (lanes being
// token-major) is a suffix of the lanes, so the softmax and V passes treat
// such a row as one call over that suffix. Scores of the rows a lane does
// not attend to are computed (the vector kernel does all lanes) but never
// read. A tile's lanes are padded to a multiple of 16 (attnTileLanes):
// the padding lanes have zero queries, attend to every row and are
// dropped, so that groups of 3, 5, 6 or 7 heads (tiles of 28 or 30 lanes)
// also run the vector helpers.

// attnChunkLanes is the number of (token, head) lanes a tile aims at:
// four 8-lane vectors of scores per K row.
const attnChunkLanes = 32

// AttnChunkTokens is the number of query tokens per AttendChunk tile for
// groups of g query heads per KV head (attnChunkLanes/g, at least 1).
// Callers that share a chunk's tiles among threads cut it into pieces of
// this many tokens.
func AttnChunkTokens(g int) int { return max(1, attnChunkLanes/max(g, 1)) }

// attnTileLanes is the lane count a tile of L (token, head) pairs computes:
// L rounded up to a multiple of 16, the lanes past L padding (zero
// queries, results dropped), so that every helper runs on whole vectors
// (16-lane AVX-512, 8-lane AVX2; the exponentials need a multiple of 4).
func attnTileLanes(L int) int { return (L + 15) &^ 15 }

// AttnChunkScratch is the scratch length AttendChunk needs for groups of g
// query heads of dimension d when its last token attends to n positions
// (n = p0+T).
func AttnChunkScratch(g, n, d int) int {
	l := attnTileLanes(AttnChunkTokens(g) * g)
	return l*n + attnBlockRows(d)*d + 2*l*d + d*attnPad(l) + l
}

// AttendChunk is AttendHeads for T consecutive query tokens of one
// sequence: token t (0 ≤ t < T) is at position p0+t and attends to
// positions 0..p0+t, whose K/V must all be in the store (the chunk's own
// rows included). q, out: [T][kvh][g][d] (each token's row as AttendHeads
// takes it); KV head h is at column h·d of the rows. Each token's result
// is bit for bit AttendHeads' over n = p0+t+1 positions. scratch must hold
// AttnChunkScratch(g, p0+T, d) values.
func AttendChunk(out, q []float32, T, kvh, g int, k, v KVRows, table []int32, p0 int, scale float32, scratch []float32) {
	AttendChunkSinks(out, q, T, kvh, g, k, v, table, p0, scale, nil, scratch)
}

// AttendChunkSinks is AttendChunk with attention sinks (AttnOpts.Sinks:
// one logit per query head, [kvh][g]): each token's result is bit for bit
// AttendHeadsWindow's with those sinks. nil: AttendChunk.
func AttendChunkSinks(out, q []float32, T, kvh, g int, k, v KVRows, table []int32, p0 int, scale float32, sinks, scratch []float32) {
	attendTiles(out, q, T, kvh, g, k, v, table, p0, -1, scale, sinks, nil, scratch)
}

// AttendFull is AttendChunk without the causal mask (an encoder's
// attention): each of the T query tokens attends to positions 0..n-1, all
// of which must be in the store. Each token's result is bit for bit
// AttendHeads' over n positions (TestAttendFullMatchesAttendHeads).
// scratch must hold AttnChunkScratch(g, n, d) values.
func AttendFull(out, q []float32, T, kvh, g int, k, v KVRows, table []int32, n int, scale float32, scratch []float32) {
	attendTiles(out, q, T, kvh, g, k, v, table, 0, n, scale, nil, nil, scratch)
}

// AttendFullALiBi is AttendFull with ALiBi (AttnOpts.ALiBi: slopes, one
// per query head, [kvh][g]): the T query tokens are at positions qpos,
// qpos+1, ..., and each token's result is bit for bit AttendHeadsWindow's
// with those slopes and its position (TestAttendFullALiBi).
func AttendFullALiBi(out, q []float32, T, kvh, g int, k, v KVRows, table []int32, n, qpos int, scale float32, slopes, scratch []float32) {
	attendTiles(out, q, T, kvh, g, k, v, table, qpos, n, scale, nil, slopes, scratch)
}

// attendTiles cuts T query tokens into tiles of AttnChunkTokens(g) and
// runs each KV head's attendTile on them: causally from position p0
// (full < 0), or every token over positions 0..full-1 (p0 is then the
// first token's position, for ALiBi's slopes alibi; nil: none).
func attendTiles(out, q []float32, T, kvh, g int, k, v KVRows, table []int32, p0, full int, scale float32, sinks, alibi, scratch []float32) {
	if T <= 0 {
		return
	}
	qd := len(q) / T // values per token: kvh·g·d
	d := qd / (kvh * g)
	tt := AttnChunkTokens(g)
	for t0 := 0; t0 < T; t0 += tt {
		nt := min(tt, T-t0)
		o, qt := out[t0*qd:(t0+nt)*qd], q[t0*qd:(t0+nt)*qd]
		n0, nmax := p0+t0+1, p0+t0+nt
		if full >= 0 {
			n0, nmax = full, full
		}
		for h := 0; h < kvh; h++ {
			attendTile(o, qt, nt, g, d, qd, h, k, v, table, n0, nmax, scale, sinks, alibiTile{alibi, p0 + t0}, scratch)
		}
	}
}

// alibiTile is a full-attention tile's ALiBi: the slopes ([kvh][g]; nil:
// none) and the position of the tile's first token.
type alibiTile struct {
	slopes []float32
	qpos   int
}

// attendTile computes KV head h's attention for the nt tokens of one tile:
// token t attends to min(n0+t, nmax) positions (causal: nmax = n0+nt−1;
// every token to n0: nmax = n0); q, out: [nt][qd] with the head's g
// query heads at column h·g·d; sinks (nil: none) as AttendChunkSinks;
// ab (full attention only) as AttendFullALiBi.
func attendTile(out, q []float32, nt, g, d, qd, h int, k, v KVRows, table []int32, n0, nmax int, scale float32, sinks []float32, ab alibiTile, scratch []float32) {
	L := attnTileLanes(nt * g) // lanes: lane t·g+j is query head j of token t, then padding
	scores := scratch[:L*nmax] // [nmax][L]
	o := L * nmax
	bs := attnBlockRows(d)
	blk := scratch[o : o+bs*d] // a block of one head's K or V rows, [bs][d] float32
	o += bs * d
	qg := scratch[o : o+L*d] // the tile's queries, [L][d]
	o += L * d
	lp := attnPad(L)
	qt := scratch[o : o+d*lp] // qg transposed, [d][lp] (attnTransposeQ)
	o += d * lp
	acc := scratch[o : o+L*d] // output accumulators, [L][d]
	o += L * d
	m := scratch[o : o+L]                   // per-lane maxima
	var sumsA, tmpA [attnChunkLanes]float64 // no allocation up to 32 lanes
	sums, tmp := sumsA[:0], tmpA[:0]
	if L <= len(sumsA) {
		sums, tmp = sumsA[:L], tmpA[:L]
	} else {
		sums, tmp = make([]float64, L), make([]float64, L)
	}
	for t := 0; t < nt; t++ {
		copy(qg[t*g*d:(t+1)*g*d], q[t*qd+h*g*d:t*qd+(h+1)*g*d])
	}
	clear(qg[nt*g*d:]) // padding lanes: zero queries, scores 0, finite
	attnTransposeQ(qt, qg, L, d)
	off := h * d

	// K pass: every block of rows is loaded (widened) once for all lanes.
	k.prefetchRows(table, 0, min(2*bs, nmax), off, d)
	for b0 := 0; b0 < nmax; b0 += bs {
		nb := min(bs, nmax-b0)
		if next := b0 + 2*bs; next < nmax {
			k.prefetchRows(table, next, min(bs, nmax-next), off, d)
		}
		k.loadRows(blk, table, b0, nb, off, d)
		attnScores(scores[b0*L:(b0+nb)*L], qg, qt, blk, nb, L, d, d)
	}

	// Softmax per lane over the rows it attends to: rows [0, n0) for all
	// lanes, row p ≥ n0 for the lanes from (p−n0+1)·g on.
	if ab.slopes != nil { // as AttnOpts.prepare: scale·s + bias, then the maxima
		for p := 0; p < n0; p++ {
			row := scores[p*L : (p+1)*L]
			for l := 0; l < nt*g; l++ {
				row[l] = float32(row[l]*scale) + alibiBias(ab.slopes[h*g+l%g], ab.qpos+l/g, p)
			}
		}
		attnScaleMax(scores[:n0*L], L, 1, m)
	} else {
		attnScaleMax(scores[:n0*L], L, scale, m)
	}
	for p := n0; p < nmax; p++ {
		row := scores[p*L : (p+1)*L]
		for l := (p - n0 + 1) * g; l < L; l++ {
			s := row[l] * scale
			row[l] = s
			m[l] = max(m[l], s)
		}
	}
	if sinks != nil { // as AttnOpts.raiseMax: after the scores' maxima
		for l := 0; l < nt*g; l++ {
			m[l] = max(m[l], sinks[h*g+l%g])
		}
	}
	attnExp(scores[:n0*L], L, m, sums)
	for p := n0; p < nmax; p++ {
		l0 := (p - n0 + 1) * g
		attnExp(scores[p*L+l0:(p+1)*L], L-l0, m[l0:], tmp[:L-l0])
		for l := l0; l < L; l++ {
			sums[l] += tmp[l-l0] // tmp is 0 + float64(e): the sum goes on in position order
		}
	}
	if sinks != nil { // as AttnOpts.addSinks: after the last position
		for l := 0; l < nt*g; l++ {
			sums[l] += float64(expAttn(sinks[h*g+l%g] - m[l]))
		}
	}

	// V pass: each lane accumulates its rows in position order.
	clear(acc)
	v.prefetchRows(table, 0, min(2*bs, nmax), off, d)
	for b0 := 0; b0 < nmax; b0 += bs {
		nb := min(bs, nmax-b0)
		if next := b0 + 2*bs; next < nmax {
			v.prefetchRows(table, next, min(bs, nmax-next), off, d)
		}
		v.loadRows(blk, table, b0, nb, off, d)
		if b0 < n0 {
			nc := min(nb, n0-b0)
			attnAxpyBlock(acc, blk, scores[b0*L:(b0+nc)*L], nc, L, d, d)
		}
		for p := max(b0, n0); p < b0+nb; p++ {
			l0 := (p - n0 + 1) * g
			r := p - b0
			attnAxpyBlock(acc[l0*d:], blk[r*d:(r+1)*d], scores[p*L+l0:(p+1)*L], 1, L-l0, d, d)
		}
	}
	for l := 0; l < nt*g; l++ { // the real lanes
		t, j := l/g, l%g
		inv := float32(1 / sums[l])
		dst := out[t*qd+(h*g+j)*d : t*qd+(h*g+j+1)*d]
		for i, x := range acc[l*d : (l+1)*d] {
			dst[i] = x * inv
		}
	}
}
