package cpu

import "oengine/ggml"

// The Q5_0 decode-layout kernels (q5_0_decode.go), written by
// blk_decode_gen.go.

//go:noescape
func gemv16Q5_0P(grp *byte, ngroups int, qs *int8, d *float32, corr *int32, nb, pf int, out *float32)

//go:noescape
func gemv16Q5_0PT2(grp *byte, ngroups int, qs *int8, qstride int, d *float32, corr *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q5_1P(grp *byte, ngroups int, qs *int8, d *float32, s *float32, nb, pf int, out *float32)

//go:noescape
func gemv16Q5_1PT2(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s *float32, dstride, nb, pf int, out *float32, ostride int)

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

// q51zGemv is q5zGemv for Q5_1 groups: the token's Q8_1 activations qs,
// d and s (its F16-rounded d·Σq per block) in place of the corrections.
func q51zGemv(grp []byte, qs []int8, d, s []float32, out []float32, pf int) {
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

// q51zGemv2 is q5zGemv2 for Q5_1 groups (token t's s at s[t·nb:]).
func q51zGemv2(grp []byte, qs []int8, d, s []float32, out []float32, ostride, rows, pf int) {
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

// tileQ5Z computes rows [r0, r1) (whole decode-layout groups) of the Q5_0
// or Q5_1 product op for tokens [t0, t1), two tokens a kernel call (one
// when one is left); a work item's rows stay in cache between its calls.
func (p *Pool) tileQ5Z(op *opPlan, r0, r1, t0, t1 int) {
	w, rb := op.w, op.rb
	if r0%16 != 0 || (r1-r0)%16 != 0 || r1 > w.dlRows() {
		panic("cpu: Q5_0/Q5_1 decode-layout tile not on whole groups")
	}
	nb, cols := w.Cols/qk, w.Cols
	a := &p.scratch.act[op.k.act]
	grp := w.Data[r0*rb : r1*rb]
	q51 := w.Type == ggml.TypeQ5_1
	for i := t0; i < t1; {
		n := 1
		if t1-i >= 2 && q5zPairOn {
			n = 2
		}
		qs, d, out := a.qs[i*cols:(i+n)*cols], a.d[i*nb:(i+n)*nb], op.dst[i*w.Rows+r0:]
		switch {
		case q51 && n == 2:
			q51zGemv2(grp, qs, d, a.s[i*nb:(i+2)*nb], out, w.Rows, r1-r0, 16*rb)
		case q51:
			q51zGemv(grp, qs, d, a.s[i*nb:(i+1)*nb], out[:r1-r0], 16*rb)
		case n == 2:
			q5zGemv2(grp, qs, d, a.q5c[i*cols/4:(i+2)*cols/4], out, w.Rows, r1-r0, 16*rb)
		default:
			q5zGemv(grp, qs, d, a.q5c[i*cols/4:(i+1)*cols/4], out[:r1-r0], 16*rb)
		}
		i += n
	}
}
