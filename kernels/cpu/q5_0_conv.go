package cpu

import "encoding/binary"

// Q5_0 in the blocked kernels (tileConv): a Q5_0 block is a Q8_0 block
// whose values -16..15 are stored as nibbles and high bits. One-token
// products read the stored rows directly (q5_0_conv_amd64.s), and with
// AVX-512 VNNI the rows' whole groups of 16 sit in Q5_0's decode layout,
// read by its own kernels (q5_0_decode.go, tileBlkLayout).

// q5_0ToQ8_0 writes nb Q5_0 blocks of src as Q8_0 blocks in dst: the same
// scale, each value q-16 as a byte. The AVX2 twin is q5_0ToQ8_0Rows.
func q5_0ToQ8_0(dst, src []byte, nb int) {
	_ = src[22*nb-1]
	_ = dst[34*nb-1]
	for b := 0; b < nb; b++ {
		s, d := src[22*b:22*b+22], dst[34*b:34*b+34]
		d[0], d[1] = s[0], s[1]
		qh := binary.LittleEndian.Uint32(s[2:])
		for j, v := range s[6:22] {
			x0 := int(v&15) | int((qh>>j)<<4)&0x10
			x1 := int(v>>4) | int(qh>>(j+12))&0x10
			d[2+j] = byte(int8(x0 - 16))
			d[18+j] = byte(int8(x1 - 16))
		}
	}
}
