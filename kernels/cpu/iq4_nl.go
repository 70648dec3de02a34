package cpu

import "oengine/ggml"

// IQ4_NL in the blocked kernels (dot_blk.go): an IQ4_NL block is a Q8_0
// block whose 32 bytes are levels of iq4Values, stored as 16 bytes of
// nibbles. Products convert a tile's rows to Q8_0 and run the Q8_0
// kernels, except one-token products, which read the nibbles directly
// (iq4_gemv_amd64.s); every path has Q8_0's arithmetic (blkDotRef), so
// IQ4_NL results do not depend on the batch.

// iq4NLToQ8_0 writes nb IQ4_NL blocks of src as Q8_0 blocks in dst: the
// same scale, each nibble replaced by its level (exact: a level is an
// int8). The SIMD twin is iq4NLToQ8_0SIMD.
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

// tileIQ4NL computes rows [r0, r1) of an IQ4_NL product for tokens
// [t0, t1). One token runs the IQ4_NL decode kernels on whole groups of
// rows (iq4NLGemv); otherwise, and for the rows left, the rows are
// converted to Q8_0 in the worker's scratch and the Q8_0 tile runs on
// them (rows renumbered from 0, dst shifted by r0). Both give the bits of
// blkDotRef on the converted rows.
func (p *Pool) tileIQ4NL(worker int, op *opPlan, r0, r1, t0, t1 int) {
	nb := op.w.Cols / qk
	if t1-t0 == 1 { // decode: whole groups of rows straight from the IQ4_NL bytes
		w, a := op.w, &p.scratch.act[op.k.act]
		qs, d, s8 := a.qs[t0*w.Cols:(t0+1)*w.Cols], a.d[t0*nb:(t0+1)*nb], a.s8[t0*nb:(t0+1)*nb]
		r0 += iq4NLGemv(w.Data[r0*op.rb:r1*op.rb], op.rb, qs, d, s8, op.dst[t0*w.Rows+r0:t0*w.Rows+r1])
		if r0 == r1 {
			return
		}
	}
	rb := 34 * nb
	buf := growBytes(&p.scratch.rows[worker], (r1-r0)*rb)
	for r := r0; r < r1; r++ {
		iq4NLToQ8_0Rows(buf[(r-r0)*rb:(r-r0+1)*rb], op.w.Data[r*op.rb:(r+1)*op.rb], nb)
	}
	q8 := &p.scratch.rowOps[worker]
	*q8 = *op
	q8.w = Matrix{Type: ggml.TypeQ8_0, Rows: op.w.Rows, Cols: op.w.Cols, Data: buf}
	q8.rb = rb
	q8.dst = op.dst[r0:]
	p.tileBlk(worker, q8, 0, r1-r0, t0, t1)
	*q8 = opPlan{} // keep no reference to the caller's dst
}

// iq4NLToQ8_0Rows is iq4NLToQ8_0 in SIMD where present.
func iq4NLToQ8_0Rows(dst, src []byte, nb int) {
	if !iq4NLToQ8_0SIMD(dst, src, nb) {
		iq4NLToQ8_0(dst, src, nb)
	}
}
