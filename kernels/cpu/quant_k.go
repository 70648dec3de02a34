package cpu

import "math"

// K-quant block formats, 256 elements per super-block. Layouts (little-endian):
//
//	Q2_K (84 B):  scales[16] (lo nibble scale, hi nibble min) | qs[64] (2-bit) | d f16 | dmin f16
//	Q3_K (110 B): hmask[32] | qs[64] (2-bit low) | scales[12] (16 x 6-bit, biased by 32) | d f16
//	Q4_K (144 B): d f16 | dmin f16 | scales[12] (8 x 6-bit scale + 8 x 6-bit min) | qs[128] (nibbles)
//	Q5_K (176 B): d f16 | dmin f16 | scales[12] | qh[32] (5th bits) | qs[128]
//	Q6_K (210 B): ql[128] (low nibbles) | qh[64] (2 high bits) | scales[16] int8 | d f16
//	Q8_K (292 B): d f32 | qs[256] int8 | bsums[16] int16 (sum of each 16 qs)

const qkK = 256 // elements per K-quant super-block

// scaleMinK4 decodes the j-th (0..7) 6-bit scale and min of a Q4_K/Q5_K
// scales[12] field.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0x0f | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// scaleK3 decodes the j-th (0..15) 6-bit scale of a Q3_K scales[12] field,
// minus its bias of 32.
func scaleK3(j int, s []byte) int {
	var lo byte
	if j < 8 {
		lo = s[j] & 15
	} else {
		lo = s[j-8] >> 4
	}
	hi := (s[8+j%4] >> (2 * (j / 4))) & 3
	return int(lo|hi<<4) - 32
}

func dequantQ2_K(b []byte, y []float32) {
	scales := b[0:16]
	qs := b[16:80]
	d := F16ToF32(le16(b[80:]))
	dmin := F16ToF32(le16(b[82:]))
	is := 0
	for n := 0; n < qkK; n += 128 {
		q := qs[n/4 : n/4+32]
		for shift := uint(0); shift < 8; shift += 2 {
			for half := 0; half < 2; half++ {
				sc := scales[is]
				is++
				dl := d * float32(sc&15)
				ml := dmin * float32(sc>>4)
				for l := 0; l < 16; l++ {
					y[l] = dl*float32((q[l+16*half]>>shift)&3) - ml
				}
				y = y[16:]
			}
		}
	}
}

func dequantQ3_K(b []byte, y []float32) {
	hmask := b[0:32]
	qs := b[32:96]
	scales := b[96:108]
	d := F16ToF32(le16(b[108:]))
	is := 0
	m := byte(1)
	for n := 0; n < qkK; n += 128 {
		q := qs[n/4 : n/4+32]
		for shift := uint(0); shift < 8; shift += 2 {
			for half := 0; half < 2; half++ {
				dl := d * float32(scaleK3(is, scales))
				is++
				for l := 0; l < 16; l++ {
					v := int((q[l+16*half] >> shift) & 3)
					if hmask[l+16*half]&m == 0 {
						v -= 4
					}
					y[l] = dl * float32(v)
				}
				y = y[16:]
			}
			m <<= 1
		}
	}
}

func dequantQ4_K(b []byte, y []float32) {
	d := F16ToF32(le16(b))
	dmin := F16ToF32(le16(b[2:]))
	scales := b[4:16]
	qs := b[16:144]
	for j := 0; j < 4; j++ {
		sc1, m1 := scaleMinK4(2*j, scales)
		sc2, m2 := scaleMinK4(2*j+1, scales)
		d1, mm1 := d*float32(sc1), dmin*float32(m1)
		d2, mm2 := d*float32(sc2), dmin*float32(m2)
		q := qs[32*j : 32*j+32]
		for l := 0; l < 32; l++ {
			y[64*j+l] = d1*float32(q[l]&15) - mm1
			y[64*j+32+l] = d2*float32(q[l]>>4) - mm2
		}
	}
}

func dequantQ5_K(b []byte, y []float32) {
	d := F16ToF32(le16(b))
	dmin := F16ToF32(le16(b[2:]))
	scales := b[4:16]
	qh := b[16:48]
	qs := b[48:176]
	for j := 0; j < 4; j++ {
		sc1, m1 := scaleMinK4(2*j, scales)
		sc2, m2 := scaleMinK4(2*j+1, scales)
		d1, mm1 := d*float32(sc1), dmin*float32(m1)
		d2, mm2 := d*float32(sc2), dmin*float32(m2)
		q := qs[32*j : 32*j+32]
		u1, u2 := byte(1)<<(2*j), byte(2)<<(2*j)
		for l := 0; l < 32; l++ {
			v1, v2 := int(q[l]&15), int(q[l]>>4)
			if qh[l]&u1 != 0 {
				v1 += 16
			}
			if qh[l]&u2 != 0 {
				v2 += 16
			}
			y[64*j+l] = d1*float32(v1) - mm1
			y[64*j+32+l] = d2*float32(v2) - mm2
		}
	}
}

func dequantQ6_K(b []byte, y []float32) {
	ql := b[0:128]
	qh := b[128:192]
	sc := b[192:208]
	d := F16ToF32(le16(b[208:]))
	for n := 0; n < 2; n++ {
		l0, h0, s0, y0 := ql[64*n:], qh[32*n:], sc[8*n:], y[128*n:]
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(l0[l]&15|(h0[l]&3)<<4) - 32
			q2 := int(l0[l+32]&15|((h0[l]>>2)&3)<<4) - 32
			q3 := int(l0[l]>>4|((h0[l]>>4)&3)<<4) - 32
			q4 := int(l0[l+32]>>4|((h0[l]>>6)&3)<<4) - 32
			y0[l] = d * float32(int8(s0[is])) * float32(q1)
			y0[l+32] = d * float32(int8(s0[is+2])) * float32(q2)
			y0[l+64] = d * float32(int8(s0[is+4])) * float32(q3)
			y0[l+96] = d * float32(int8(s0[is+6])) * float32(q4)
		}
	}
}

func dequantQ8_K(b []byte, y []float32) {
	d := math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
	for j := 0; j < qkK; j++ {
		y[j] = d * float32(int8(b[4+j]))
	}
}

// quantQ8_K encodes 256 values as ggml's quantize_row_q8_K_ref: the value of
// largest magnitude maps to -127, rounding is to nearest even.
func quantQ8_K(x []float32, b []byte) {
	var qs [qkK]int8
	var bsums [16]int16
	d := q8KBlock(x, qs[:], bsums[:])
	bits := math.Float32bits(d)
	b[0], b[1], b[2], b[3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
	for j, q := range qs {
		b[4+j] = byte(q)
	}
	for j, s := range bsums {
		put16(b[260+2*j:], uint16(s))
	}
}

// q8KBlock quantizes 256 values into qs and their 16-element sums; it
// returns the scale d (x ≈ d*qs).
func q8KBlock(x []float32, qs []int8, bsums []int16) float32 {
	amax, vmax := absMax(x[:qkK])
	if amax == 0 {
		clear(qs[:qkK])
		clear(bsums[:16])
		return 0
	}
	iscale := -127 / vmax
	for j := 0; j < qkK; j++ {
		v := int(math.RoundToEven(float64(iscale * x[j])))
		qs[j] = int8(max(-127, min(127, v)))
	}
	for j := 0; j < 16; j++ {
		s := 0
		for _, q := range qs[16*j : 16*j+16] {
			s += int(q)
		}
		bsums[j] = int16(s)
	}
	return 1 / iscale
}
