//go:build !amd64

package cpu

import "oengine/ggml"

func (p *Pool) tileBlkLayout(worker int, op *opPlan, r0, r1, t0, t1 int) {
	panic("cpu: no Q4_0/Q8_0 decode-layout kernels on this architecture")
}

func kzGemv(t ggml.Type, grp []byte, qs []int8, d []float32, bsums []int16, out []float32, pf int) {
	panic("cpu: no K-quant decode-layout kernels on this architecture")
}

func (p *Pool) tileKZ(op *opPlan, r0, r1, t0, t1 int) {
	panic("cpu: no K-quant decode-layout kernels on this architecture")
}

func (p *Pool) tileQ5_1Z(op *opPlan, r0, r1, t0, t1 int) {
	panic("cpu: no Q5_1 decode-layout kernels on this architecture")
}
