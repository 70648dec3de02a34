package cpu

import (
	"math"
	"sync"
)

// IEEE 754 binary16 (F16) and bfloat16 (BF16) conversions. Widening is exact;
// narrowing rounds to nearest, ties to even, as ggml's converters do.

// F16ToF32 returns the float32 value of the binary16 bit pattern h (exact;
// subnormals, infinities and NaN payloads are preserved).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: mant * 2^-24, exactly representable in float32.
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// F32ToF16 rounds f to the nearest binary16 value (ties to even). Values
// beyond the F16 range become ±Inf; NaN stays NaN (quiet).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Result is subnormal (or rounds up to the smallest normal):
		// value = full * 2^(e-38), F16 units are 2^-24.
		if e < -10 {
			return sign
		}
		full := mant | 0x800000
		shift := uint(14 - e)
		r := full >> shift
		rem := full & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // a carry into the exponent is correct, up to Inf
	}
	return sign | uint16(r)
}

// BF16ToF32 returns the float32 value of the bfloat16 bit pattern b (exact).
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds f to the nearest bfloat16 value (ties to even); NaN stays
// NaN (quiet).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

var (
	f16LutOnce sync.Once
	f16Lut     *[1 << 16]float32
)

// f16Table maps every F16 bit pattern to float32 (256 KiB, built on first
// use); the portable kernels use it instead of F16ToF32's branches.
func f16Table() *[1 << 16]float32 {
	f16LutOnce.Do(func() {
		t := new([1 << 16]float32)
		for i := range t {
			t[i] = F16ToF32(uint16(i))
		}
		f16Lut = t
	})
	return f16Lut
}

// fp16Round returns f rounded through F16 (the precision of ggml's block
// scales).
func fp16Round(f float32) float32 { return F16ToF32(F32ToF16(f)) }

// le16 reads a little-endian uint16 at b[0:2].
func le16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }

// put16 writes v little-endian at b[0:2].
func put16(b []byte, v uint16) { b[0] = byte(v); b[1] = byte(v >> 8) }
