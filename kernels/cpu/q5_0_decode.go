package cpu

import (
	"encoding/binary"
	"math"

	"oengine/ggml"
)

// The Q5_0 decode layout ("q5z"). A Q5_0 block (22 bytes) is the F16
// scale d, 32 fifth bits qh (bit j for element j) and 16 nibble bytes qs
// (low nibbles elements 0-15, high nibbles 16-31); element j is
// ((nibble) | (qh bit j) << 4) − 16. Before this layout Q5_0 had no
// many-row kernel: one AVX2 dot per row read its weights at about a
// quarter of the memory bandwidth. PackQ5_0Decode rewrites whole groups
// of 16 rows once, at load, so that block b of group g is 352 contiguous
// bytes:
//
//	[0, 32)               the 16 rows' F16 scales, row order
//	[32+8v, 40+8v)        the fifth bits of value vector v (v = 0..7) as
//	                      a byte mask: bit 4r+j is row r's bit for element
//	                      4v+j (v < 4) or 16+4(v−4)+j (v ≥ 4)
//	[96+64k, 96+64(k+1))  nibble dword k (qs bytes 4k..4k+3) of rows
//	                      0..15, k = 0..3
//
// at byte offset g·16·rb + 352·b. Value vector k (k < 4) is the low
// nibbles of dword k, vector 4+k its high nibbles, lane r = row r; the
// kernels (gemv16Q5_0P, gemv16Q5_0PT2..8) load each vector's mask
// straight into an opmask register and add 16 to the bytes it selects.
// Then they compute the blocked kernels' arithmetic (blkDotRef), as
// Q5_0's row-major rows do through their conversion to Q8_0 (q5_0_conv.go,
// tileConv), so every result is the bits of the rows converted to Q8_0
// (TestQ4ZGemv). Larger prefill tiles unpack a group into the 16-row VNNI
// panel of Q8_0 (packPanelFromQ5Z), as tileBlkLayout does for Q4_0.

// q5zBlock is the size of one block of 16 rows in the Q5_0 decode layout.
const q5zBlock = 16 * 22

// The Q5_1 decode layout ("q51z") is the same with the rows' F16 mins m
// after their scales (a value is d·u + m, u = 0..31, no −16): block b of
// a group is 384 bytes, the scales at 0, the mins at 32, the fifth-bit
// masks at 64, nibble dword k at 128+64k. Its kernels (gemv16Q5_1P,
// gemv16Q5_1PT2) compute dotQ5_1AVX2's arithmetic: lane k of a row is
// the exact sum over elements 4k..4k+3 of u·a, converted and accumulated
// by one FMA with d·dy per block, the eight lanes summed as HSUM8 at the
// end, plus Σ m·s; lane k of the row-major kernel is vector k here and
// row r is lane r, so every result is the AVX2 kernel's bits
// (TestQ5ZGemv).
const q51zBlock = 16 * 24

// PackQ5_0Decode writes m in the Q5_0 decode layout into dst, as
// PackQ4_0Decode does for Q4_0: m and false when the layout does not
// apply (not Q5_0, fewer than 16 rows, or no AVX-512 VNNI kernels).
func PackQ5_0Decode(m Matrix, dst []byte) (Matrix, bool) {
	if m.Type != ggml.TypeQ5_0 || !q4zActive() {
		return m, false
	}
	return packGroups(m, dst, func(dst, rows []byte, rb int) { q5zPackGroup(dst, rows, rb, m.Cols/qk, false) })
}

// PackQ5_1Decode is PackQ5_0Decode for Q5_1 matrices.
func PackQ5_1Decode(m Matrix, dst []byte) (Matrix, bool) {
	if m.Type != ggml.TypeQ5_1 || !q4zActive() {
		return m, false
	}
	return packGroups(m, dst, func(dst, rows []byte, rb int) { q5zPackGroup(dst, rows, rb, m.Cols/qk, true) })
}

// q5zShape is where a row-major block (bb bytes) keeps its fifth bits and
// nibbles, and where a layout block (blk bytes) keeps them: Q5_0, or Q5_1
// (q51: a min after the scale in both).
func q5zShape(q51 bool) (bb, qh, qs, blk, lqh, lqs int) {
	if q51 {
		return 24, 4, 8, q51zBlock, 64, 128
	}
	return 22, 2, 6, q5zBlock, 32, 96
}

// q5zElem is the element of a block whose fifth bit is bit j (0..3) of
// row r's nibble in value vector v (0..7): low nibbles of dword v, then
// high nibbles of dword v−4.
func q5zElem(v, j int) int {
	if v < 4 {
		return 4*v + j
	}
	return 16 + 4*(v-4) + j
}

// q5zPackGroup writes 16 row-major Q5_0 (or, q51, Q5_1) rows (rb bytes
// apart, nb blocks) as one decode-layout group into dst.
func q5zPackGroup(dst, rows []byte, rb, nb int, q51 bool) {
	bb, qh, qs, blkSize, lqh, lqs := q5zShape(q51)
	_ = dst[nb*blkSize-1]
	_ = rows[15*rb+nb*bb-1]
	le := binary.LittleEndian
	for b := 0; b < nb; b++ {
		blk := dst[b*blkSize : (b+1)*blkSize]
		var masks [8]uint64
		for r := 0; r < 16; r++ {
			src := rows[r*rb+b*bb : r*rb+(b+1)*bb]
			blk[2*r], blk[2*r+1] = src[0], src[1]
			if q51 {
				blk[32+2*r], blk[33+2*r] = src[2], src[3]
			}
			bits := le.Uint32(src[qh:])
			for v := range masks {
				for j := 0; j < 4; j++ {
					masks[v] |= uint64(bits>>q5zElem(v, j)&1) << (4*r + j)
				}
			}
			for k := 0; k < 4; k++ {
				le.PutUint32(blk[lqs+64*k+4*r:], le.Uint32(src[qs+4*k:]))
			}
		}
		for v, m := range masks {
			le.PutUint64(blk[lqh+8*v:], m)
		}
	}
}

// q5zUnpackRow writes row r (0..15) of a Q5_0 (or, q51, Q5_1)
// decode-layout group as a row-major row into dst (nb blocks).
func q5zUnpackRow(dst, grp []byte, r, nb int, q51 bool) {
	bb, qh, qs, blkSize, lqh, lqs := q5zShape(q51)
	le := binary.LittleEndian
	for b := 0; b < nb; b++ {
		blk := grp[b*blkSize : (b+1)*blkSize]
		d := dst[b*bb : (b+1)*bb]
		d[0], d[1] = blk[2*r], blk[2*r+1]
		if q51 {
			d[2], d[3] = blk[32+2*r], blk[33+2*r]
		}
		var bits uint32
		for v := 0; v < 8; v++ {
			m := le.Uint64(blk[lqh+8*v:])
			for j := 0; j < 4; j++ {
				bits |= uint32(m>>(4*r+j)&1) << q5zElem(v, j)
			}
		}
		le.PutUint32(d[qh:], bits)
		for k := 0; k < 4; k++ {
			copy(d[qs+4*k:qs+4*k+4], blk[lqs+64*k+4*r:lqs+64*k+4*r+4])
		}
	}
}

// packPanelFromQ5Z unpacks the 16 rows of a Q5_0 decode-layout group into
// the 16-row VNNI panel of Q8_0 (dot_blk16.go: each value w as w + 128),
// the panel packPanelZ makes of the rows converted to Q8_0. Panel step v
// is value vector v of the layout: byte i of it (row i/4, element
// q5zElem(v, i%4)) is the nibble plus 16 where mask v has bit i.
func packPanelFromQ5Z(panel, grp []byte, nb int) {
	tab := f16Table()
	_ = panel[nb*panelBlockZ-1]
	_ = grp[nb*q5zBlock-1]
	le := binary.LittleEndian
	for b := 0; b < nb; b++ {
		dst := (*[panelBlockZ]byte)(panel[b*panelBlockZ:])
		src := (*[q5zBlock]byte)(grp[b*q5zBlock:])
		for v := 0; v < 8; v++ {
			mask := le.Uint64(src[32+8*v:])
			k, shift := v%4, 4*(v/4) // low nibbles of dword k, then high
			for i := 0; i < 64; i++ {
				u := src[96+64*k+i] >> shift & 15
				u |= byte(mask>>i&1) << 4
				dst[64*v+i] = u + 112 // (u − 16) + 128
			}
		}
		for r := 0; r < 16; r++ {
			le.PutUint32(dst[512+4*r:], math.Float32bits(tab[le.Uint16(src[2*r:])]))
		}
	}
}
