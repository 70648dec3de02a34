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

// q5zKernels are the decode-layout kernels of Q5_0 (E = int32: the
// corrections, q5zCorrections, 8 a block) or Q5_1 (E = float32: the Q8_1
// activations' s, 1 a block).
type q5zKernels[E int32 | float32] struct {
	block int // bytes of one block of 16 rows
	per   int // third-operand values a block
	one   func(grp *byte, ngroups int, qs *int8, d *float32, third *E, nb, pf int, out *float32)
	two   func(grp *byte, ngroups int, qs *int8, qstride int, d *float32, third *E, dstride, nb, pf int, out *float32, ostride int)
}

var (
	q5zK  = q5zKernels[int32]{block: q5zBlock, per: 8, one: gemv16Q5_0P, two: gemv16Q5_0PT2}
	q51zK = q5zKernels[float32]{block: q51zBlock, per: 1, one: gemv16Q5_1P, two: gemv16Q5_1PT2}
)

// gemv: out[16g+r] = row r of group g of the decode-layout groups grp
// (len(out)/16 whole groups) against one token (its activations qs, d and
// third operand), prefetching pf bytes ahead.
func (k *q5zKernels[E]) gemv(grp []byte, qs []int8, d []float32, third []E, out []float32, pf int) {
	nb, ng := len(d), len(out)/16
	if ng == 0 || nb == 0 {
		return
	}
	_ = grp[ng*nb*k.block-1]
	_ = qs[32*nb-1]
	_ = third[k.per*nb-1]
	_ = out[16*ng-1]
	k.one(&grp[0], ng, &qs[0], &d[0], &third[0], nb, pf, &out[0])
}

// gemv2 is gemv for two consecutive tokens, each block read and its
// values built once for both: token t's activations at qs[t·32·nb:],
// d[t·nb:], third[t·per·nb:], its results at out[t·ostride+j] for row j.
// Each result is bitwise gemv's.
func (k *q5zKernels[E]) gemv2(grp []byte, qs []int8, d []float32, third []E, out []float32, ostride, rows, pf int) {
	nb, ng := len(d)/2, rows/16
	if ng == 0 || nb == 0 {
		return
	}
	_ = grp[ng*nb*k.block-1]
	_ = qs[64*nb-1]
	_ = third[2*k.per*nb-1]
	_ = out[ostride+16*ng-1]
	k.two(&grp[0], ng, &qs[0], 32*nb, &d[0], &third[0], 4*nb, nb, pf, &out[0], 4*ostride)
}

// tile computes rows [r0, r1) of the product op (whole groups of its
// decode layout) for tokens [t0, t1) against the activations a, third
// being a's per-token operand of the type: two tokens a kernel call (one
// when one is left; with q5zPairOn off, always one); a work item's rows
// stay in cache between its calls.
func (k *q5zKernels[E]) tile(op *opPlan, a *actBuf, third []E, r0, r1, t0, t1 int) {
	w, rb := op.w, op.rb
	nb, cols := w.Cols/qk, w.Cols
	grp := w.Data[r0*rb : r1*rb]
	for i := t0; i < t1; {
		if t1-i >= 2 && q5zPairOn {
			k.gemv2(grp, a.qs[i*cols:(i+2)*cols], a.d[i*nb:(i+2)*nb], third[i*k.per*nb:(i+2)*k.per*nb],
				op.dst[i*w.Rows+r0:], w.Rows, r1-r0, 16*rb)
			i += 2
			continue
		}
		k.gemv(grp, a.qs[i*cols:(i+1)*cols], a.d[i*nb:(i+1)*nb], third[i*k.per*nb:(i+1)*k.per*nb],
			op.dst[i*w.Rows+r0:i*w.Rows+r1], 16*rb)
		i++
	}
}

// tileQ5Z computes rows [r0, r1) (whole decode-layout groups) of the Q5_0
// or Q5_1 product op for tokens [t0, t1).
func (p *Pool) tileQ5Z(op *opPlan, r0, r1, t0, t1 int) {
	if r0%16 != 0 || (r1-r0)%16 != 0 || r1 > op.w.dlRows() {
		panic("cpu: Q5_0/Q5_1 decode-layout tile not on whole groups")
	}
	a := &p.scratch.act[op.k.act]
	if op.w.Type == ggml.TypeQ5_1 {
		q51zK.tile(op, a, a.s, r0, r1, t0, t1)
	} else {
		q5zK.tile(op, a, a.q5c, r0, r1, t0, t1)
	}
}
