package cpu

import (
	"encoding/binary"
	"math"
)

// Portable dot kernels: one encoded weight row against one token's
// (quantized) activations. Integer products are summed exactly per block;
// block results are accumulated in float32 in block order. These are the
// twins of the assembly kernels and the fallback where no SIMD is present.

// dotF32Go: x ([cols] float32) against an F32 row.
func dotF32RowGo(row []byte, a actView) float32 {
	x := a.x
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		r := row[4*i : 4*i+16]
		s0 += f32le(r[0:]) * x[i]
		s1 += f32le(r[4:]) * x[i+1]
		s2 += f32le(r[8:]) * x[i+2]
		s3 += f32le(r[12:]) * x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += f32le(row[4*i:]) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF16RowGo(row []byte, a actView) float32 {
	tab := f16Table()
	x := a.x
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		r := row[2*i : 2*i+8]
		s0 += tab[le16(r[0:])] * x[i]
		s1 += tab[le16(r[2:])] * x[i+1]
		s2 += tab[le16(r[4:])] * x[i+2]
		s3 += tab[le16(r[6:])] * x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += tab[le16(row[2*i:])] * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotBF16RowGo(row []byte, a actView) float32 {
	x := a.x
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		r := row[2*i : 2*i+8]
		s0 += BF16ToF32(le16(r[0:])) * x[i]
		s1 += BF16ToF32(le16(r[2:])) * x[i+1]
		s2 += BF16ToF32(le16(r[4:])) * x[i+2]
		s3 += BF16ToF32(le16(r[6:])) * x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += BF16ToF32(le16(row[2*i:])) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func f32le(b []byte) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b))
}

// dot32Nib returns Σ (nibble-8 or nibble)·q over one 32-element block
// whose low nibbles hold elements 0..15 and high nibbles 16..31; off is
// subtracted from each nibble.
func dot32Nib(qs []byte, q []int8, off int32) int32 {
	var s int32
	q = q[:32]
	for j, v := range qs[:16] {
		s += (int32(v&15)-off)*int32(q[j]) + (int32(v>>4)-off)*int32(q[j+16])
	}
	return s
}

func dotQ4_0Go(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[18*b : 18*b+18]
		si := dot32Nib(blk[2:], a.qs[32*b:], 8)
		sum += float32(si) * (tab[le16(blk)] * dy)
	}
	return sum
}

func dotQ4_1Go(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[20*b : 20*b+20]
		si := dot32Nib(blk[4:], a.qs[32*b:], 0)
		sum += float32(si)*(tab[le16(blk)]*dy) + tab[le16(blk[2:])]*a.s[b]
	}
	return sum
}

// dot32Q5 is Σ q5·q8 over one Q5 block (5-bit values minus off).
func dot32Q5(qs []byte, qh uint32, q []int8, off int32) int32 {
	var s int32
	q = q[:32]
	for j, v := range qs[:16] {
		x0 := int32(v&15) | int32((qh>>j)<<4)&0x10
		x1 := int32(v>>4) | int32(qh>>(j+12))&0x10
		s += (x0-off)*int32(q[j]) + (x1-off)*int32(q[j+16])
	}
	return s
}

func dotQ5_0Go(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[22*b : 22*b+22]
		si := dot32Q5(blk[6:], binary.LittleEndian.Uint32(blk[2:]), a.qs[32*b:], 16)
		sum += float32(si) * (tab[le16(blk)] * dy)
	}
	return sum
}

func dotQ5_1Go(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[24*b : 24*b+24]
		si := dot32Q5(blk[8:], binary.LittleEndian.Uint32(blk[4:]), a.qs[32*b:], 0)
		sum += float32(si)*(tab[le16(blk)]*dy) + tab[le16(blk[2:])]*a.s[b]
	}
	return sum
}

func dotQ8_0Go(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[34*b : 34*b+34]
		q := a.qs[32*b : 32*b+32]
		w := blk[2:34]
		var si int32
		for j := range q {
			si += int32(int8(w[j])) * int32(q[j])
		}
		sum += float32(si) * (tab[le16(blk)] * dy)
	}
	return sum
}
