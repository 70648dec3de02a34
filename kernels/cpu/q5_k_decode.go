package cpu

import (
	"encoding/binary"

	"oengine/ggml"
)

// The Q5_K decode layout ("q5kz"), the Q4_K one (q4_k_decode.go) with
// Q5_K's fifth bits: a super-block (176 bytes: F16 d, F16 dmin, 12 bytes
// of scales and mins, 32 bytes qh of fifth bits, 128 nibble bytes) of 16
// rows becomes 2816 contiguous bytes,
//
//	[0, 32)                 the 16 rows' F16 d, row order
//	[32, 64)                their F16 dmin
//	[64+64i, 128+64i)       scale dword i of rows 0..15, i = 0..2
//	[256+64k, 320+64k)      qh dword k (bytes 4k..4k+3) of rows 0..15,
//	                        k = 0..7
//	[768+512c+64k, +64)     nibble dword k of chunk c of rows 0..15
//
// at byte offset g·16·rb + 2816·b of group g. The decode kernel
// (gemv16Q5_KP, k_decode_vnni_amd64.s) is bitwise the row-major one-row
// kernel (TestKZGemv).

// q5kzBlock is the size of one super-block of 16 rows in the decode layout.
const q5kzBlock = 16 * 176

// PackQ5_KDecode is PackQ4_KDecode for Q5_K matrices (the layout above).
func PackQ5_KDecode(m Matrix, dst []byte) (Matrix, bool) {
	if m.Type != ggml.TypeQ5_K {
		return m, false
	}
	return packKZ(m, dst, q5kzPackGroup)
}

// q5kzPackGroup writes 16 row-major Q5_K rows (rb bytes apart, nb
// super-blocks) as one decode-layout group into dst.
func q5kzPackGroup(dst, rows []byte, rb, nb int) {
	_ = dst[nb*q5kzBlock-1]
	_ = rows[15*rb+nb*176-1]
	le := binary.LittleEndian
	for r := 0; r < 16; r++ {
		row := rows[r*rb : r*rb+nb*176]
		for b := 0; b < nb; b++ {
			src := (*[176]byte)(row[b*176:])
			blk := (*[q5kzBlock]byte)(dst[b*q5kzBlock:])
			blk[2*r], blk[2*r+1] = src[0], src[1]
			blk[32+2*r], blk[33+2*r] = src[2], src[3]
			for i := 0; i < 3; i++ {
				le.PutUint32(blk[64+64*i+4*r:], le.Uint32(src[4+4*i:]))
			}
			for k := 0; k < 8; k++ {
				le.PutUint32(blk[256+64*k+4*r:], le.Uint32(src[16+4*k:]))
			}
			for c := 0; c < 4; c++ {
				for k := 0; k < 8; k++ {
					le.PutUint32(blk[768+512*c+64*k+4*r:], le.Uint32(src[48+32*c+4*k:]))
				}
			}
		}
	}
}

// q5kzUnpackRow writes row r (0..15) of a decode-layout group as a
// row-major Q5_K row into dst (176·nb bytes).
func q5kzUnpackRow(dst, grp []byte, r, nb int) {
	for b := 0; b < nb; b++ {
		blk := grp[b*q5kzBlock : (b+1)*q5kzBlock]
		d := dst[b*176 : b*176+176]
		d[0], d[1] = blk[2*r], blk[2*r+1]
		d[2], d[3] = blk[32+2*r], blk[33+2*r]
		for i := 0; i < 3; i++ {
			copy(d[4+4*i:8+4*i], blk[64+64*i+4*r:])
		}
		for k := 0; k < 8; k++ {
			copy(d[16+4*k:20+4*k], blk[256+64*k+4*r:])
		}
		for c := 0; c < 4; c++ {
			for k := 0; k < 8; k++ {
				copy(d[48+32*c+4*k:52+32*c+4*k], blk[768+512*c+64*k+4*r:])
			}
		}
	}
}
