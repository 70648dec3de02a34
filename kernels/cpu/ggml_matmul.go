package cpu

import (
	"oengine/ggml"
)

// GGMLMat holds the activation buffers of GGMLMat.MatMul, reused across calls.
// The zero value is ready; one GGMLMat must not be used by two calls at once.
type GGMLMat struct {
	qs    []int8
	d     []float32
	bsums []int16
	x16   []float32 // F16-rounded activations (F16 weights)
	// AVX512 uses the F16 summation orders of an AVX-512 build (16 lanes:
	// dotF16Order512, tinyBLAS with 16-lane accumulators).
	AVX512 bool
}

// MatMul computes dst[i*w.Rows+r] = dot(row r of w, x[i*w.Cols:(i+1)*w.Cols])
// for i in [0, n) on p's workers, like Pool.MatMul, but with llama.cpp's x86
// AVX2 arithmetic for the GGMLSupported types (ggml_dot.go); other types go
// to p.MatMul. It panics on bad shapes, like MatMul.
func (g *GGMLMat) MatMul(p *Pool, dst []float32, w Matrix, x []float32, n int) {
	if n <= 0 {
		return
	}
	if !GGMLSupported(w.Type) || w.bf16 { // a converted BF16 matrix computes as BF16
		p.MatMul(dst, w, x, n)
		return
	}
	cols := w.Cols
	if cols%w.Type.BlockElems() != 0 || len(x) < n*cols || len(dst) < n*w.Rows || len(w.Data) < w.Rows*w.rowBytes() {
		panic("cpu: GGMLMat.MatMul shapes")
	}
	if w.Type == ggml.TypeF16 {
		g.matMulF16(p, dst, w, x, n)
		return
	}
	g.qs = growI8(g.qs, n*cols)
	kq := w.Type != ggml.TypeQ8_0
	if kq {
		nb := cols / qkK
		g.d = growF32(g.d, n*nb)
		if cap(g.bsums) < n*cols/16 {
			g.bsums = make([]int16, n*cols/16)
		}
		g.bsums = g.bsums[:n*cols/16]
		for i := 0; i < n; i++ {
			quantRowQ8K(x[i*cols:(i+1)*cols], g.qs[i*cols:(i+1)*cols], g.d[i*nb:(i+1)*nb], g.bsums[i*cols/16:(i+1)*cols/16])
		}
	} else {
		nb := cols / qk
		g.d = growF32(g.d, n*nb)
		for i := 0; i < n; i++ {
			quantRowQ8(x[i*cols:(i+1)*cols], g.qs[i*cols:(i+1)*cols], g.d[i*nb:(i+1)*nb], nil)
		}
	}
	gemmRows := 0 // Q4_K: tokens that llama.cpp's repacked gemm computes
	if n > 3 {
		gemmRows = n - n%4
	}
	p.For(w.Rows, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := w.Row(r)
			for i := 0; i < n; i++ {
				qs := g.qs[i*cols : (i+1)*cols]
				var v float32
				switch w.Type {
				case ggml.TypeQ8_0:
					v = ggmlDotQ8_0(row, qs, g.d[i*cols/qk:(i+1)*cols/qk])
				case ggml.TypeQ6_K:
					v = ggmlDotQ6_K(row, qs, g.d[i*cols/qkK:(i+1)*cols/qkK], g.bsums[i*cols/16:(i+1)*cols/16])
				case ggml.TypeQ4_K:
					v = ggmlDotQ4_K(row, qs, g.d[i*cols/qkK:(i+1)*cols/qkK], g.bsums[i*cols/16:(i+1)*cols/16], i < gemmRows)
				}
				dst[i*w.Rows+r] = v
			}
		}
	})
}

// matMulF16 is MatMul for F16 weights: llamafile's tinyBLAS for n >= 2
// (rows a multiple of 4, columns of 8), else ggml_vec_dot_f16.
func (g *GGMLMat) matMulF16(p *Pool, dst []float32, w Matrix, x []float32, n int) {
	cols := w.Cols
	g.x16 = growF32(g.x16, n*cols)
	for i, v := range x[:n*cols] {
		g.x16[i] = roundF16(v)
	}
	gemm := n >= 2 && w.Rows%4 == 0 && cols%8 == 0
	if g.AVX512 {
		gemm = n >= 2 && w.Rows%4 == 0 && cols%16 == 0
	}
	p.For(w.Rows, func(lo, hi int) {
		wr := make([]float32, cols)
		for r := lo; r < hi; r++ {
			if err := Dequantize(ggml.TypeF16, w.Row(r), wr); err != nil {
				panic(err) // unreachable: NewMatrix validated the row size
			}
			for i := 0; i < n; i++ {
				dst[i*w.Rows+r] = ggmlDotF16(wr, g.x16[i*cols:(i+1)*cols], gemm, g.AVX512)
			}
		}
	})
}
