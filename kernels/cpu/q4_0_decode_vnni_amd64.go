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

// tileQ4Z computes rows [r0, r1) (whole decode-layout groups) of op for
// tokens [t0, t1): decode (fewer than 4 tokens) through the streaming
// kernel per token, more tokens through the 16-row VNNI panels that
// tileBlkZ uses (a group unpacks into the same panel bytes as its rows).
func (p *Pool) tileQ4Z(worker int, op *opPlan, r0, r1, t0, t1 int) {
	s := &p.scratch
	w, rb := op.w, op.rb
	if r0%16 != 0 || (r1-r0)%16 != 0 || r1 > w.q4zRows() {
		panic("cpu: Q4_0 decode-layout tile not on whole groups")
	}
	nb, cols := w.Cols/qk, w.Cols
	a := &s.act[op.k.act]
	if t1-t0 < q4zFewMax {
		for i := t0; i < t1; i++ {
			q4zGemv(w.Data[r0*rb:r1*rb], a.qs[i*cols:(i+1)*cols], a.d[i*nb:(i+1)*nb], a.s8[i*nb:(i+1)*nb],
				op.dst[i*w.Rows+r0:i*w.Rows+r1], 16*rb)
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
