package cpu

import (
	"encoding/binary"
	"math"
)

// Legacy ggml block formats, 32 elements per block. Layouts (little-endian):
//
//	Q4_0 (18 B): d f16 | qs[16]          x[j] = d*((qs[j]&15)-8), x[j+16] = d*((qs[j]>>4)-8)
//	Q4_1 (20 B): d f16 | m f16 | qs[16]  x[j] = d*(qs[j]&15)+m,   x[j+16] = d*(qs[j]>>4)+m
//	Q5_0 (22 B): d f16 | qh u32 | qs[16] 5-bit q = nibble | bit j (resp. j+16) of qh << 4; x = d*(q-16)
//	Q5_1 (24 B): d f16 | m f16 | qh u32 | qs[16]; x = d*q+m
//	Q8_0 (34 B): d f16 | qs[32] int8     x[j] = d*qs[j]
//
// The quantizers follow ggml's reference rounding (ggml-quants.c *_ref).

const qk = 32 // elements per legacy block

func dequantQ4_0(b []byte, y []float32) {
	d := F16ToF32(le16(b))
	qs := b[2:18]
	for j := 0; j < 16; j++ {
		y[j] = float32(int(qs[j]&15)-8) * d
		y[j+16] = float32(int(qs[j]>>4)-8) * d
	}
}

func dequantQ4_1(b []byte, y []float32) {
	d := F16ToF32(le16(b))
	m := F16ToF32(le16(b[2:]))
	qs := b[4:20]
	for j := 0; j < 16; j++ {
		y[j] = float32(qs[j]&15)*d + m
		y[j+16] = float32(qs[j]>>4)*d + m
	}
}

func dequantQ5_0(b []byte, y []float32) {
	d := F16ToF32(le16(b))
	qh := binary.LittleEndian.Uint32(b[2:])
	qs := b[6:22]
	for j := 0; j < 16; j++ {
		x0 := int(qs[j]&15) | int((qh>>j)<<4)&0x10
		x1 := int(qs[j]>>4) | int(qh>>(j+12))&0x10
		y[j] = float32(x0-16) * d
		y[j+16] = float32(x1-16) * d
	}
}

func dequantQ5_1(b []byte, y []float32) {
	d := F16ToF32(le16(b))
	m := F16ToF32(le16(b[2:]))
	qh := binary.LittleEndian.Uint32(b[4:])
	qs := b[8:24]
	for j := 0; j < 16; j++ {
		x0 := int(qs[j]&15) | int((qh>>j)<<4)&0x10
		x1 := int(qs[j]>>4) | int(qh>>(j+12))&0x10
		y[j] = float32(x0)*d + m
		y[j+16] = float32(x1)*d + m
	}
}

func dequantQ8_0(b []byte, y []float32) {
	d := F16ToF32(le16(b))
	for j := 0; j < qk; j++ {
		y[j] = float32(int8(b[2+j])) * d
	}
}

// absMax returns the largest |x| and the signed value that has it (the first
// one on ties), as ggml's quantizers pick it.
func absMax(x []float32) (amax, vmax float32) {
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, vmax = a, v
		}
	}
	return amax, vmax
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = x[0], x[0]
	for _, v := range x[1:] {
		lo = min(lo, v)
		hi = max(hi, v)
	}
	return lo, hi
}

func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// trunc8 converts like C's (int8_t) cast of a value known to be in range;
// out-of-range or NaN inputs are clamped to [0, hi].
func truncClamp(v float32, hi int) int {
	if !(v > 0) {
		return 0
	}
	if v >= float32(hi) {
		return hi
	}
	return int(v)
}

func quantQ4_0(x []float32, b []byte) {
	_, vmax := absMax(x)
	d := vmax / -8
	id := inv(d)
	put16(b, F32ToF16(d))
	qs := b[2:18]
	for j := 0; j < 16; j++ {
		q0 := truncClamp(x[j]*id+8.5, 15)
		q1 := truncClamp(x[j+16]*id+8.5, 15)
		qs[j] = byte(q0) | byte(q1)<<4
	}
}

func quantQ4_1(x []float32, b []byte) {
	lo, hi := minMax(x)
	d := (hi - lo) / 15
	id := inv(d)
	put16(b, F32ToF16(d))
	put16(b[2:], F32ToF16(lo))
	qs := b[4:20]
	for j := 0; j < 16; j++ {
		q0 := truncClamp((x[j]-lo)*id+0.5, 15)
		q1 := truncClamp((x[j+16]-lo)*id+0.5, 15)
		qs[j] = byte(q0) | byte(q1)<<4
	}
}

func quantQ5_0(x []float32, b []byte) {
	_, vmax := absMax(x)
	d := vmax / -16
	id := inv(d)
	put16(b, F32ToF16(d))
	var qh uint32
	qs := b[6:22]
	for j := 0; j < 16; j++ {
		q0 := truncClamp(x[j]*id+16.5, 31)
		q1 := truncClamp(x[j+16]*id+16.5, 31)
		qs[j] = byte(q0&15) | byte(q1&15)<<4
		qh |= uint32(q0>>4&1) << j
		qh |= uint32(q1>>4&1) << (j + 16)
	}
	binary.LittleEndian.PutUint32(b[2:], qh)
}

func quantQ5_1(x []float32, b []byte) {
	lo, hi := minMax(x)
	d := (hi - lo) / 31
	id := inv(d)
	put16(b, F32ToF16(d))
	put16(b[2:], F32ToF16(lo))
	var qh uint32
	qs := b[8:24]
	for j := 0; j < 16; j++ {
		q0 := truncClamp((x[j]-lo)*id+0.5, 31)
		q1 := truncClamp((x[j+16]-lo)*id+0.5, 31)
		qs[j] = byte(q0&15) | byte(q1&15)<<4
		qh |= uint32(q0>>4&1) << j
		qh |= uint32(q1>>4&1) << (j + 16)
	}
	binary.LittleEndian.PutUint32(b[4:], qh)
}

// roundAway rounds half away from zero (C's roundf).
func roundAway(v float32) int { return int(math.Round(float64(v))) }

func quantQ8_0(x []float32, b []byte) {
	amax, _ := absMax(x)
	d := amax / 127
	id := inv(d)
	put16(b, F32ToF16(d))
	for j := 0; j < qk; j++ {
		b[2+j] = byte(int8(max(-127, min(127, roundAway(x[j]*id)))))
	}
}
