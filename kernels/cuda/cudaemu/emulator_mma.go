package cudaemu

import (
	"unsafe"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/kernels/cuda"
)

// Twins of kernels/quant_mma.cu: the tensor-core GEMM over typed weights
// and the BF16 conversion of activations.

func init() {
	registerPrefix("gemm_mma_", gemmMMA)
	register("f32_to_bf16", f32ToBF16)
}

// gemmMMA: gemm_mma_<type>(W, rowBytes, x16, y, rows, cols, n) computes
// y [n][rows] = x16 [n][cols] · f16(W)ᵀ: the weights decoded and rounded to
// F16, the activations already F16, products summed in float32.
func gemmMMA(e *emulator, k string, grid, block cuda.Dim3, a []cuda.Arg) error {
	typ := typeOf(k, "gemm_mma_")
	rows, cols, n := a[4].Int(), a[5].Int(), a[6].Int()
	w, err := e.mmaMatrix(typ, a[0].Ptr(), a[1].Uint(), rows, cols)
	if err != nil {
		return err
	}
	x16, y := view[uint16](e, a[2].Ptr()), view[float32](e, a[3].Ptr())
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = cpu.F16ToF32(x16[i])
	}
	e.pool.MatMul(y[:n*rows], w, x, n)
	return nil
}

// mmaMatrix returns the weights at p rounded to F16 as the kernel's tile
// decoder stores them, as an F32 matrix cached in e.mma (weights never
// change; the fake never reuses an address).
func (e *emulator) mmaMatrix(typ ggml.Type, p cuda.DevPtr, rb, rows, cols int) (cpu.Matrix, error) {
	e.mu.Lock()
	m, ok := e.mma[p]
	e.mu.Unlock()
	if ok && m.Rows == rows && m.Cols == cols {
		return m, nil
	}
	w := e.weights(typ, p, rb, rows, cols)
	r := make([]float32, len(w))
	for i, v := range w {
		r[i] = cpu.F16ToF32(cpu.F32ToF16(v))
	}
	m, err := cpu.NewMatrix(ggml.TypeF32, rows, cols, unsafe.Slice((*byte)(unsafe.Pointer(&r[0])), 4*len(r)))
	if err != nil {
		return m, err
	}
	e.mu.Lock()
	if e.mma == nil {
		e.mma = map[cuda.DevPtr]cpu.Matrix{}
	}
	e.mma[p] = m
	e.mu.Unlock()
	return m, nil
}

// f32ToBF16: f32_to_bf16(x, y, n) writes y[i] = bf16(x[i]).
func f32ToBF16(e *emulator, k string, grid, block cuda.Dim3, a []cuda.Arg) error {
	x, y := view[float32](e, a[0].Ptr()), view[uint16](e, a[1].Ptr())
	for i := 0; i < a[2].Uint(); i++ {
		y[i] = cpu.F32ToBF16(x[i])
	}
	return nil
}
