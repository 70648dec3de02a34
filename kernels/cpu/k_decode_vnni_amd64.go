package cpu

import "oengine/ggml"

//go:generate go run q4_k_decode_gen.go
//go:generate go run q6_k_decode_gen.go

//go:noescape
func gemv16Q4_KP(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)

//go:noescape
func gemv16Q6_KP(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)

// kzGemv: out[16g+r] = row r of group g of the decode-layout groups grp of
// K-quant type t (Q4_K or Q6_K; len(out)/16 whole groups) against one
// token (qs, d, bsums: its Q8_K activations), prefetching pf bytes ahead.
func kzGemv(t ggml.Type, grp []byte, qs []int8, d []float32, bsums []int16, out []float32, pf int) {
	nb, ng := len(d), len(out)/16
	if ng == 0 || nb == 0 {
		return
	}
	f, bb := gemv16Q4_KP, 144
	if t == ggml.TypeQ6_K {
		f, bb = gemv16Q6_KP, 210
	}
	_ = grp[ng*nb*16*bb-1]
	_ = qs[qkK*nb-1]
	_ = bsums[16*nb-1]
	_ = out[16*ng-1]
	f(&grp[0], ng, &qs[0], &d[0], &bsums[0], nb, pf, &out[0])
}

// tileKZ computes rows [r0, r1) (whole decode-layout groups) of the Q4_K
// or Q6_K product op for tokens [t0, t1), one token at a time: a work
// item's 16 rows stay in cache between its tokens.
func (p *Pool) tileKZ(op *opPlan, r0, r1, t0, t1 int) {
	w, rb := op.w, op.rb
	if r0%16 != 0 || (r1-r0)%16 != 0 || r1 > w.dlRows() {
		panic("cpu: K-quant decode-layout tile not on whole groups")
	}
	nb, cols := w.Cols/qkK, w.Cols
	a := &p.scratch.act[op.k.act]
	for i := t0; i < t1; i++ {
		kzGemv(w.Type, w.Data[r0*rb:r1*rb], a.qs[i*cols:(i+1)*cols], a.d[i*nb:(i+1)*nb], a.bsums[i*cols/16:(i+1)*cols/16],
			op.dst[i*w.Rows+r0:i*w.Rows+r1], 16*rb)
	}
}
