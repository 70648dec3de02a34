package cpu

import "oengine/ggml"

// Types computed by the Q8_0 blocked kernels (blkKernel.conv): a block of
// the type is a Q8_0 block stored another way (IQ4_NL, iq4_nl.go; Q5_0,
// q5_0_conv.go), so the type takes
// Q8_0's arithmetic (blkDotRef) and all its paths, and its results do not
// depend on the batch.

// tileConv computes rows [r0, r1) of a product of such a type for tokens
// [t0, t1). Up to bk.gemvMax tokens run the type's one-token kernel
// (bk.gemv) on whole groups of rows, token by token; otherwise, and for
// the rows left, the rows are converted to Q8_0 in the worker's scratch
// and the Q8_0 tile runs on them (rows renumbered from 0, dst shifted by
// r0). Both give the bits of blkDotRef on the converted rows.
func (p *Pool) tileConv(worker int, op *opPlan, r0, r1, t0, t1 int) {
	if r0 < op.w.dlRows() { // IQ4_NL's and Q5_0's decode layouts (iq4_nl.go, q5_0_decode.go); tiles are whole groups
		p.tileBlkLayout(worker, op, r0, r1, t0, t1)
		return
	}
	bk := op.k.blk
	nb := op.w.Cols / qk
	if t1-t0 <= bk.gemvMax && bk.gemv != nil { // decode: whole groups of rows as stored, token by token
		w, a := op.w, &p.scratch.act[op.k.act]
		done := 0
		for t := t0; t < t1; t++ {
			qs, d, s8 := a.qs[t*w.Cols:(t+1)*w.Cols], a.d[t*nb:(t+1)*nb], a.s8[t*nb:(t+1)*nb]
			done = bk.gemv(w.Data[r0*op.rb:r1*op.rb], op.rb, qs, d, s8, op.dst[t*w.Rows+r0:t*w.Rows+r1])
		}
		if r0 += done; r0 == r1 {
			return
		}
	}
	rb := 34 * nb
	buf := growBytes(&p.scratch.rows[worker], (r1-r0)*rb)
	for r := r0; r < r1; r++ {
		bk.conv(buf[(r-r0)*rb:(r-r0+1)*rb], op.w.Data[r*op.rb:(r+1)*op.rb], nb)
	}
	q8 := &p.scratch.rowOps[worker]
	*q8 = *op
	q8.w = Matrix{Type: ggml.TypeQ8_0, Rows: op.w.Rows, Cols: op.w.Cols, Data: buf}
	q8.rb = rb
	q8.dst = op.dst[r0:]
	p.tileBlk(worker, q8, 0, r1-r0, t0, t1)
	*q8 = opPlan{} // keep no reference to the caller's dst
}
