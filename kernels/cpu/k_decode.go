package cpu

import (
	"encoding/binary"

	"oengine/ggml"
)

// The K-quant decode layouts ("kz"; q2kz to q6kz). A K-quant
// super-block of one row (144 to 210 bytes) is too little for a 512-bit
// kernel to keep its lanes busy, and the row-major one-token kernels
// (gemvQ4_KAVX2, ...) unpack each row's scales in scalar code. Packing
// rewrites whole groups of 16 rows once, at load, so that a super-block
// of the 16 rows is one run of 16-row vectors: dword i of a field of the
// row-major super-block (bytes 4i..4i+3) of rows 0..15 becomes the 64
// bytes at the field's offset + 64i, row r at 4r; the F16 scales of the
// 16 rows are 32 bytes in row order. A group keeps the byte range of its
// 16 rows (the same bytes, so the same memory traffic, read as one
// stream); rows after the last whole group stay row-major. The kernels
// (gemv16Q2_KP to gemv16Q6_KP, gemv16Q5_KPT* and gemv16Q6_KPT*,
// k_decode_vnni_amd64.s) compute 16 rows at once, lane r = row r,
// bitwise the row-major kernels (TestKZGemv); Row copies a row back out.
//
// Q4_K (144 bytes: F16 d, F16 dmin, 12 bytes of 6-bit scales and mins,
// 128 nibble bytes), super-block b of group g at g·16·rb + 2304·b:
//
//	[0, 32)             the 16 rows' d
//	[32, 64)            their dmin
//	[64, 256)           scale dwords 0-2
//	[256, 2304)         nibble dwords 0-31 (dword 8c+k: elements 4k..4k+3
//	                    of sub-blocks 2c and 2c+1)
//
// Q5_K (176 bytes: Q4_K's fields and 32 bytes qh of fifth bits before the
// nibbles), at 2816·b:
//
//	[0, 256)            as Q4_K
//	[256, 768)          qh dwords 0-7
//	[768, 2816)         nibble dwords 0-31
//
// Q2_K (84 bytes: 16 bytes of 4-bit scales and mins, 64 bytes qs of
// two-bit values, F16 d, F16 dmin), at 1344·b:
//
//	[0, 32)             the 16 rows' d
//	[32, 64)            their dmin
//	[64, 320)           scale dwords 0-3
//	[320, 1344)         qs dwords 0-15
//
// Q3_K (110 bytes: 32 bytes hmask of third bits, 64 bytes qs of two-bit
// values, 12 bytes of sixteen 6-bit scales, F16 d), at 1728·b, its d after
// the group's data as Q6_K's:
//
//	[0, 192)            scale dwords 0-2
//	[192, 704)          hmask dwords 0-7
//	[704, 1728)         qs dwords 0-15
//	[1728nb+32b, +32)   the 16 rows' d
//
// Q6_K (210 bytes: 128 bytes ql of low nibbles, 64 bytes qh of high bit
// pairs, 16 int8 scales, F16 d), at 3328·b, the d of the group's
// super-blocks after its data so that every super-block starts on a
// 64-byte line when the group does (3328 = 52·64):
//
//	[0, 256)            scale dwords 0-3
//	[256, 2304)         ql dwords 0-31
//	[2304, 3328)        qh dwords 0-15
//	[3328nb+32b, +32)   the 16 rows' d (nb super-blocks a row)

// kzLayout describes one type's decode layout.
type kzLayout struct {
	bb    int     // bytes of a row's super-block
	blk   int     // bytes of the 16 rows' super-block in the group's data
	segs  []kzSeg // the dword fields
	halfs []kzSeg // the F16 fields (n = 1; dst < 0: after the group's data)
}

// kzSeg is a field of n dwords at byte src of a row's super-block, at dst
// of the 16 rows' (F16 fields: at dst, 2 bytes a row).
type kzSeg struct{ src, dst, n int }

// kzLayouts are the K-quant decode layouts by type.
var kzLayouts = map[ggml.Type]*kzLayout{
	ggml.TypeQ2_K: {bb: 84, blk: 1344, segs: []kzSeg{{0, 64, 4}, {16, 320, 16}}, halfs: []kzSeg{{80, 0, 1}, {82, 32, 1}}},
	ggml.TypeQ3_K: {bb: 110, blk: 1728, segs: []kzSeg{{96, 0, 3}, {0, 192, 8}, {32, 704, 16}}, halfs: []kzSeg{{108, -1, 1}}},
	ggml.TypeQ4_K: {bb: 144, blk: 2304, segs: []kzSeg{{4, 64, 3}, {16, 256, 32}}, halfs: []kzSeg{{0, 0, 1}, {2, 32, 1}}},
	ggml.TypeQ5_K: {bb: 176, blk: 2816, segs: []kzSeg{{4, 64, 3}, {16, 256, 8}, {48, 768, 32}}, halfs: []kzSeg{{0, 0, 1}, {2, 32, 1}}},
	ggml.TypeQ6_K: {bb: 210, blk: 3328, segs: []kzSeg{{192, 0, 4}, {0, 256, 32}, {128, 2304, 16}}, halfs: []kzSeg{{208, -1, 1}}},
}

// PackKDecode is PackQ4_0Decode for Q2_K to Q6_K matrices (the layouts
// above).
func PackKDecode(m Matrix, dst []byte) (Matrix, bool) {
	l, ok := kzLayouts[m.Type]
	if !ok || !kzActive() {
		return m, false
	}
	return packGroups(m, dst, func(dst, rows []byte, rb int) { l.packGroup(dst, rows, rb, m.Cols/qkK) })
}

// packGroup writes 16 row-major rows (rb bytes apart, nb super-blocks) as
// one decode-layout group into dst.
func (l *kzLayout) packGroup(dst, rows []byte, rb, nb int) {
	_ = dst[nb*16*l.bb-1]
	_ = rows[15*rb+nb*l.bb-1]
	le := binary.LittleEndian
	tail := dst[nb*l.blk:]
	for r := 0; r < 16; r++ {
		for b := 0; b < nb; b++ {
			src := rows[r*rb+b*l.bb : r*rb+(b+1)*l.bb]
			blk := dst[b*l.blk : (b+1)*l.blk]
			for _, s := range l.segs {
				for i := 0; i < s.n; i++ {
					le.PutUint32(blk[s.dst+64*i+4*r:], le.Uint32(src[s.src+4*i:]))
				}
			}
			for _, h := range l.halfs {
				at := kzHalf(h, blk, tail, b, r)
				at[0], at[1] = src[h.src], src[h.src+1]
			}
		}
	}
}

// unpackRow writes row r (0..15) of a decode-layout group as a row-major
// row into dst (bb·nb bytes).
func (l *kzLayout) unpackRow(dst, grp []byte, r, nb int) {
	tail := grp[nb*l.blk:]
	for b := 0; b < nb; b++ {
		blk := grp[b*l.blk : (b+1)*l.blk]
		d := dst[b*l.bb : (b+1)*l.bb]
		for _, s := range l.segs {
			for i := 0; i < s.n; i++ {
				copy(d[s.src+4*i:s.src+4*i+4], blk[s.dst+64*i+4*r:])
			}
		}
		for _, h := range l.halfs {
			at := kzHalf(h, blk, tail, b, r)
			d[h.src], d[h.src+1] = at[0], at[1]
		}
	}
}

// half returns row r's place of the F16 field h of super-block b: in the
// super-block's data blk, or in tail, the group's bytes after its data.
func kzHalf(h kzSeg, blk, tail []byte, b, r int) []byte {
	if h.dst < 0 {
		return tail[32*b+2*r:]
	}
	return blk[h.dst+2*r:]
}
