package cpu

import "math"

// sincosfGlibc returns (sin y, cos y) as glibc's sincosf computes them on
// x86-64 with FMA (the libm that llama.cpp's RoPE cache calls; glibc 2.28+
// "fast sincosf", built with FMA contraction in its FMA ifunc variant).
// Its results differ from the correctly rounded ones by one ulp for about
// 2% of RoPE angles, which is enough to change llama.cpp's K/Q and, through
// the F16 attention and quantized activations of the reference models, its
// logits. Algorithm (our own code from the published description): in
// double precision, reduce y to r in [-pi/4, pi/4] and a quadrant n (one
// multiply-subtract with pi/2 below |y| = 120, else a fixed-point product
// with 4/pi), then evaluate fixed polynomials in r² with fused
// multiply-adds, swap/negate by quadrant and round to float32.
func sincosfGlibc(y float32) (sinv, cosv float32) {
	x := float64(y)
	ay := math.Float32bits(y) & 0x7fffffff
	top := ay >> 20
	switch {
	case top < 0x3f4: // |y| < pi/4 (abstop12 of pio4 as float)
		if top < 0x398 { // |y| < 2^-12
			return y, 1
		}
		return sincosPoly(x, x*x, 0, false)
	case top < 0x42f: // |y| < 120
		r := x * sincosHpiInv
		n := int((int32(r) + 0x800000) >> 24)
		x = math.FMA(-float64(n), sincosHpi, x)
		s := sincosSign[n&3]
		return sincosPoly(x*s, x*x, n, n&2 != 0)
	case top < 0x7f8: // finite
		xi := math.Float32bits(y)
		sign := int(xi >> 31)
		r, n := sincosReduceLarge(xi)
		s := sincosSign[(n+sign)&3]
		return sincosPoly(r*s, r*r, n, (n+sign)&2 != 0)
	}
	nan := y - y
	return nan, nan
}

// Constants of the reduction and the polynomials (minimax fits published
// with the algorithm).
const (
	sincosHpiInv = 0x1.45F306DC9C883p+23 // 2/pi · 2^24
	sincosHpi    = 0x1.921FB54442D18p0   // pi/2
	sincosPi63   = 0x1.921FB54442D18p-62 // 2pi · 2^-64
	sincosC0     = 0x1p0
	sincosC1     = -0x1.ffffffd0c621cp-2
	sincosC2     = 0x1.55553e1068f19p-5
	sincosC3     = -0x1.6c087e89a359dp-10
	sincosC4     = 0x1.99343027bf8c3p-16
	sincosS1     = -0x1.555545995a603p-3
	sincosS2     = 0x1.1107605230bc4p-7
	sincosS3     = -0x1.994eb3774cf24p-13
)

var sincosSign = [4]float64{1, -1, -1, 1}

// sincosInvPio4 holds 4/pi in overlapping 32-bit windows: entry i is bits
// 8(i-3) .. 8i+7 of 4/pi's fraction (leading zero bytes for i < 3).
var sincosInvPio4 = func() [24]uint32 {
	b := [24]byte{0xa2, 0xf9, 0x83, 0x6e, 0x4e, 0x44, 0x15, 0x29, 0xfc, 0x27, 0x57, 0xd1,
		0xf5, 0x34, 0xdd, 0xc0, 0xdb, 0x62, 0x95, 0x99, 0x3c, 0x43, 0x90, 0x41}
	var t [24]uint32
	for i := range t {
		for k := i - 3; k <= i; k++ {
			t[i] <<= 8
			if k >= 0 {
				t[i] |= uint32(b[k])
			}
		}
	}
	return t
}()

// sincosReduceLarge reduces |y| >= 120 (bits xi, sign ignored) modulo pi/2
// with a 32x96-bit fixed-point product by 4/pi.
func sincosReduceLarge(xi uint32) (float64, int) {
	arr := sincosInvPio4[(xi>>26)&15:]
	shift := (xi >> 23) & 7
	xi = (xi&0xffffff | 0x800000) << shift
	res0 := uint64(xi * arr[0]) // 32-bit product, as in the C code
	res1 := uint64(xi) * uint64(arr[4])
	res2 := uint64(xi) * uint64(arr[8])
	res0 = res2>>32 | res0<<32
	res0 += res1
	n := (res0 + 1<<61) >> 62
	res0 -= n << 62
	return float64(int64(res0)) * sincosPi63, int(n)
}

// sincosPoly evaluates sin and cos of the reduced x (x2 = x²), swapping them
// for odd quadrants and negating cos when neg (the second coefficient set).
func sincosPoly(x, x2 float64, n int, neg bool) (float32, float32) {
	c0, c1, c2, c3, c4 := sincosC0, sincosC1, sincosC2, sincosC3, sincosC4
	if neg {
		c0, c1, c2, c3, c4 = -c0, -c1, -c2, -c3, -c4
	}
	x4 := x2 * x2
	x3 := x2 * x
	cc2 := math.FMA(x2, c4, c3)
	s1 := math.FMA(x2, sincosS3, sincosS2)
	cc1 := math.FMA(x2, c1, c0)
	x5 := x3 * x2
	x6 := x4 * x2
	s := math.FMA(x3, sincosS1, x)
	c := math.FMA(x4, c2, cc1)
	sv := float32(math.FMA(x5, s1, s))
	cv := float32(math.FMA(x6, cc2, c))
	if n&1 != 0 {
		return cv, sv
	}
	return sv, cv
}
