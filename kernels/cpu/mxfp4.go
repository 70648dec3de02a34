package cpu

import (
	"math"
	"sync"
)

// MXFP4, the OCP microscaling 4-bit float format (gpt-oss's expert
// weights). Layout of a block of 32 (17 bytes): e u8 | qs[16], nibbles as
// in Q4_0 (byte j holds element j in its low half and element j+16 in its
// high half). A nibble is an E2M1 float: bit 3 the sign, then the values
// 0, 0.5, 1, 1.5, 2, 3, 4, 6. As ggml stores it (ggml-common.h), a nibble
// indexes mxfp4Values, the E2M1 values doubled, and the block scale is the
// E8M0 exponent e halved:
//
//	x[j] = 2^(e-128)·mxfp4Values[qs[j]&15], x[j+16] = 2^(e-128)·mxfp4Values[qs[j]>>4]
//
// The products run as Q8_0 (blk_conv.go): a block becomes a Q8_0 block
// whose 32 bytes are the levels and whose F16 scale is 2^(e-128). That is
// exact for the scales F16 holds, 2^-24 to 2^15 (e from 104 to 143; a
// trained model's blocks lie well inside); a smaller scale reads as 0 (its
// block's values are below 2^-20) and a larger one as 2^15
// (mxfp4F16Scale). The portable dot product uses the same scale, so every
// path gives the arithmetic of the converted rows; Dequantize is exact.

// mxfp4Values are the 16 levels: the E2M1 values doubled, positive then
// negative.
var mxfp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// E8M0Half returns 2^(e-128), the scale of an MXFP4 block with exponent
// byte e (half of the E8M0 value, matching the doubled levels).
func E8M0Half(e byte) float32 {
	if e < 2 { // 2^-128 and 2^-127 are float32 subnormals
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// mxfp4F16Scale returns the F16 bits of the scale the products use for
// exponent byte e: 2^(e-128), 0 below 2^-24, 2^15 above it.
func mxfp4F16Scale(e byte) uint16 {
	p := int(e) - 128
	switch {
	case p < -24:
		return 0
	case p < -14: // subnormal: 2^p = 2^(p+24) · 2^-24
		return uint16(1) << (p + 24)
	case p > 15:
		p = 15
	}
	return uint16(p+15) << 10
}

func dequantMXFP4(b []byte, y []float32) {
	d := E8M0Half(b[0])
	qs := b[1:17]
	for j := 0; j < 16; j++ {
		y[j] = d * float32(mxfp4Values[qs[j]&15])
		y[j+16] = d * float32(mxfp4Values[qs[j]>>4])
	}
}

// quantMXFP4 encodes 32 values: of the two exponents nearest to the one
// that maps the largest magnitude onto 12 (the largest level), the one
// with the smaller squared error, each value its nearest level. This
// package's own encoder, not ggml's (which takes the first exponent).
func quantMXFP4(x []float32, b []byte) {
	var amax float32
	for _, v := range x[:32] {
		amax = max(amax, abs32(v))
	}
	if amax == 0 || math.IsNaN(float64(amax)) || math.IsInf(float64(amax), 0) {
		clear(b[:17])
		return
	}
	_, exp := math.Frexp(float64(amax / 12)) // amax/12 = f·2^exp, 0.5 ≤ f < 1
	best, bestErr := byte(0), float32(math.Inf(1))
	for _, p := range []int{exp - 1, exp} { // scale 2^p: the largest fits at 2^exp, may round down at 2^(exp-1)
		e := p + 128
		if e < 0 || e > 254 {
			continue
		}
		d := E8M0Half(byte(e))
		var se float32
		for _, v := range x[:32] {
			r := v - d*float32(mxfp4Values[mxfp4Nearest(v/d)])
			se += r * r
		}
		if se < bestErr {
			best, bestErr = byte(e), se
		}
	}
	b[0] = best
	d := E8M0Half(best)
	for j := 0; j < 16; j++ {
		b[1+j] = byte(mxfp4Nearest(x[j]/d)) | byte(mxfp4Nearest(x[j+16]/d))<<4
	}
}

// mxfp4Nearest returns the nibble whose level is nearest to v (in units
// of the scale; ties go to the smaller magnitude).
func mxfp4Nearest(v float32) int {
	a, sign := v, 0
	if v < 0 {
		a, sign = -v, 8
	}
	best := 0 // the levels below a's: the midpoints a passes
	for _, m := range mxfp4Mids {
		if a > m {
			best++
		}
	}
	if best == 0 {
		return 0
	}
	return best | sign
}

// mxfp4Mids are the midpoints between consecutive positive levels.
var mxfp4Mids = [7]float32{0.5, 1.5, 2.5, 3.5, 5, 7, 10}

// mxfp4Pairs maps a byte of nibbles to its two levels (low, high).
var mxfp4Pairs = sync.OnceValue(func() (t [256][2]int8) {
	for v := range t {
		t[v] = [2]int8{mxfp4Values[v&15], mxfp4Values[v>>4]}
	}
	return t
})

// mxfp4ToQ8_0 writes nb MXFP4 blocks of src as Q8_0 blocks in dst: the
// scale as mxfp4F16Scale, each nibble replaced by its level (exact: a
// level is an int8). It is the conversion of the blocked kernels
// (blkKernel.conv).
func mxfp4ToQ8_0(dst, src []byte, nb int) {
	if nb <= 0 {
		return
	}
	_ = src[17*nb-1]
	_ = dst[34*nb-1]
	pairs := mxfp4Pairs()
	for b := 0; b < nb; b++ {
		s, d := (*[17]byte)(src[17*b:]), (*[34]byte)(dst[34*b:])
		put16(d[:], mxfp4F16Scale(s[0]))
		for j, v := range s[1:17] {
			p := pairs[v]
			d[2+j], d[18+j] = byte(p[0]), byte(p[1])
		}
	}
}

// dotMXFP4Go is the portable MXFP4 × Q8_0 product: per block the exact
// integer sum of levels × activations, times the F16 scale × the
// activation scale.
func dotMXFP4Go(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[17*b : 17*b+17]
		q := a.qs[32*b : 32*b+32]
		var si int32
		for j, v := range blk[1:17] {
			si += int32(mxfp4Values[v&15])*int32(q[j]) + int32(mxfp4Values[v>>4])*int32(q[j+16])
		}
		sum += float32(si) * (tab[mxfp4F16Scale(blk[0])] * dy)
	}
	return sum
}
