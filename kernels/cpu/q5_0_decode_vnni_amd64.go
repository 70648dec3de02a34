package cpu

// The Q5_0 decode-layout kernels (q5_0_decode.go), written by
// blk_decode_gen.go.

//go:noescape
func gemv16Q5_0P(grp *byte, ngroups int, qs *int8, d *float32, corr *int32, nb, pf int, out *float32)

//go:noescape
func gemv16Q5_0PT2(grp *byte, ngroups int, qs *int8, qstride int, d *float32, corr *int32, dstride, nb, pf int, out *float32, ostride int)

// q5zGemv: out[16g+r] = row r of group g of the Q5_0 decode-layout groups
// grp (len(out)/16 whole groups) against one token (its Q8_0 activations
// qs, d and corrections corr, q5zCorrections), prefetching pf bytes ahead.
func q5zGemv(grp []byte, qs []int8, d []float32, corr []int32, out []float32, pf int) {
	nb, ng := len(d), len(out)/16
	if ng == 0 || nb == 0 {
		return
	}
	_ = grp[ng*nb*q5zBlock-1]
	_ = qs[32*nb-1]
	_ = corr[8*nb-1]
	_ = out[16*ng-1]
	gemv16Q5_0P(&grp[0], ng, &qs[0], &d[0], &corr[0], nb, pf, &out[0])
}

// q5zGemv2 is q5zGemv for two consecutive tokens, each block read and
// its values built once for both: token t's activations at qs[t·32·nb:],
// d[t·nb:], corr[t·8·nb:], its results at out[t·ostride+j] for row j.
// Each result is bitwise q5zGemv's.
func q5zGemv2(grp []byte, qs []int8, d []float32, corr []int32, out []float32, ostride, rows, pf int) {
	nb, ng := len(d)/2, rows/16
	if ng == 0 || nb == 0 {
		return
	}
	_ = grp[ng*nb*q5zBlock-1]
	_ = qs[64*nb-1]
	_ = corr[16*nb-1]
	_ = out[ostride+16*ng-1]
	gemv16Q5_0PT2(&grp[0], ng, &qs[0], 32*nb, &d[0], &corr[0], 4*nb, nb, pf, &out[0], 4*ostride)
}

// tileQ5Z computes rows [r0, r1) (whole decode-layout groups) of the Q5_0
// product op for tokens [t0, t1), two tokens a kernel call (one when one
// is left); a work item's rows stay in cache between its calls.
func (p *Pool) tileQ5Z(op *opPlan, r0, r1, t0, t1 int) {
	w, rb := op.w, op.rb
	if r0%16 != 0 || (r1-r0)%16 != 0 || r1 > w.dlRows() {
		panic("cpu: Q5_0 decode-layout tile not on whole groups")
	}
	nb, cols := w.Cols/qk, w.Cols
	a := &p.scratch.act[op.k.act]
	grp := w.Data[r0*rb : r1*rb]
	for i := t0; i < t1; {
		if t1-i >= 2 && q5zPairOn {
			q5zGemv2(grp, a.qs[i*cols:(i+2)*cols], a.d[i*nb:(i+2)*nb], a.q5c[i*cols/4:(i+2)*cols/4],
				op.dst[i*w.Rows+r0:], w.Rows, r1-r0, 16*rb)
			i += 2
			continue
		}
		q5zGemv(grp, a.qs[i*cols:(i+1)*cols], a.d[i*nb:(i+1)*nb], a.q5c[i*cols/4:(i+1)*cols/4],
			op.dst[i*w.Rows+r0:i*w.Rows+r1], 16*rb)
		i++
	}
}
