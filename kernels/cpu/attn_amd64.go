package cpu

import (
	"math"
	"unsafe"
)

// AVX2 helpers of Attend's float32 path (attn_amd64.s; the blocked ones in
// attn_block_amd64.s, the scores in attn_scores_amd64.s, the exponentials
// in attn_exp_amd64.s); attn_simd.go and attn_exp.go hold their plain Go
// twins. All need d (or n) to be a multiple of 8.

//go:noescape
func attnCvtF16AVX2(src *uint16, dst *float32, n int)

//go:noescape
func attnAxpyAVX2(v *float32, w *float32, nh, dim int, out *float32)

//go:noescape
func attnExpAVX2(scores *float32, n, nh int, m *float32, sums *float64)

//go:noescape
func attnAxpyBlockAVX2(v *float32, w *float32, nb, nh, dim, vs int, out *float32)

//go:noescape
func attnCvtRowsAVX2(src *uint16, sstride int, dst *float32, nrows, dim int)

// attnCvt widens n F16 values to float32 (n a multiple of 8 for AVX2).
func attnCvt(dst []float32, src []uint16) {
	if attnAVX2 && len(src)%8 == 0 && len(src) > 0 {
		_ = dst[len(src)-1]
		attnCvtF16AVX2(unsafe.SliceData(src), unsafe.SliceData(dst), len(src))
		return
	}
	attnCvtGo(dst, src)
}

// attnAxpy adds w[h]*v to each of the g rows of out ([g][d], d = len(v)).
func attnAxpy(out, v, w []float32, g int) {
	d := len(v)
	if attnAVX2 && d%8 == 0 && d > 0 && g > 0 {
		_, _ = out[g*d-1], w[g-1]
		attnAxpyAVX2(unsafe.SliceData(v), unsafe.SliceData(w), g, d, unsafe.SliceData(out))
		return
	}
	attnAxpyGo(out, v, w, g)
}

// attnExp is attnExpGo, four heads at a time when g is a multiple of 4
// (attn_exp_amd64.s computes math.Exp's exact operations per lane), 16
// with AVX-512 when g is a multiple of 16.
func attnExp(scores []float32, g int, m []float32, sums []float64) {
	if attnZOn && g > 0 && g%16 == 0 && len(scores)%g == 0 {
		// AVX-512 (attn_chunk_avx512_amd64.s): AttendChunk's tiles.
		_, _ = m[g-1], sums[g-1]
		clear(sums[:g])
		if len(scores) > 0 {
			attnExpAVX512(unsafe.SliceData(scores), len(scores)/g, g, unsafe.SliceData(m), unsafe.SliceData(sums))
		}
		return
	}
	if attnAVX2 && g > 0 && g%4 == 0 && len(scores)%g == 0 {
		_, _ = m[g-1], sums[g-1]
		clear(sums[:g])
		if len(scores) > 0 {
			attnExpAVX2(unsafe.SliceData(scores), len(scores)/g, g, unsafe.SliceData(m), unsafe.SliceData(sums))
		}
		return
	}
	attnExpGo(scores, g, m, sums)
}

// attnAxpyBlock adds, for each of the nb positions of vb (rows of d values
// vs apart) in order, w[p][h]·v_p to row h of out ([g][d]) with w =
// [nb][g]: exactly nb attnAxpy calls, with each output vector kept in a
// register across the positions (attn_block_amd64.s).
func attnAxpyBlock(out, vb, w []float32, nb, g, d, vs int) {
	if attnZOn && d%16 == 0 && d > 0 && g > 0 && nb > 0 {
		_, _, _ = out[g*d-1], vb[(nb-1)*vs+d-1], w[nb*g-1]
		attnAxpyBlockAVX512(unsafe.SliceData(vb), unsafe.SliceData(w), nb, g, d, vs, unsafe.SliceData(out))
		return
	}
	if attnAVX2 && d%8 == 0 && d > 0 && g > 0 && nb > 0 {
		_, _, _ = out[g*d-1], vb[(nb-1)*vs+d-1], w[nb*g-1]
		attnAxpyBlockAVX2(unsafe.SliceData(vb), unsafe.SliceData(w), nb, g, d, vs, unsafe.SliceData(out))
		return
	}
	attnAxpyBlockGo(out, vb, w, nb, g, d, vs)
}

//go:noescape
func attnPrefetchRowsAVX2(src *byte, sstride, nrows, bytes int)

// attnPrefetchRows prefetches nrows rows of d values, sstride values apart
// in src (F16 when f16, else float32).
func attnPrefetchRows(src unsafe.Pointer, f16 bool, sstride, nrows, d int) {
	if !attnAVX2 {
		return
	}
	es := 4
	if f16 {
		es = 2
	}
	attnPrefetchRowsAVX2((*byte)(src), sstride*es, nrows, d*es)
}

// attnCvtRows widens nrows rows of d F16 values, sstride values apart in
// src, into dst ([nrows][d]), as nrows attnCvt calls would.
func attnCvtRows(dst []float32, src []uint16, sstride, nrows, d int) {
	if attnAVX2 && d%8 == 0 && d > 0 && nrows > 0 {
		_, _ = dst[nrows*d-1], src[(nrows-1)*sstride+d-1]
		attnCvtRowsAVX2(unsafe.SliceData(src), sstride, unsafe.SliceData(dst), nrows, d)
		return
	}
	for r := 0; r < nrows; r++ {
		attnCvt(dst[r*d:(r+1)*d], src[r*sstride:r*sstride+d])
	}
}

//go:noescape
func attnScaleMaxAVX2(s *float32, n, g8 int, scale float32, m *float32)

// attnScaleMax is attnScaleMaxGo, eight heads per vector when g is a
// multiple of 8.
func attnScaleMax(scores []float32, g int, scale float32, m []float32) {
	if attnAVX2 && g > 0 && g%8 == 0 && len(scores)%g == 0 {
		_ = m[g-1]
		for h := range g {
			m[h] = float32(math.Inf(-1))
		}
		if len(scores) > 0 {
			attnScaleMaxAVX2(unsafe.SliceData(scores), len(scores)/g, g/8, scale, unsafe.SliceData(m))
		}
		return
	}
	attnScaleMaxGo(scores, g, scale, m)
}

//go:noescape
func attnScoresAVX512(k *float32, qt *float32, nb, gv, dim, ks, ng, mask int, out *float32)

//go:noescape
func attnExpAVX512(scores *float32, n, nh int, m *float32, sums *float64)

//go:noescape
func attnAxpyBlockAVX512(v *float32, w *float32, nb, nh, dim, vs int, out *float32)

//go:noescape
func attnScoresAVX2(k *float32, qt *float32, nb, gv, dim, ks, ng int, out *float32, mask *int32)

// attnMasks[r] selects the first r lanes of a vector (VMASKMOVPS).
var attnMasks = func() (m [9][8]int32) {
	for r := range m {
		for l := 0; l < r; l++ {
			m[r][l] = -1
		}
	}
	return m
}()

// attnScores sets out[p*g+h] = q[h]·k_p for the nb positions of kb (rows
// of d values ks apart) as attnScoresGo defines it; qt is q as
// attnTransposeQ lays it out (the vector kernel's operand).
func attnScores(out, q, qt, kb []float32, nb, g, d, ks int) {
	if attnZOn && d%8 == 0 && d > 0 && g > 0 && attnPad(g)%16 == 0 && nb > 0 {
		// AVX-512 (attn_chunk_avx512_amd64.s): qt's rows are whole
		// 16-lane vectors.
		gv := attnPad(g) / 16
		_, _, _ = out[nb*g-1], qt[d*gv*16-1], kb[(nb-1)*ks+d-1]
		attnScoresAVX512(unsafe.SliceData(kb), unsafe.SliceData(qt), nb, gv, d, ks, g, 1<<(g-(gv-1)*16)-1, unsafe.SliceData(out))
		return
	}
	if attnAVX2 && d%8 == 0 && d > 0 && g > 0 && nb > 0 {
		gv := (g + 7) / 8
		_, _, _ = out[nb*g-1], qt[d*gv*8-1], kb[(nb-1)*ks+d-1]
		attnScoresAVX2(unsafe.SliceData(kb), unsafe.SliceData(qt), nb, gv, d, ks, g, unsafe.SliceData(out), &attnMasks[g-(gv-1)*8][0])
		return
	}
	attnScoresGo(out, q, kb, nb, g, d, ks)
}
