package cpu

import "math"

// K-quant encoders. They are simple (a small grid search per sub-block, then
// least squares), not llama-quantize's importance-weighted search: good
// enough for tests and for quantizing activations or small tensors on load.

// fitAffine fits x ≈ s*q - m with q in [0, nmax] integers and m >= 0 (the
// min is never above zero, as ggml requires). It returns s and m.
func fitAffine(x []float32, nmax int) (s, m float32) {
	lo, hi := minMax(x)
	lo = min(lo, 0)
	if hi == lo {
		return 0, -lo
	}
	bestErr := math.Inf(1)
	s, m = (hi-lo)/float32(nmax), -lo
	for k := -4; k <= 4; k++ {
		iscale := (float32(nmax) + 0.1*float32(k)) / (hi - lo)
		var n, sq, sqq, sx, sqx float64
		for _, v := range x {
			q := float64(max(0, min(nmax, roundAway(iscale*(v-lo)))))
			n++
			sq += q
			sqq += q * q
			sx += float64(v)
			sqx += q * float64(v)
		}
		det := n*sqq - sq*sq
		if det <= 0 {
			continue
		}
		cs := (n*sqx - sq*sx) / det
		cm := (sqq*sx - sq*sqx) / det // offset: x ≈ cs*q + cm
		if cm > 0 {
			cm = 0
			cs = sqx / sqq
		}
		if cs <= 0 {
			continue
		}
		var e float64
		for _, v := range x {
			q := math.Max(0, math.Min(float64(nmax), math.Round((float64(v)-cm)/cs)))
			r := cs*q + cm - float64(v)
			e += r * r
		}
		if e < bestErr {
			bestErr, s, m = e, float32(cs), float32(-cm)
		}
	}
	return s, m
}

// fitSymmetric fits x ≈ s*q with q in [-nneg, nneg-1]; s may be negative so
// that the value of largest magnitude uses -nneg, as ggml does.
func fitSymmetric(x []float32, nneg int) float32 {
	amax, vmax := absMax(x)
	if amax == 0 {
		return 0
	}
	s := vmax / -float32(nneg)
	var sqx, sqq float64
	for _, v := range x {
		q := float64(max(-nneg, min(nneg-1, roundAway(v/s))))
		sqx += q * float64(v)
		sqq += q * q
	}
	if sqq > 0 && sqx != 0 {
		return float32(sqx / sqq)
	}
	return s
}

// quantLevel rounds v to an integer in [lo, hi].
func quantLevel(v float32, lo, hi int) int {
	if v != v {
		return lo
	}
	return max(lo, min(hi, roundAway(v)))
}

// superScale picks the F16 super-block scale for non-negative sub-block
// values vs so that each becomes an integer in [0, levels].
func superScale(vs []float32, levels int) (d float32, ls []int) {
	var top float32
	for _, v := range vs {
		top = max(top, v)
	}
	d = fp16Round(top / float32(levels))
	ls = make([]int, len(vs))
	if d == 0 {
		return 0, ls
	}
	for j, v := range vs {
		ls[j] = quantLevel(v/d, 0, levels)
	}
	return d, ls
}

// quantAffineK encodes one super-block of Q2_K (nmax 3, 16 sub-blocks of 16,
// 4-bit scales) or Q4_K/Q5_K (nmax 15/31, 8 sub-blocks of 32, 6-bit scales).
// It returns d, dmin, the scale and min levels and the per-element q.
func quantAffineK(x []float32, sub, nmax, levels int) (d, dmin float32, ls, lm []int, q [qkK]int) {
	ns := qkK / sub
	scales := make([]float32, ns)
	mins := make([]float32, ns)
	for j := 0; j < ns; j++ {
		scales[j], mins[j] = fitAffine(x[j*sub:(j+1)*sub], nmax)
	}
	d, ls = superScale(scales, levels)
	dmin, lm = superScale(mins, levels)
	for j := 0; j < ns; j++ {
		dl, ml := d*float32(ls[j]), dmin*float32(lm[j])
		for i := j * sub; i < (j+1)*sub; i++ {
			if dl == 0 {
				q[i] = 0
				continue
			}
			q[i] = quantLevel((x[i]+ml)/dl, 0, nmax)
		}
	}
	return d, dmin, ls, lm, q
}

func quantQ2_K(x []float32, b []byte) {
	d, dmin, ls, lm, q := quantAffineK(x, 16, 3, 15)
	for j := 0; j < 16; j++ {
		b[j] = byte(ls[j]) | byte(lm[j])<<4
	}
	packLow2(q[:], b[16:80])
	put16(b[80:], F32ToF16(d))
	put16(b[82:], F32ToF16(dmin))
}

// packLow2 stores the low 2 bits of 256 values: element n+32j+m (n in {0,128},
// j 0..3, m 0..31) goes to byte n/4+m, bits 2j.
func packLow2(q []int, qs []byte) {
	clear(qs[:64])
	for e, v := range q[:qkK] {
		n, j, m := e/128, (e%128)/32, e%32
		qs[32*n+m] |= byte(v&3) << (2 * j)
	}
}

func quantQ3_K(x []float32, b []byte) {
	var sc [16]float32
	for j := range sc {
		sc[j] = fitSymmetric(x[16*j:16*j+16], 4)
	}
	var amax, vmax float32
	for _, v := range sc {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, vmax = a, v
		}
	}
	d := fp16Round(vmax / -32)
	var l [16]int
	var q [qkK]int
	for j := range sc {
		if d != 0 {
			l[j] = quantLevel(sc[j]/d, -32, 31)
		}
		dl := d * float32(l[j])
		for i := 16 * j; i < 16*j+16; i++ {
			if dl != 0 {
				q[i] = quantLevel(x[i]/dl, -4, 3) + 4 // 0..7
			} else {
				q[i] = 4
			}
		}
	}
	hmask, qs, scales := b[0:32], b[32:96], b[96:108]
	clear(hmask)
	clear(scales)
	for e, v := range q {
		if v >= 4 {
			hmask[e%32] |= 1 << (e / 32)
		}
	}
	packLow2(q[:], qs)
	for j, v := range l {
		u := byte(v + 32)
		if j < 8 {
			scales[j] |= u & 15
		} else {
			scales[j-8] |= (u & 15) << 4
		}
		scales[8+j%4] |= (u >> 4) << (2 * (j / 4))
	}
	put16(b[108:], F32ToF16(d))
}

// packScalesK4 stores eight 6-bit scales and mins as Q4_K/Q5_K's scales[12].
func packScalesK4(ls, lm []int, s []byte) {
	for j := 0; j < 4; j++ {
		s[j] = byte(ls[j]) | byte(ls[j+4]>>4)<<6
		s[j+4] = byte(lm[j]) | byte(lm[j+4]>>4)<<6
		s[j+8] = byte(ls[j+4]&15) | byte(lm[j+4]&15)<<4
	}
}

func quantQ4_K(x []float32, b []byte) {
	d, dmin, ls, lm, q := quantAffineK(x, 32, 15, 63)
	put16(b, F32ToF16(d))
	put16(b[2:], F32ToF16(dmin))
	packScalesK4(ls, lm, b[4:16])
	qs := b[16:144]
	for j := 0; j < 4; j++ {
		for l := 0; l < 32; l++ {
			qs[32*j+l] = byte(q[64*j+l]) | byte(q[64*j+32+l])<<4
		}
	}
}

func quantQ5_K(x []float32, b []byte) {
	d, dmin, ls, lm, q := quantAffineK(x, 32, 31, 63)
	put16(b, F32ToF16(d))
	put16(b[2:], F32ToF16(dmin))
	packScalesK4(ls, lm, b[4:16])
	qh, qs := b[16:48], b[48:176]
	clear(qh)
	for j := 0; j < 4; j++ {
		for l := 0; l < 32; l++ {
			v1, v2 := q[64*j+l], q[64*j+32+l]
			qs[32*j+l] = byte(v1&15) | byte(v2&15)<<4
			qh[l] |= byte(v1>>4)<<(2*j) | byte(v2>>4)<<(2*j+1)
		}
	}
}

func quantQ6_K(x []float32, b []byte) {
	var sc [16]float32
	for j := range sc {
		sc[j] = fitSymmetric(x[16*j:16*j+16], 32)
	}
	var amax, vmax float32
	for _, v := range sc {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, vmax = a, v
		}
	}
	d := fp16Round(vmax / -128)
	var l [16]int
	var q [qkK]int
	for j := range sc {
		if d != 0 {
			l[j] = quantLevel(sc[j]/d, -128, 127)
		}
		dl := d * float32(l[j])
		for i := 16 * j; i < 16*j+16; i++ {
			if dl != 0 {
				q[i] = quantLevel(x[i]/dl, -32, 31) + 32
			} else {
				q[i] = 32
			}
		}
	}
	ql, qh, scales := b[0:128], b[128:192], b[192:208]
	for n := 0; n < 2; n++ {
		for i := 0; i < 32; i++ {
			q1, q2, q3, q4 := q[128*n+i], q[128*n+i+32], q[128*n+i+64], q[128*n+i+96]
			ql[64*n+i] = byte(q1&15) | byte(q3&15)<<4
			ql[64*n+i+32] = byte(q2&15) | byte(q4&15)<<4
			qh[32*n+i] = byte(q1>>4) | byte(q2>>4)<<2 | byte(q3>>4)<<4 | byte(q4>>4)<<6
		}
	}
	for j, v := range l {
		scales[j] = byte(int8(v))
	}
	put16(b[208:], F32ToF16(d))
}
