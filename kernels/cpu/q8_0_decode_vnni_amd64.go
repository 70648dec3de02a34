package cpu

// The Q8_0 decode-layout kernels (q8_0_decode.go), written by
// blk_decode_gen.go.

//go:noescape
func gemv16Q8_0P(grp *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)

//go:noescape
func gemv16Q8_0PT2(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q8_0PT3(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q8_0PT4(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q8_0PT5(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q8_0PT6(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q8_0PT7(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q8_0PT8(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)
