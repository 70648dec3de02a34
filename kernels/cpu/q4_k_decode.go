package cpu

import (
	"encoding/binary"

	"oengine/ggml"
)

// The Q4_K decode layout ("q4kz"). A Q4_K super-block (144 bytes: F16 d,
// F16 dmin, 12 bytes of 6-bit scales and mins, 128 nibble bytes) of one
// row is too little for a 512-bit kernel to keep its lanes busy, and the
// row-major one-token kernel (gemvQ4_KAVX2) unpacks each row's scales in
// scalar code. PackQ4_KDecode rewrites whole groups of 16 rows once, at
// load, so that super-block b of group g is 2304 contiguous bytes:
//
//	[0, 32)                 the 16 rows' F16 d, row order
//	[32, 64)                their F16 dmin
//	[64+64i, 128+64i)       scale dword i (bytes 4i..4i+3 of the 12) of
//	                        rows 0..15, i = 0..2
//	[256+512c+64k, +64)     nibble dword k (bytes 4k..4k+3 of the 32-byte
//	                        chunk c: elements 4k..4k+3 of sub-blocks 2c
//	                        and 2c+1) of rows 0..15, c = 0..3, k = 0..7
//
// at byte offset g·16·rb + 2304·b: a group keeps the byte range of its 16
// rows, rows after the last whole group stay row-major. The same bytes, so
// the same memory traffic, read as one stream. The decode kernel
// (gemv16Q4_KP, k_decode_vnni_amd64.s) computes 16 rows at once, lane r
// = row r, bitwise the row-major kernels (TestQ4KZGemv); Row copies a row
// back out.

// q4kzBlock is the size of one super-block of 16 rows in the decode layout.
const q4kzBlock = 16 * 144

// PackQ4_KDecode is PackQ4_0Decode for Q4_K matrices (the Q4_K decode
// layout above): it writes m into dst (which may be m.Data) and returns
// the matrix over dst, or m and false, writing nothing, when the layout
// does not apply (not Q4_K, fewer than 16 rows, already packed, or no
// AVX-512 VNNI kernels).
func PackQ4_KDecode(m Matrix, dst []byte) (Matrix, bool) {
	if m.Type != ggml.TypeQ4_K {
		return m, false
	}
	return packKZ(m, dst, q4kzPackGroup)
}

// q4kzPackGroup writes 16 row-major Q4_K rows (rb bytes apart, nb
// super-blocks) as one decode-layout group into dst.
func q4kzPackGroup(dst, rows []byte, rb, nb int) {
	_ = dst[nb*q4kzBlock-1]
	_ = rows[15*rb+nb*144-1]
	le := binary.LittleEndian
	for r := 0; r < 16; r++ {
		row := rows[r*rb : r*rb+nb*144]
		for b := 0; b < nb; b++ {
			src := (*[144]byte)(row[b*144:])
			blk := (*[q4kzBlock]byte)(dst[b*q4kzBlock:])
			blk[2*r], blk[2*r+1] = src[0], src[1]
			blk[32+2*r], blk[33+2*r] = src[2], src[3]
			for i := 0; i < 3; i++ {
				le.PutUint32(blk[64+64*i+4*r:], le.Uint32(src[4+4*i:]))
			}
			for c := 0; c < 4; c++ {
				for k := 0; k < 8; k++ {
					le.PutUint32(blk[256+512*c+64*k+4*r:], le.Uint32(src[16+32*c+4*k:]))
				}
			}
		}
	}
}

// q4kzUnpackRow writes row r (0..15) of a decode-layout group as a
// row-major Q4_K row into dst (144·nb bytes).
func q4kzUnpackRow(dst, grp []byte, r, nb int) {
	for b := 0; b < nb; b++ {
		blk := grp[b*q4kzBlock : (b+1)*q4kzBlock]
		d := dst[b*144 : b*144+144]
		d[0], d[1] = blk[2*r], blk[2*r+1]
		d[2], d[3] = blk[32+2*r], blk[33+2*r]
		for i := 0; i < 3; i++ {
			copy(d[4+4*i:8+4*i], blk[64+64*i+4*r:])
		}
		for c := 0; c < 4; c++ {
			for k := 0; k < 8; k++ {
				copy(d[16+32*c+4*k:20+32*c+4*k], blk[256+512*c+64*k+4*r:])
			}
		}
	}
}
