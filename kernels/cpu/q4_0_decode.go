package cpu

import (
	"encoding/binary"
	"math"

	"oengine/ggml"
)

// The Q4_0 decode layout ("q4z"). Decode reads every weight once per token,
// and the 18-byte Q4_0 blocks of 16 rows cost the 16-row kernel
// (gemv16Q4_0Z) 32 16-byte loads and a dword transpose per block to bring
// row r into lane r. PackQ4_0Decode rewrites whole groups of 16 rows once,
// at load, so that block b of group g is 288 contiguous bytes:
//
//	[0, 32)               the 16 rows' F16 scales, row order
//	[32+64k, 32+64(k+1))  nibble dword k (bytes 4k..4k+3 of the block's
//	                      16 nibble bytes) of rows 0..15, k = 0..3
//
// at byte offset g·16·rb + 288·b: a group keeps the byte range of its 16
// rows, rows after the last whole group stay row-major. The same bytes, so
// the same memory traffic; the decode kernel (gemv16Q4_0P) loads one block
// of 16 rows with five loads, lane r = row r, and computes the canonical
// Q4_0 arithmetic, bitwise the row-major kernels (TestQ4Z*). Products of
// up to blkZFewMax tokens run it, or its two- to eight-token forms
// (gemv16Q4_0PT*), over each work item's rows; larger prefill tiles
// unpack a group into the 16-row VNNI panel (packPanelFromQ4Z) as they
// pack row-major rows; Row copies a row back out.

// q4zBlock is the size of one block of 16 rows in the decode layout.
const q4zBlock = 16 * 18

// Q4_0DecodeLayout reports whether PackQ4_0Decode can pack matrices of
// type t on this CPU (Q4_0, AVX-512 VNNI kernels active).
func Q4_0DecodeLayout(t ggml.Type) bool { return t == ggml.TypeQ4_0 && q4zActive() }

// PackQ4_0Decode writes m in the Q4_0 decode layout into dst (len(dst) ==
// len(m.Data); dst may be m.Data itself: each group is rewritten in place
// through a 16-row copy) and returns the matrix over dst. It returns m and
// false, writing nothing, when the layout does not apply (not Q4_0, fewer
// than 16 rows, or no AVX-512 VNNI kernels).
func PackQ4_0Decode(m Matrix, dst []byte) (Matrix, bool) {
	if !Q4_0DecodeLayout(m.Type) {
		return m, false
	}
	return packGroups(m, dst, func(dst, rows []byte, rb int) { q4zPackGroup(dst, rows, rb, m.Cols/qk) })
}

// q4zPackGroup writes 16 row-major rows (rb bytes apart, nb blocks) as one
// decode-layout group into dst.
func q4zPackGroup(dst, rows []byte, rb, nb int) {
	_ = dst[nb*q4zBlock-1]
	_ = rows[15*rb+nb*18-1]
	le := binary.LittleEndian
	for r := 0; r < 16; r++ { // each source row sequentially; the group's output stays in L1
		row := rows[r*rb : r*rb+nb*18]
		for b := 0; b < nb; b++ {
			src := (*[18]byte)(row[b*18:])
			blk := (*[q4zBlock]byte)(dst[b*q4zBlock:])
			blk[2*r], blk[2*r+1] = src[0], src[1]
			le.PutUint32(blk[32+4*r:], le.Uint32(src[2:]))
			le.PutUint32(blk[96+4*r:], le.Uint32(src[6:]))
			le.PutUint32(blk[160+4*r:], le.Uint32(src[10:]))
			le.PutUint32(blk[224+4*r:], le.Uint32(src[14:]))
		}
	}
}

// q4zUnpackRow writes row r (0..15) of a decode-layout group as a row-major
// Q4_0 row into dst (18·nb bytes).
func q4zUnpackRow(dst, grp []byte, r, nb int) {
	for b := 0; b < nb; b++ {
		blk := grp[b*q4zBlock : (b+1)*q4zBlock]
		d := dst[b*18 : b*18+18]
		d[0], d[1] = blk[2*r], blk[2*r+1]
		for k := 0; k < 4; k++ {
			copy(d[2+4*k:6+4*k], blk[32+64*k+4*r:32+64*k+4*r+4])
		}
	}
}

// packPanelFromQ4Z is packPanelZ (dot_blk16.go) for the 16 rows of a
// decode-layout group: the same panel bytes. In the decode layout step k's
// nibble dwords of the 16 rows are already contiguous, as in the panel, so
// a block is eight masked 64-byte copies and 16 scale conversions.
func packPanelFromQ4Z(panel, grp []byte, nb int) {
	tab := f16Table()
	_ = panel[nb*panelBlockZ-1]
	_ = grp[nb*q4zBlock-1]
	le := binary.LittleEndian
	const mask = 0x0f0f0f0f0f0f0f0f
	for b := 0; b < nb; b++ {
		dst := (*[panelBlockZ]byte)(panel[b*panelBlockZ:])
		src := (*[q4zBlock]byte)(grp[b*q4zBlock:])
		for i := 0; i < 256; i += 8 { // steps 0-3 (low nibbles) and 4-7 (high)
			w := le.Uint64(src[32+i:])
			le.PutUint64(dst[i:], w&mask)
			le.PutUint64(dst[256+i:], (w>>4)&mask)
		}
		for r := 0; r < 16; r++ {
			le.PutUint32(dst[512+4*r:], math.Float32bits(tab[le.Uint16(src[2*r:])]))
		}
	}
}
