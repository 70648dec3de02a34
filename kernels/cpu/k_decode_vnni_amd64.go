package cpu

import "oengine/ggml"

//go:generate go run k_decode_gen.go

//go:noescape
func gemv16Q2_KP(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)

//go:noescape
func gemv16Q3_KP(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)

//go:noescape
func gemv16Q4_KP(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)

//go:noescape
func gemv16Q5_KP(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)

//go:noescape
func gemv16Q6_KP(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)

//go:noescape
func gemv16Q6_KPT2(grp *byte, ngroups int, qs *int8, qstride int, d *float32, bsums *int16, dstride, bstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q6_KPT3(grp *byte, ngroups int, qs *int8, qstride int, d *float32, bsums *int16, dstride, bstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q6_KPT4(grp *byte, ngroups int, qs *int8, qstride int, d *float32, bsums *int16, dstride, bstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q5_KPT2(grp *byte, ngroups int, qs *int8, qstride int, d *float32, bsums *int16, dstride, bstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q5_KPT3(grp *byte, ngroups int, qs *int8, qstride int, d *float32, bsums *int16, dstride, bstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q5_KPT4(grp *byte, ngroups int, qs *int8, qstride int, d *float32, bsums *int16, dstride, bstride, nb, pf int, out *float32, ostride int)

// kzFewKernel is a decode-layout kernel for several tokens.
type kzFewKernel func(grp *byte, ngroups int, qs *int8, qstride int, d *float32, bsums *int16, dstride, bstride, nb, pf int, out *float32, ostride int)

// kzFewKernels returns the decode-layout kernels of K-quant type t for
// n = 2 to 4 tokens (index n) and its super-block bytes: Q5_K and Q6_K
// have them, the others nil. Q4_K has none: such kernels ran slower than
// its one-token kernel once a token (BenchmarkKZMatMul).
func kzFewKernels(t ggml.Type) (*[5]kzFewKernel, int) {
	switch t {
	case ggml.TypeQ5_K:
		return &q5kzFew, 176
	case ggml.TypeQ6_K:
		return &q6kzFew, 210
	}
	return nil, 0
}

var (
	q5kzFew = [5]kzFewKernel{2: gemv16Q5_KPT2, 3: gemv16Q5_KPT3, 4: gemv16Q5_KPT4}
	q6kzFew = [5]kzFewKernel{2: gemv16Q6_KPT2, 3: gemv16Q6_KPT3, 4: gemv16Q6_KPT4}
)

// kzGemv: out[16g+r] = row r of group g of the decode-layout groups grp of
// K-quant type t (Q2_K to Q6_K; len(out)/16 whole groups) against one
// token (qs, d, bsums: its Q8_K activations), prefetching pf bytes ahead.
func kzGemv(t ggml.Type, grp []byte, qs []int8, d []float32, bsums []int16, out []float32, pf int) {
	nb, ng := len(d), len(out)/16
	if ng == 0 || nb == 0 {
		return
	}
	f, bb := kzKernel(t)
	_ = grp[ng*nb*16*bb-1]
	_ = qs[qkK*nb-1]
	_ = bsums[16*nb-1]
	_ = out[16*ng-1]
	f(&grp[0], ng, &qs[0], &d[0], &bsums[0], nb, pf, &out[0])
}

// kzKernel returns the one-token kernel of K-quant type t and its
// super-block bytes (a switch: kzGemv runs once per token and work item,
// where a map lookup or a copy of ggml's type entry showed in profiles;
// TestKZKernel checks the sizes against ggml's).
func kzKernel(t ggml.Type) (func(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32), int) {
	switch t {
	case ggml.TypeQ2_K:
		return gemv16Q2_KP, 84
	case ggml.TypeQ3_K:
		return gemv16Q3_KP, 110
	case ggml.TypeQ5_K:
		return gemv16Q5_KP, 176
	case ggml.TypeQ6_K:
		return gemv16Q6_KP, 210
	}
	return gemv16Q4_KP, 144
}

// kzGemvFew is kzGemv for Q5_K or Q6_K (t) and n = 2 to 4 consecutive
// tokens, each super-block read and unpacked once for all of them: token
// t's activations at qs[t·cols:], d[t·nb:], bsums[t·cols/16:], its results
// at out[t·ostride+j] for row j of the groups' rows. Each result is
// bitwise kzGemv's.
func kzGemvFew(t ggml.Type, grp []byte, n int, qs []int8, d []float32, bsums []int16, out []float32, ostride, rows, pf int) {
	nb, ng := len(d)/n, rows/16
	if ng == 0 || nb == 0 {
		return
	}
	few, bb := kzFewKernels(t)
	cols := qkK * nb
	_ = grp[ng*nb*16*bb-1] // super-blocks (TestKZKernel)
	_ = qs[n*cols-1]
	_ = bsums[n*cols/16-1]
	_ = out[(n-1)*ostride+16*ng-1]
	few[n](&grp[0], ng, &qs[0], cols, &d[0], &bsums[0], 4*nb, cols/8, nb, pf, &out[0], 4*ostride)
}

// kzChunk is the tokens the next decode-layout kernel call takes when
// left are left: four at a time, and never one alone after others (five
// go as three and two).
func kzChunk(left int) int {
	c := min(left, 4)
	if left-c == 1 {
		c--
	}
	return c
}

// tileKZ computes rows [r0, r1) (whole decode-layout groups) of the K-quant
// product op for tokens [t0, t1): Q2_K to Q4_K one token a kernel call,
// Q5_K and Q6_K up to four (kzChunk; with kzFewOn off, one). A work item's
// 16 rows stay in cache between its calls.
func (p *Pool) tileKZ(op *opPlan, r0, r1, t0, t1 int) {
	w, rb := op.w, op.rb
	if r0%16 != 0 || (r1-r0)%16 != 0 || r1 > w.dlRows() {
		panic("cpu: K-quant decode-layout tile not on whole groups")
	}
	nb, cols := w.Cols/qkK, w.Cols
	a := &p.scratch.act[op.k.act]
	for i := t0; i < t1; {
		n := 1
		if few, _ := kzFewKernels(w.Type); kzFewOn && few != nil {
			n = kzChunk(t1 - i)
		}
		if n == 1 {
			kzGemv(w.Type, w.Data[r0*rb:r1*rb], a.qs[i*cols:(i+1)*cols], a.d[i*nb:(i+1)*nb], a.bsums[i*cols/16:(i+1)*cols/16],
				op.dst[i*w.Rows+r0:i*w.Rows+r1], 16*rb)
		} else {
			kzGemvFew(w.Type, w.Data[r0*rb:r1*rb], n, a.qs[i*cols:(i+n)*cols], a.d[i*nb:(i+n)*nb], a.bsums[i*cols/16:(i+n)*cols/16],
				op.dst[i*w.Rows+r0:], w.Rows, r1-r0, 16*rb)
		}
		i += n
	}
}
