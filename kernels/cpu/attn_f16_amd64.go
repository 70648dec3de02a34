package cpu

import "math"

//go:noescape
func attnF16DotsAVX2(q *float32, k *uint16, d, ng int, scale float32, s *float32)

//go:noescape
func attnF16UpdAVX2(acc *float32, v *uint16, d, ng int, mw *float32)

//go:noescape
func roundF16AVX2(dst, src *float32, n int)

//go:noescape
func storeF16AVX2(dst *uint16, src *float32, n int)

// storeF16SIMD rounds the whole groups of 8 of src to F16 into dst with
// VCVTPS2PH (round to nearest even, as F32ToF16: TestStoreRowF16SIMD) and
// returns how many it did.
func storeF16SIMD(dst []uint16, src []float32) int {
	n := len(src) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = dst[n-1]
	storeF16AVX2(&dst[0], &src[0], n)
	return n
}

// attendF16SIMD is AttendF16 with its vector work in AVX2
// (attn_f16_amd64.s): the query rounding, the g dot products of each key
// and the F16 accumulator updates. The online softmax stays the same Go
// code (keep it in step with AttendF16's), so the result is bit for bit
// AttendF16's and its twin attendF16Ref's (TestAttendF16SIMD). It
// reports false, doing nothing, where it does not apply (no AVX2, a head
// dimension that is not a multiple of 32, F32 stores, scratch too short).
func attendF16SIMD(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, o AttnOpts, scratch []float32) bool {
	if !hasAVX2 || g <= 0 || n <= 0 || k.F16 == nil || v.F16 == nil {
		return false
	}
	d := len(q) / g
	if d == 0 || d%32 != 0 || 3*g > d || len(scratch) < 2*g*d+d+2*g || len(out) < g*d {
		return false
	}
	// scratch as AttendF16 lays it out: q16 [g][d] | acc [g][d] | row [d]
	// (here: s [g] and (m, w) [g][2]) | M, S [g].
	q16 := scratch[:g*d]
	acc := scratch[g*d : 2*g*d]
	row := scratch[2*g*d : 2*g*d+d]
	s, mw := row[:g], row[g:3*g]
	ms := scratch[2*g*d+d : 2*g*d+d+2*g]
	M, S := ms[:g], ms[g:2*g]
	roundF16AVX2(&q16[0], &q[0], g*d)
	clear(acc)
	for h := 0; h < g; h++ {
		M[h] = float32(math.Inf(-1))
		S[h] = 0
	}
	for p := o.Skip; p < n; p++ {
		ki := k.index(table, p, off)
		kr := k.F16[ki : ki+d]
		vi := v.index(table, p, off)
		vr := v.F16[vi : vi+d]
		attnF16DotsAVX2(&q16[0], &kr[0], d, g, scale, &s[0])
		for h := 0; h < g; h++ {
			sh := s[h]
			m, w := float32(1), float32(1)
			if sh > M[h] {
				m = float32(math.Exp(float64(M[h] - sh)))
				M[h] = sh
				S[h] = fmaF32(S[h], m, 1) // as AttendF16: ggml's S*ms + vs, fused
			} else {
				w = float32(math.Exp(float64(sh - M[h])))
				S[h] += w
			}
			mw[2*h], mw[2*h+1] = m, w
		}
		attnF16UpdAVX2(&acc[0], &vr[0], d, g, &mw[0])
	}
	attnF16Finish(out, acc, M, S, o.Sinks, g, d)
	return true
}
