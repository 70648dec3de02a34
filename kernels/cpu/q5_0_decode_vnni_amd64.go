package cpu

// The Q5_0 and Q5_1 decode-layout kernels (q5_0_decode.go), written by
// blk_decode_gen.go. Q5_0's compute the blocked kernels' arithmetic and
// are a blkZLayout (tileBlkLayout); Q5_1's compute dotQ5_1AVX2's.

//go:noescape
func gemv16Q5_0P(grp *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)

//go:noescape
func gemv16Q5_0PT2(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q5_0PT3(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q5_0PT4(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q5_0PT5(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q5_0PT6(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q5_0PT7(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q5_0PT8(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q5_1P(grp *byte, ngroups int, qs *int8, d *float32, s *float32, nb, pf int, out *float32)

//go:noescape
func gemv16Q5_1PT2(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s *float32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func packQ5ZPanelZ(panel, grp, next *byte, nb int, tab *float32)

// q5zLayout is the Q5_0 decode layout's entry for tileBlkLayout.
var q5zLayout = blkZLayout{
	block: q5zBlock,
	gemv:  gemv16Q5_0P,
	few: [...]func(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int){
		2: gemv16Q5_0PT2, 3: gemv16Q5_0PT3, 4: gemv16Q5_0PT4, 5: gemv16Q5_0PT5,
		6: gemv16Q5_0PT6, 7: gemv16Q5_0PT7, 8: gemv16Q5_0PT8,
	},
	simd: packPanelFromQ5ZSIMD,
	twin: packPanelFromQ5Z,
}

// packPanelFromQ5ZSIMD is packPanelFromQ5Z in AVX-512
// (blk_decode_pack_amd64.s; TestPackPanelFromBlkZSIMD), prefetching next
// (empty: none). The fifth-bit masks are opmasks there, so it needs the
// AVX-512 kernels the layout itself needs; it reports false, writing
// nothing, without them.
func packPanelFromQ5ZSIMD(panel, grp, next []byte, nb int) bool {
	return q4zActive() && packGroupPanelSIMD(packQ5ZPanelZ, q5zBlock, panel, grp, next, nb)
}

// q51zKernels are the Q5_1 decode-layout kernels.
type q51zKernels struct{}

var q51zK q51zKernels

// gemv: out[16g+r] = row r of group g of the decode-layout groups grp
// (len(out)/16 whole groups) against one token (its Q8_1 activations qs,
// d and s), prefetching pf bytes ahead.
func (q51zKernels) gemv(grp []byte, qs []int8, d, s []float32, out []float32, pf int) {
	nb, ng := len(d), len(out)/16
	if ng == 0 || nb == 0 {
		return
	}
	_ = grp[ng*nb*q51zBlock-1]
	_ = qs[32*nb-1]
	_ = s[nb-1]
	_ = out[16*ng-1]
	gemv16Q5_1P(&grp[0], ng, &qs[0], &d[0], &s[0], nb, pf, &out[0])
}

// gemv2 is gemv for two consecutive tokens, each block read and its
// values built once for both: token t's activations at qs[t·32·nb:],
// d[t·nb:], s[t·nb:], its results at out[t·ostride+j] for row j. Each
// result is bitwise gemv's.
func (q51zKernels) gemv2(grp []byte, qs []int8, d, s []float32, out []float32, ostride, rows, pf int) {
	nb, ng := len(d)/2, rows/16
	if ng == 0 || nb == 0 {
		return
	}
	_ = grp[ng*nb*q51zBlock-1]
	_ = qs[64*nb-1]
	_ = s[2*nb-1]
	_ = out[ostride+16*ng-1]
	gemv16Q5_1PT2(&grp[0], ng, &qs[0], 32*nb, &d[0], &s[0], 4*nb, nb, pf, &out[0], 4*ostride)
}

// tileQ5_1Z computes rows [r0, r1) (whole decode-layout groups) of the
// Q5_1 product op for tokens [t0, t1): two tokens a kernel call (one when
// one is left; with q51zPairOn off, always one); a work item's rows stay
// in cache between its calls.
func (p *Pool) tileQ5_1Z(op *opPlan, r0, r1, t0, t1 int) {
	if r0%16 != 0 || (r1-r0)%16 != 0 || r1 > op.w.dlRows() {
		panic("cpu: Q5_1 decode-layout tile not on whole groups")
	}
	a := &p.scratch.act[op.k.act]
	w, rb := op.w, op.rb
	nb, cols := w.Cols/qk, w.Cols
	grp := w.Data[r0*rb : r1*rb]
	for i := t0; i < t1; {
		if t1-i >= 2 && q51zPairOn {
			q51zK.gemv2(grp, a.qs[i*cols:(i+2)*cols], a.d[i*nb:(i+2)*nb], a.s[i*nb:(i+2)*nb],
				op.dst[i*w.Rows+r0:], w.Rows, r1-r0, 16*rb)
			i += 2
			continue
		}
		q51zK.gemv(grp, a.qs[i*cols:(i+1)*cols], a.d[i*nb:(i+1)*nb], a.s[i*nb:(i+1)*nb],
			op.dst[i*w.Rows+r0:i*w.Rows+r1], 16*rb)
		i++
	}
}
