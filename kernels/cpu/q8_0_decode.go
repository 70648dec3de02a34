package cpu

import (
	"encoding/binary"
	"math"

	"oengine/ggml"
)

// The Q8_0 decode layout ("q8z"), Q4_0's (q4_0_decode.go) for 34-byte
// blocks. PackQ8_0Decode rewrites whole groups of 16 rows once, at load,
// so that block b of group g is 544 contiguous bytes:
//
//	[0, 32)               the 16 rows' F16 scales, row order
//	[32+64k, 32+64(k+1))  dword k (elements 4k..4k+3) of rows 0..15,
//	                      k = 0..7, each byte stored unsigned as w+128
//	                      (w XOR 0x80)
//
// at byte offset g·16·rb + 544·b. Bytes 32..543 of a block are the
// 16-row VNNI panel's steps (dot_blk16.go) already, so a prefill tile
// unpacks a group by a copy and 16 scale conversions (packPanelFromQ8Z).
// The kernels (gemv16Q8_0P, gemv16Q8_0PT2-8) load a block of 16 rows
// once for one to eight tokens; per token VPDPBUSD of the unsigned bytes
// against the broadcast activation dwords gives Σ (w+128)·q, and
// subtracting 128·Σq = 16·s8 leaves the exact block sum, then the
// canonical arithmetic of blkDotRef, bitwise the row-major kernels
// (TestQ8Z*).

// q8zBlock is the size of one block of 16 rows in the decode layout.
const q8zBlock = 16 * 34

// PackQ8_0Decode writes m in the Q8_0 decode layout into dst, as
// PackQ4_0Decode does for Q4_0: m and false when the layout does not
// apply (not Q8_0, fewer than 16 rows, or no AVX-512 VNNI kernels).
func PackQ8_0Decode(m Matrix, dst []byte) (Matrix, bool) {
	if m.Type != ggml.TypeQ8_0 || !q4zActive() {
		return m, false
	}
	return packGroups(m, dst, func(dst, rows []byte, rb int) { q8zPackGroup(dst, rows, rb, m.Cols/qk) })
}

// q8zPackGroup writes 16 row-major rows (rb bytes apart, nb blocks) as one
// decode-layout group into dst.
func q8zPackGroup(dst, rows []byte, rb, nb int) {
	_ = dst[nb*q8zBlock-1]
	_ = rows[15*rb+nb*34-1]
	le := binary.LittleEndian
	for r := 0; r < 16; r++ { // each source row sequentially; the group's output stays in L1
		row := rows[r*rb : r*rb+nb*34]
		for b := 0; b < nb; b++ {
			src := (*[34]byte)(row[b*34:])
			blk := (*[q8zBlock]byte)(dst[b*q8zBlock:])
			blk[2*r], blk[2*r+1] = src[0], src[1]
			for k := 0; k < 8; k++ {
				le.PutUint32(blk[32+64*k+4*r:], le.Uint32(src[2+4*k:])^0x80808080)
			}
		}
	}
}

// q8zUnpackRow writes row r (0..15) of a decode-layout group as a row-major
// Q8_0 row into dst (34·nb bytes).
func q8zUnpackRow(dst, grp []byte, r, nb int) {
	le := binary.LittleEndian
	for b := 0; b < nb; b++ {
		blk := grp[b*q8zBlock : (b+1)*q8zBlock]
		d := dst[b*34 : b*34+34]
		d[0], d[1] = blk[2*r], blk[2*r+1]
		for k := 0; k < 8; k++ {
			le.PutUint32(d[2+4*k:], le.Uint32(blk[32+64*k+4*r:])^0x80808080)
		}
	}
}

// packPanelFromQ8Z is packPanelZ (dot_blk16.go) for the 16 rows of a
// decode-layout group: the same panel bytes, the block's steps copied and
// its scales widened to float32.
func packPanelFromQ8Z(panel, grp []byte, nb int) {
	tab := f16Table()
	_ = panel[nb*panelBlockZ-1]
	_ = grp[nb*q8zBlock-1]
	le := binary.LittleEndian
	for b := 0; b < nb; b++ {
		dst := (*[panelBlockZ]byte)(panel[b*panelBlockZ:])
		src := (*[q8zBlock]byte)(grp[b*q8zBlock:])
		copy(dst[:512], src[32:])
		for r := 0; r < 16; r++ {
			le.PutUint32(dst[512+4*r:], math.Float32bits(tab[le.Uint16(src[2*r:])]))
		}
	}
}
