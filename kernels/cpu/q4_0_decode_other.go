//go:build !amd64

package cpu

func q4zGemv(grp []byte, qs []int8, d []float32, s8 []int32, out []float32, pf int) {
	panic("cpu: no Q4_0 decode-layout kernels on this architecture")
}

func (p *Pool) tileQ4Z(worker int, op *opPlan, r0, r1, t0, t1 int) {
	panic("cpu: no Q4_0 decode-layout kernels on this architecture")
}

func q4kzGemv(grp []byte, qs []int8, d []float32, bsums []int16, out []float32, pf int) {
	panic("cpu: no Q4_K decode-layout kernels on this architecture")
}

func (p *Pool) tileQ4KZ(op *opPlan, r0, r1, t0, t1 int) {
	panic("cpu: no Q4_K decode-layout kernels on this architecture")
}
