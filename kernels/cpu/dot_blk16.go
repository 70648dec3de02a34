package cpu

import (
	"encoding/binary"
	"math"
)

// 16-row panels for the AVX-512 VNNI prefill kernels (dot_blk16_vnni_amd64.*).
// A block of a panel is 8 steps of 64 bytes (step s: elements 4s..4s+3 of
// rows 0..15, stored unsigned: Q4_0 as w+8 in 0..15, Q8_0 as w+128) then
// the 16 rows' scales as float32. Per (row, token) the kernels do the
// canonical arithmetic of blkDotRef, so they agree bit for bit with the
// AVX2 blocked kernels (batch invariance).

// panelBlockZ is the size of one block of a 16-row panel.
const panelBlockZ = 8*64 + 16*4

// packPanelZ packs 16 rows of bk's type (rows[r*rb:], nb blocks each) into
// panel ([nb][panelBlockZ]).
func packPanelZ(bk *blkKernel, panel, rows []byte, rb, nb int) {
	tab := f16Table()
	_ = panel[nb*panelBlockZ-1]
	le := binary.LittleEndian
	if bk.q4 {
		_ = rows[15*rb+nb*18-1]
		for b := 0; b < nb; b++ {
			dst := (*[panelBlockZ]byte)(panel[b*panelBlockZ:])
			for r := 0; r < 16; r++ {
				blk := (*[18]byte)(rows[r*rb+b*18:])
				o := 4 * r
				v0, v1 := le.Uint32(blk[2:]), le.Uint32(blk[6:])
				v2, v3 := le.Uint32(blk[10:]), le.Uint32(blk[14:])
				le.PutUint32(dst[o:], v0&0x0f0f0f0f)
				le.PutUint32(dst[o+64:], v1&0x0f0f0f0f)
				le.PutUint32(dst[o+128:], v2&0x0f0f0f0f)
				le.PutUint32(dst[o+192:], v3&0x0f0f0f0f)
				le.PutUint32(dst[o+256:], (v0>>4)&0x0f0f0f0f)
				le.PutUint32(dst[o+320:], (v1>>4)&0x0f0f0f0f)
				le.PutUint32(dst[o+384:], (v2>>4)&0x0f0f0f0f)
				le.PutUint32(dst[o+448:], (v3>>4)&0x0f0f0f0f)
				le.PutUint32(dst[512+o:], math.Float32bits(tab[uint16(blk[0])|uint16(blk[1])<<8]))
			}
		}
		return
	}
	_ = rows[15*rb+nb*34-1]
	for b := 0; b < nb; b++ {
		dst := (*[panelBlockZ]byte)(panel[b*panelBlockZ:])
		for r := 0; r < 16; r++ {
			blk := (*[34]byte)(rows[r*rb+b*34:])
			o := 4 * r
			for s := 0; s < 8; s++ {
				le.PutUint32(dst[o+64*s:], le.Uint32(blk[2+4*s:])^0x80808080)
			}
			le.PutUint32(dst[512+o:], math.Float32bits(tab[uint16(blk[0])|uint16(blk[1])<<8]))
		}
	}
}
