package cpu

import "oengine/ggml"

//go:noescape
func gemv16Q4_0P(grp *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)

//go:generate go run blk_decode_gen.go

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

// blkZLayout is the decode layout of a blocked type (Q4_0:
// q4_0_decode.go, Q8_0: q8_0_decode.go) as its kernels see it.
type blkZLayout struct {
	block int // bytes of one block of 16 rows
	// gemv is the one-token kernel, few[n] the one for n = 2..8 tokens.
	gemv func(grp *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)
	few  [9]func(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)
	// simd unpacks a group (nb blocks) into the 16-row VNNI panel
	// (dot_blk16.go) in AVX2, prefetching next (the group after it);
	// twin is its Go twin (panel).
	simd func(panel, grp, next []byte, nb int) bool
	twin func(panel, grp []byte, nb int)
}

// panel unpacks a group (nb blocks) into the 16-row VNNI panel, in AVX2
// where it runs: the Go twins unpack at ~2.6 GB/s (Q4_0), about 5x
// slower (BenchmarkPackPanelFromBlkZ on a 2-vCPU EPYC), which a decode
// batch of a few to a few dozen tokens pays per group.
func (l *blkZLayout) panel(panel, grp, next []byte, nb int) {
	if !l.simd(panel, grp, next, nb) {
		l.twin(panel, grp, nb)
	}
}

var (
	q4zLayout = blkZLayout{
		block: q4zBlock,
		gemv:  gemv16Q4_0P,
		few: [...]func(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int){
			2: gemv16Q4_0PT2, 3: gemv16Q4_0PT3, 4: gemv16Q4_0PT4, 5: gemv16Q4_0PT5,
			6: gemv16Q4_0PT6, 7: gemv16Q4_0PT7, 8: gemv16Q4_0PT8,
		},
		simd: packPanelFromQ4ZSIMD,
		twin: packPanelFromQ4Z,
	}
	q8zLayout = blkZLayout{
		block: q8zBlock,
		gemv:  gemv16Q8_0P,
		few: [...]func(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int){
			2: gemv16Q8_0PT2, 3: gemv16Q8_0PT3, 4: gemv16Q8_0PT4, 5: gemv16Q8_0PT5,
			6: gemv16Q8_0PT6, 7: gemv16Q8_0PT7, 8: gemv16Q8_0PT8,
		},
		simd: packPanelFromQ8ZSIMD,
		twin: packPanelFromQ8Z,
	}
)

// blkZ returns the decode layout of blocked type t (Q4_0, Q8_0, IQ4_NL or Q5_0).
func blkZ(t ggml.Type) *blkZLayout {
	switch t {
	case ggml.TypeQ8_0:
		return &q8zLayout
	case ggml.TypeIQ4_NL:
		return &iq4zLayout
	case ggml.TypeQ5_0:
		return &q5zLayout
	}
	return &q4zLayout
}

// gemv1: out[16g+r] = row r of group g of the decode-layout groups grp
// (len(out)/16 whole groups) against one token, prefetching pf bytes ahead.
func (l *blkZLayout) gemv1(grp []byte, qs []int8, d []float32, s8 []int32, out []float32, pf int) {
	nb, ng := len(d), len(out)/16
	if ng == 0 || nb == 0 {
		return
	}
	_ = grp[ng*nb*l.block-1]
	_ = qs[32*nb-1]
	_ = s8[nb-1]
	_ = out[16*ng-1]
	l.gemv(&grp[0], ng, &qs[0], &d[0], &s8[0], nb, pf, &out[0])
}

// gemvFew is gemv1 for n = 2 to 8 consecutive tokens, each block read
// (and unpacked) once for all of them: token t's activations at
// qs[t·32·nb:], d[t·nb:], s8[t·nb:], its results at out[t·ostride+j]
// for row j. Each result is bitwise gemv1's.
func (l *blkZLayout) gemvFew(grp []byte, n int, qs []int8, d []float32, s8 []int32, out []float32, ostride, rows, pf int) {
	nb, ng := len(d)/n, rows/16
	if ng == 0 || nb == 0 {
		return
	}
	_ = grp[ng*nb*l.block-1]
	_ = qs[32*nb*n-1]
	_ = s8[nb*n-1]
	_ = out[(n-1)*ostride+16*ng-1]
	l.few[n](&grp[0], ng, &qs[0], 32*nb, &d[0], &s8[0], 4*nb, nb, pf, &out[0], 4*ostride)
}

// blkZChunk is the tokens the next decode-layout kernel call takes when
// left are left: eight at a time, and never one alone after others
// (nine go as seven and two).
func blkZChunk(left int) int {
	c := min(left, len(q4zLayout.few)-1)
	if left-c == 1 {
		c--
	}
	return c
}

// tileBlkLayout computes rows [r0, r1) (whole decode-layout groups) of op, a
// Q4_0 or Q8_0 product, for tokens [t0, t1): decode (fewer than
// blkZFewMax tokens) through the streaming kernels, up to eight tokens per
// call (gemvFew), more tokens through the 16-row VNNI panels that
// tileBlkZ uses (a group unpacks into the same panel bytes as its rows).
func (p *Pool) tileBlkLayout(worker int, op *opPlan, r0, r1, t0, t1 int) {
	s := &p.scratch
	w, rb := op.w, op.rb
	if r0%16 != 0 || (r1-r0)%16 != 0 || r1 > w.dlRows() {
		panic("cpu: decode-layout tile not on whole groups")
	}
	l := blkZ(w.Type)
	nb, cols := w.Cols/qk, w.Cols
	a := &s.act[op.k.act]
	if t1-t0 < blkZFewMax {
		for i := t0; i < t1; {
			n := 1
			if blkZFewOn {
				n = blkZChunk(t1 - i)
			}
			if n == 1 {
				l.gemv1(w.Data[r0*rb:r1*rb], a.qs[i*cols:(i+1)*cols], a.d[i*nb:(i+1)*nb], a.s8[i*nb:(i+1)*nb],
					op.dst[i*w.Rows+r0:i*w.Rows+r1], 16*rb)
			} else {
				l.gemvFew(w.Data[r0*rb:r1*rb], n, a.qs[i*cols:(i+n)*cols], a.d[i*nb:(i+n)*nb], a.s8[i*nb:(i+n)*nb],
					op.dst[i*w.Rows+r0:], w.Rows, r1-r0, 16*rb)
			}
			i += n
		}
		return
	}
	panel := growBytes(&s.panels[worker], nb*panelBlockZ)
	for g := r0; g < r1; g += 16 {
		grp := w.Data[g*rb : (g+16)*rb]
		next := w.Data[min((g+16)*rb, len(w.Data)):min((g+32)*rb, len(w.Data))]
		l.panel(panel, grp, next, nb)
		panelZTokens(op, a, panel, g, t0, t1)
	}
}
