package cpu

// IQ4_NL in the blocked kernels (tileConv): an IQ4_NL block is a Q8_0
// block whose 32 bytes are levels of iq4Values, stored as 16 bytes of
// nibbles. One-token products read the nibbles directly
// (iq4_gemv_amd64.s).

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
