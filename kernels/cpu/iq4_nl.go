package cpu

import (
	"encoding/binary"
	"math"

	"oengine/ggml"
)

// IQ4_NL in the blocked kernels (tileConv): an IQ4_NL block is a Q8_0
// block whose 32 bytes are levels of iq4Values, stored as 16 bytes of
// nibbles. One-token products read the nibbles directly
// (iq4_gemv_amd64.s), and with AVX-512 VNNI the rows' whole groups of 16
// sit in Q4_0's decode layout, read by their own kernels (tileBlkLayout).

// iq4NLToQ8_0 writes nb IQ4_NL blocks of src as Q8_0 blocks in dst: the
// same scale, each nibble replaced by its level (exact: a level is an
// int8). The AVX2 twin is iq4NLToQ8_0Rows.
func iq4NLToQ8_0(dst, src []byte, nb int) {
	_ = src[18*nb-1]
	_ = dst[34*nb-1]
	for b := 0; b < nb; b++ {
		s, d := src[18*b:18*b+18], dst[34*b:34*b+34]
		d[0], d[1] = s[0], s[1]
		for j, v := range s[2:18] {
			d[2+j] = byte(iq4Values[v&15])
			d[18+j] = byte(iq4Values[v>>4])
		}
	}
}

// The IQ4_NL decode layout is Q4_0's (q4_0_decode.go): an IQ4_NL block has
// Q4_0's bytes (an F16 scale, 16 bytes of nibbles), so whole groups of 16
// rows are packed, unpacked and read the same way; the kernels
// (iq4_nl_decode_vnni_amd64.s) turn each nibble into its level.

// PackIQ4_NLDecode writes m in the IQ4_NL decode layout into dst as
// PackQ4_0Decode does for Q4_0; m and false when the layout does not apply
// (not IQ4_NL, fewer than 16 rows, or no AVX-512 VNNI kernels).
func PackIQ4_NLDecode(m Matrix, dst []byte) (Matrix, bool) {
	if m.Type != ggml.TypeIQ4_NL || !q4zActive() {
		return m, false
	}
	return packGroups(m, dst, func(dst, rows []byte, rb int) { q4zPackGroup(dst, rows, rb, m.Cols/qk) })
}

// packPanelFromIQ4Z unpacks the 16 rows of an IQ4_NL decode-layout group
// into the 16-row VNNI panel of Q8_0 (dot_blk16.go: each value as its
// level + 128), the panel packPanelZ makes of the rows converted to Q8_0.
func packPanelFromIQ4Z(panel, grp []byte, nb int) {
	tab := f16Table()
	_ = panel[nb*panelBlockZ-1]
	_ = grp[nb*q4zBlock-1]
	for b := 0; b < nb; b++ {
		dst := (*[panelBlockZ]byte)(panel[b*panelBlockZ:])
		src := (*[q4zBlock]byte)(grp[b*q4zBlock:])
		for i, v := range src[32:288] { // steps 0-3 (low nibbles) and 4-7 (high)
			dst[i] = byte(iq4Values[v&15]) + 128
			dst[256+i] = byte(iq4Values[v>>4]) + 128
		}
		for r := 0; r < 16; r++ {
			binary.LittleEndian.PutUint32(dst[512+4*r:], math.Float32bits(tab[le16(src[2*r:])]))
		}
	}
}
