package cpu

import (
	"encoding/binary"

	"oengine/ggml"
)

// The Q6_K decode layout ("q6kz"), the Q4_K one's twin (q4_k_decode.go)
// for Q6_K (210-byte super-blocks: 128 bytes of low nibbles ql, 64 of
// high bit pairs qh, 16 int8 scales, F16 d). PackQ6_KDecode rewrites whole
// groups of 16 rows once, at load; the 16·210·nb bytes of group g, at
// g·16·rb, become
//
//	[3328b, 3328(b+1))      super-block b's scales, ql and qh, as 16-row
//	                        dword vectors (below)
//	[3328nb+32b, +32)       super-block b's 16 F16 d, row order
//
// and inside super-block b's 3328 bytes
//
//	[64i, 64(i+1))          scale dword i (scales 4i..4i+3) of rows
//	                        0..15, i = 0..3
//	[256+64m, 256+64(m+1))  ql dword m (bytes 4m..4m+3) of rows 0..15,
//	                        m = 0..31
//	[2304+64m, +64)         qh dword m of rows 0..15, m = 0..15
//
// so that the data of a super-block starts on a 64-byte line when the
// group does (3328 = 52·64; the d, 32 bytes a super-block, would break
// that between them). Rows after the last whole group stay row-major.
// The decode kernel (gemv16Q6_KP, k_decode_vnni_amd64.s) computes 16
// rows at once, bitwise the row-major kernels (TestQ6KZGemv).

// q6kzData is the size of one super-block's scales, ql and qh for 16 rows.
const q6kzData = 16 * 208

// PackQ6_KDecode is PackQ4_KDecode for Q6_K matrices (the layout above).
func PackQ6_KDecode(m Matrix, dst []byte) (Matrix, bool) {
	if m.Type != ggml.TypeQ6_K {
		return m, false
	}
	return packKZ(m, dst, q6kzPackGroup)
}

// q6kzPackGroup writes 16 row-major Q6_K rows (rb bytes apart, nb
// super-blocks) as one decode-layout group into dst.
func q6kzPackGroup(dst, rows []byte, rb, nb int) {
	_ = dst[nb*16*210-1]
	_ = rows[15*rb+nb*210-1]
	le := binary.LittleEndian
	ds := dst[nb*q6kzData:]
	for r := 0; r < 16; r++ {
		row := rows[r*rb : r*rb+nb*210]
		for b := 0; b < nb; b++ {
			src := (*[210]byte)(row[b*210:])
			blk := (*[q6kzData]byte)(dst[b*q6kzData:])
			for i := 0; i < 4; i++ {
				le.PutUint32(blk[64*i+4*r:], le.Uint32(src[192+4*i:]))
			}
			for m := 0; m < 32; m++ {
				le.PutUint32(blk[256+64*m+4*r:], le.Uint32(src[4*m:]))
			}
			for m := 0; m < 16; m++ {
				le.PutUint32(blk[2304+64*m+4*r:], le.Uint32(src[128+4*m:]))
			}
			ds[32*b+2*r], ds[32*b+2*r+1] = src[208], src[209]
		}
	}
}

// q6kzUnpackRow writes row r (0..15) of a decode-layout group as a
// row-major Q6_K row into dst (210·nb bytes).
func q6kzUnpackRow(dst, grp []byte, r, nb int) {
	ds := grp[nb*q6kzData:]
	for b := 0; b < nb; b++ {
		blk := grp[b*q6kzData : (b+1)*q6kzData]
		d := dst[b*210 : b*210+210]
		for i := 0; i < 4; i++ {
			copy(d[192+4*i:196+4*i], blk[64*i+4*r:])
		}
		for m := 0; m < 32; m++ {
			copy(d[4*m:4*m+4], blk[256+64*m+4*r:])
		}
		for m := 0; m < 16; m++ {
			copy(d[128+4*m:132+4*m], blk[2304+64*m+4*r:])
		}
		d[208], d[209] = ds[32*b+2*r], ds[32*b+2*r+1]
	}
}
