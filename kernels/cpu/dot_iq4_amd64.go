package cpu

// AVX2 IQ4_XS kernels (dot_iq4_amd64.s); nb is the number of
// super-blocks, strides are in bytes. (IQ4_NL runs the blocked Q8_0
// kernels on converted rows: tileConv.)

//go:noescape
func dotIQ4_XSAVX2(row *byte, qs *int8, d *float32, nb int) float32

//go:noescape
func dotIQ4_XSx4AVX2(row *byte, qs *int8, d *float32, nb, qstride, dstride int, out *float32)

func dotIQ4_XSSIMD(row []byte, a actView) float32 {
	_ = row[136*len(a.d)-1]
	_ = a.qs[qkK*len(a.d)-1]
	return dotIQ4_XSAVX2(&row[0], &a.qs[0], &a.d[0], len(a.d))
}

func dotIQ4_XSx4SIMD(row []byte, a actView, cols int) (out [4]float32) {
	nb := cols / qkK
	_ = row[136*nb-1]
	_ = a.qs[4*cols-1]
	_ = a.d[4*nb-1]
	dotIQ4_XSx4AVX2(&row[0], &a.qs[0], &a.d[0], nb, cols, 4*nb, &out[0])
	return out
}

// AVX-512 VNNI IQ4_XS kernels (dot_iq4_vnni_amd64.s).

//go:noescape
func dotIQ4_XSZ(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotIQ4_XSx4Z(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)

func dotIQ4_XSZSIMD(row []byte, a actView) float32 {
	_ = row[136*len(a.d)-1]
	_ = a.qs[qkK*len(a.d)-1]
	_ = a.bsums[16*len(a.d)-1]
	return dotIQ4_XSZ(&row[0], &a.qs[0], &a.d[0], &a.bsums[0], len(a.d))
}

func dotIQ4_XSx4ZSIMD(row []byte, a actView, cols int) (out [4]float32) {
	nb := cols / qkK
	_ = row[136*nb-1]
	_ = a.qs[4*cols-1]
	_ = a.d[4*nb-1]
	_ = a.bsums[4*16*nb-1]
	dotIQ4_XSx4Z(&row[0], &a.qs[0], &a.d[0], &a.bsums[0], nb, cols, 4*nb, &out[0])
	return out
}
