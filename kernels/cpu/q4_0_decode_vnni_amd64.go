package cpu

//go:noescape
func gemv16Q4_0P(grp *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)

// q4zGemv: out[16g+r] = row r of group g of the decode-layout groups grp
// (len(out)/16 whole groups) against one token, prefetching pf bytes ahead.
func q4zGemv(grp []byte, qs []int8, d []float32, s8 []int32, out []float32, pf int) {
	nb, ng := len(d), len(out)/16
	if ng == 0 || nb == 0 {
		return
	}
	_ = grp[ng*nb*q4zBlock-1]
	_ = qs[32*nb-1]
	_ = s8[nb-1]
	_ = out[16*ng-1]
	gemv16Q4_0P(&grp[0], ng, &qs[0], &d[0], &s8[0], nb, pf, &out[0])
}

//go:generate go run q4_0_decode_few_gen.go

//go:noescape
func gemv16Q4_0PT2(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q4_0PT3(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q4_0PT4(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q4_0PT5(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q4_0PT6(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q4_0PT7(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

//go:noescape
func gemv16Q4_0PT8(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)

// q4zFewKernels[n] is the decode-layout kernel for n tokens
// (q4_0_decode_few_vnni_amd64.s).
var q4zFewKernels = [...]func(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int){
	2: gemv16Q4_0PT2, 3: gemv16Q4_0PT3, 4: gemv16Q4_0PT4, 5: gemv16Q4_0PT5,
	6: gemv16Q4_0PT6, 7: gemv16Q4_0PT7, 8: gemv16Q4_0PT8,
}

// q4zGemvFew is q4zGemv for n = 2 to 8 consecutive tokens, each block
// read and unpacked once for all of them: token t's activations at
// qs[t·32·nb:], d[t·nb:], s8[t·nb:], its results at out[t·ostride+j]
// for row j. Each result is bitwise q4zGemv's.
func q4zGemvFew(grp []byte, n int, qs []int8, d []float32, s8 []int32, out []float32, ostride, rows, pf int) {
	nb, ng := len(d)/n, rows/16
	if ng == 0 || nb == 0 {
		return
	}
	_ = grp[ng*nb*q4zBlock-1]
	_ = qs[32*nb*n-1]
	_ = s8[nb*n-1]
	_ = out[(n-1)*ostride+16*ng-1]
	q4zFewKernels[n](&grp[0], ng, &qs[0], 32*nb, &d[0], &s8[0], 4*nb, nb, pf, &out[0], 4*ostride)
}

// q4zChunk is the tokens the next decode-layout kernel call takes when
// left are left: eight at a time, and never one alone after others
// (nine go as seven and two).
func q4zChunk(left int) int {
	c := min(left, len(q4zFewKernels)-1)
	if left-c == 1 {
		c--
	}
	return c
}

// tileQ4Z computes rows [r0, r1) (whole decode-layout groups) of op for
// tokens [t0, t1): decode (fewer than q4zFewMax tokens) through the
// streaming kernels, up to eight tokens per call (q4zGemvFew), more
// tokens through the 16-row VNNI panels that tileBlkZ uses (a group
// unpacks into the same panel bytes as its rows).
func (p *Pool) tileQ4Z(worker int, op *opPlan, r0, r1, t0, t1 int) {
	s := &p.scratch
	w, rb := op.w, op.rb
	if r0%16 != 0 || (r1-r0)%16 != 0 || r1 > w.dlRows() {
		panic("cpu: Q4_0 decode-layout tile not on whole groups")
	}
	nb, cols := w.Cols/qk, w.Cols
	a := &s.act[op.k.act]
	if t1-t0 < q4zFewMax {
		for i := t0; i < t1; {
			n := 1
			if q4zFewOn {
				n = q4zChunk(t1 - i)
			}
			if n == 1 {
				q4zGemv(w.Data[r0*rb:r1*rb], a.qs[i*cols:(i+1)*cols], a.d[i*nb:(i+1)*nb], a.s8[i*nb:(i+1)*nb],
					op.dst[i*w.Rows+r0:i*w.Rows+r1], 16*rb)
			} else {
				q4zGemvFew(w.Data[r0*rb:r1*rb], n, a.qs[i*cols:(i+n)*cols], a.d[i*nb:(i+n)*nb], a.s8[i*nb:(i+n)*nb],
					op.dst[i*w.Rows+r0:], w.Rows, r1-r0, 16*rb)
			}
			i += n
		}
		return
	}
	panel := growBytes(&s.panels[worker], nb*panelBlockZ)
	for g := r0; g < r1; g += 16 {
		// In AVX2, prefetching the next group: the Go twin unpacks at
		// ~2.6 GB/s, about 5x slower (BenchmarkPackPanelFromQ4Z on a
		// 2-vCPU EPYC), which a decode batch of a few to a few dozen
		// tokens pays per group.
		grp := w.Data[g*rb : (g+16)*rb]
		next := w.Data[min((g+16)*rb, len(w.Data)):min((g+32)*rb, len(w.Data))]
		if !packPanelFromQ4ZSIMD(panel, grp, next, nb) {
			packPanelFromQ4Z(panel, grp, nb)
		}
		panelZTokens(op, a, panel, g, t0, t1)
	}
}
