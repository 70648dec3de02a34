package cpu

import "math"

// The non-linear 4-bit formats. A nibble indexes iq4Values instead of
// being a linear level; the table is denser near zero, where most
// weights lie. Layouts (little-endian, nibbles as in Q4_0: byte j holds
// element j in its low half and element j+16 in its high half):
//
//	IQ4_NL (18 B per 32): d f16 | qs[16]
//	    x[j] = d·iq4Values[qs[j]&15], x[j+16] = d·iq4Values[qs[j]>>4]
//	IQ4_XS (136 B per 256): d f16 | scales_h u16 | scales_l[4] | qs[128]
//	    sub-block i (32 elements, qs[16i:16i+16]) has the 6-bit scale
//	    l = (scales_l[i/2] >> 4(i%2)) & 15 | ((scales_h >> 2i) & 3) << 4;
//	    its elements are (d·(l-32))·iq4Values[nibble].
//
// The values and the bit layout are ggml's (ggml-common.h); the encoders
// below are this package's own (a least-squares scale search), not
// llama-quantize's, so they write valid blocks that need not equal its.

// iq4Values are the 16 levels of IQ4_NL and IQ4_XS, ascending.
var iq4Values = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func dequantIQ4_NL(b []byte, y []float32) {
	d := F16ToF32(le16(b))
	qs := b[2:18]
	for j := 0; j < 16; j++ {
		y[j] = d * float32(iq4Values[qs[j]&15])
		y[j+16] = d * float32(iq4Values[qs[j]>>4])
	}
}

// iq4XSScale returns the 6-bit scale of sub-block i of an IQ4_XS block.
func iq4XSScale(b []byte, i int) int32 {
	lo := int32(b[4+i/2]>>(4*(i%2))) & 15
	hi := int32(le16(b[2:])>>(2*i)) & 3
	return lo | hi<<4
}

func dequantIQ4_XS(b []byte, y []float32) {
	d := F16ToF32(le16(b))
	for i := 0; i < 8; i++ {
		dl := d * float32(iq4XSScale(b, i)-32)
		qs := b[8+16*i : 24+16*i]
		z := y[32*i : 32*i+32]
		for j := 0; j < 16; j++ {
			z[j] = dl * float32(iq4Values[qs[j]&15])
			z[j+16] = dl * float32(iq4Values[qs[j]>>4])
		}
	}
}

// iq4Nearest returns the index of the level nearest to v (in units of
// the scale).
func iq4Nearest(v float32) int {
	lo, hi := 0, 15
	for hi-lo > 1 { // levels[lo] <= v < levels[hi] once narrowed
		mid := (lo + hi) / 2
		if v < float32(iq4Values[mid]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	if v-float32(iq4Values[lo]) <= float32(iq4Values[hi])-v {
		return lo
	}
	return hi
}

// iq4Fit chooses the scale of 32 values for the IQ4 levels: starting
// from the scale that maps the largest magnitude onto -127, it tries
// nearby scales, assigns every value its nearest level and refits the
// scale by least squares, keeping the fit with the smallest squared
// error. It returns 0 for an all-zero (or non-finite) block.
func iq4Fit(x []float32) float32 {
	var vmax float32
	for _, v := range x {
		if abs32(v) > abs32(vmax) {
			vmax = v
		}
	}
	if vmax == 0 || math.IsNaN(float64(vmax)) || math.IsInf(float64(vmax), 0) {
		return 0
	}
	best, bestErr := vmax/-127, float32(math.Inf(1))
	for step := -8; step <= 8; step++ {
		d := vmax / (-127 + float32(step)*2)
		id := 1 / d
		var sxl, sll float32
		for _, v := range x {
			l := float32(iq4Values[iq4Nearest(v*id)])
			sxl += v * l
			sll += l * l
		}
		if sll == 0 {
			continue
		}
		d = sxl / sll
		if d == 0 {
			continue
		}
		if e := iq4Err(x, d); e < bestErr {
			best, bestErr = d, e
		}
	}
	return best
}

// iq4Err is the squared error of x encoded with scale d.
func iq4Err(x []float32, d float32) float32 {
	id := 1 / d
	var e float32
	for _, v := range x {
		r := v - d*float32(iq4Values[iq4Nearest(v*id)])
		e += r * r
	}
	return e
}

// iq4Nibbles writes the 16 bytes of nibbles of 32 values with scale d.
func iq4Nibbles(x []float32, d float32, qs []byte) {
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for j := 0; j < 16; j++ {
		qs[j] = byte(iq4Nearest(x[j]*id)) | byte(iq4Nearest(x[j+16]*id))<<4
	}
}

func quantIQ4_NL(x []float32, b []byte) {
	d := F16ToF32(F32ToF16(iq4Fit(x)))
	put16(b, F32ToF16(d))
	iq4Nibbles(x, d, b[2:18])
}

func quantIQ4_XS(x []float32, b []byte) {
	var sub [8]float32
	var amax float32
	for i := range sub {
		sub[i] = iq4Fit(x[32*i : 32*i+32])
		amax = max(amax, abs32(sub[i]))
	}
	d := F16ToF32(F32ToF16(amax / 31))
	put16(b, F32ToF16(d))
	var h uint16
	clear(b[4:8])
	for i, s := range sub {
		l := int32(32)
		if d != 0 {
			l = 32 + int32(math.Round(float64(s/d)))
			l = min(max(l, 0), 63)
		}
		b[4+i/2] |= byte(l&15) << (4 * (i % 2))
		h |= uint16(l>>4) << (2 * i)
		iq4Nibbles(x[32*i:32*i+32], d*float32(l-32), b[8+16*i:24+16*i])
	}
	put16(b[2:], h)
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// dot32IQ4 returns Σ iq4Values[nibble]·q over one 32-element block.
func dot32IQ4(qs []byte, q []int8) int32 {
	var s int32
	q = q[:32]
	for j, v := range qs[:16] {
		s += int32(iq4Values[v&15])*int32(q[j]) + int32(iq4Values[v>>4])*int32(q[j+16])
	}
	return s
}

func dotIQ4_NLGo(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[18*b : 18*b+18]
		sum += float32(dot32IQ4(blk[2:], a.qs[32*b:])) * (tab[le16(blk)] * dy)
	}
	return sum
}

// dotIQ4_XSGo sums each super-block exactly in integers (the sub-block
// sums times their signed scales l-32), then multiply-adds it with d·dy.
func dotIQ4_XSGo(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[136*b : 136*b+136]
		q8 := a.qs[qkK*b : qkK*b+qkK]
		var isum int32
		for i := 0; i < 8; i++ {
			isum += (iq4XSScale(blk, i) - 32) * dot32IQ4(blk[8+16*i:], q8[32*i:])
		}
		sum += float32(isum) * (tab[le16(blk)] * dy)
	}
	return sum
}
