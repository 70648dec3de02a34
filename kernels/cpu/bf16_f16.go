package cpu

import (
	"math"

	"oengine/ggml"
)

// BF16 matrices computed by the F16 kernels. A BF16 value has 8
// significant bits; F16 holds 11 and spans 2^-24 (its smallest subnormal
// step) to 65504, so a BF16 value converts to F16 exactly when its lowest
// bit weighs at least 2^-24 and it is below 2^16. A matrix whose nonzero
// values span at most 33 binades fits once scaled by a power of two,
// 2^pow2: PackBF16 stores the F16 values w·2^pow2, and a product of the
// stored matrix is 2^pow2 times the BF16 product computed in the same
// order (scaling by a power of two commutes with every rounding, short of
// overflow or subnormal results), so tile and RowF32 scale the results
// back by 2^-pow2 and get its bits. dotBF16AVX2 computes in dotF16AVX2's
// order, so a converted matrix gives exactly what its BF16 bytes give, and
// BF16 weights get the F16 tiles of prefill and few-token decode.

// bf16F16Span reports the power of two that makes every value of the BF16
// data exactly representable in F16 (the one nearest 0), or ok = false
// when none does: an infinity, a NaN, a BF16 subnormal, or more than 33
// binades between the smallest and the largest nonzero magnitude.
func bf16F16Span(data []byte) (pow2 int, ok bool) {
	emin, emax := 255, 0
	for i := 0; i+1 < len(data); i += 2 {
		b := le16(data[i:])
		e := int(b>>7) & 0xff
		switch {
		case e == 0xff:
			return 0, false
		case e == 0 && b&0x7f != 0:
			return 0, false
		case e == 0:
			continue // ±0
		}
		emin, emax = min(emin, e), max(emax, e)
	}
	if emax == 0 {
		return 0, true // all zero
	}
	// A value of biased exponent e is below 2^(e-126) and its lowest bit
	// weighs 2^(e-134): scaled by 2^s it fits when e-126+s <= 16 and
	// e-134+s >= -24.
	lo, hi := 110-emin, 142-emax
	if lo > hi {
		return 0, false
	}
	return min(max(0, lo), hi), true
}

// PackBF16 writes m, a BF16 matrix, into dst (len(dst) == len(m.Data);
// dst may be m.Data itself) as F16 values times 2^pow2 (bf16F16Span) and
// returns the F16 matrix over dst, which MatMul and RowF32 compute with
// to the bits of m. It returns m and false, writing nothing, when m is not
// BF16, its values do not fit, or this CPU has no F16 kernels (AVX2).
func PackBF16(m Matrix, dst []byte) (Matrix, bool) {
	if m.Type != ggml.TypeBF16 || !hasAVX2 || len(dst) != len(m.Data) {
		return m, false
	}
	pow2, ok := bf16F16Span(m.Data)
	if !ok {
		return m, false
	}
	scale := float32(math.Ldexp(1, pow2))
	for i := 0; i+1 < len(m.Data); i += 2 {
		put16(dst[i:], F32ToF16(BF16ToF32(le16(m.Data[i:]))*scale))
	}
	out := m
	out.Type, out.Data, out.pow2, out.bf16 = ggml.TypeF16, dst, pow2, true
	return out, true
}

// FromBF16 reports whether m is a BF16 matrix that PackBF16 converted.
func (m Matrix) FromBF16() bool { return m.bf16 }

// unscale multiplies v by 2^-pow2 (exact), for a converted BF16 matrix.
func (m Matrix) unscale(v []float32) {
	if m.pow2 == 0 {
		return
	}
	s := float32(math.Ldexp(1, -m.pow2))
	for i := range v {
		v[i] *= s
	}
}
