package cuda

import (
	"fmt"
	"unsafe"

	"oengine/ggml"
)

// Matrix products for prefill and large decode batches: tensor-core GEMM
// over quantized weights decoded tile by tile (kernels/quant_mma.cu), and
// cuBLAS for F16 and BF16 weights. MatMul (ops.go) picks the path with
// matmulRoute.

// mmaKernels are the gemm_mma_<type> kernels, by weight type.
var mmaKernels = map[ggml.Type]kernelName{
	ggml.TypeF16:  "gemm_mma_f16",
	ggml.TypeQ8_0: "gemm_mma_q8_0",
	ggml.TypeQ4_0: "gemm_mma_q4_0",
	ggml.TypeQ4_K: "gemm_mma_q4_k",
	ggml.TypeQ6_K: "gemm_mma_q6_k",
}

const kF32ToBF16 kernelName = "f32_to_bf16"

func init() {
	registerKernels(kF32ToBF16)
	for _, k := range mmaKernels {
		registerKernels(k)
	}
}

// Tile shape of gemm_mma (MMA_BM, MMA_BN, MMA_THREADS in quant_mma.cu).
const (
	mmaRows    = 128 // weight rows per block
	mmaTokens  = 128 // tokens per block
	mmaThreads = 256
	// mmaMinCC: mma.sync m16n8k16 with F16 inputs needs sm_80.
	mmaMinCC = 80
)

// MMAMinTokens is the batch size from which MatMul runs quantized weights
// through gemm_mma. Below it the GEMV kernels read the weights once per few
// tokens and win: a block tile holds 128 tokens, so at 64 it is half full
// while the GEMV already reads every weight byte 8 times (8 tokens per pass).
const MMAMinTokens = 64

// matmulPath is how MatMul computes one product.
type matmulPath uint8

const (
	pathGemv       matmulPath = iota // typed GEMV kernels, float32 throughout
	pathMMA                          // gemm_mma_<type>: F16 operands on tensor cores, f32 accumulation
	pathCublasF16                    // cuBLAS GemmEx, F16 weights and activations, f32 compute
	pathCublasBF16                   // cuBLAS GemmEx, BF16 weights and activations, f32 compute
)

func (p matmulPath) String() string {
	return [...]string{"gemv", "mma", "cublas-f16", "cublas-bf16"}[p]
}

// act16Bytes is the "gemm_x16" scratch MatMul's GEMM paths need for n
// tokens of cols inputs (the activations as F16 or BF16).
func act16Bytes(n, cols int) uint64 { return uint64(n) * uint64(cols) * 2 }

// GemmMMA computes y [n][w.Rows] = x [n][w.Cols] · Wᵀ on tensor cores: x is
// rounded to F16 once into the "gemm_x16" scratch, then gemm_mma_<type>
// decodes W tile by tile into shared memory as F16 and accumulates in f32.
// It needs sm_80 and W at a 16-byte aligned address (as Alloc returns).
func (s *Stream) GemmMMA(y DevPtr, w Weight, x DevPtr, n int) error {
	k, ok := mmaKernels[w.Type]
	if !ok {
		return fmt.Errorf("cuda: no tensor-core GEMM for %s weights", w.Type)
	}
	if _, err := checkWeight(w.Type, w.Rows, w.Cols); err != nil {
		return err
	}
	if cc := s.info.CC(); cc < mmaMinCC {
		return fmt.Errorf("cuda: tensor-core GEMM needs sm_%d, device is sm_%d", mmaMinCC, cc)
	}
	if w.Ptr%16 != 0 { // the tile decoders make 16-byte loads (Alloc gives 256-byte alignment)
		return fmt.Errorf("cuda: tensor-core GEMM needs 16-byte aligned weights, %s weight at %#x", w.Type, uint64(w.Ptr))
	}
	if n <= 0 {
		return nil
	}
	x16, err := s.scratchBuf("gemm_x16", act16Bytes(n, w.Cols))
	if err != nil {
		return err
	}
	if err := s.ToF16(x16, x, n*w.Cols); err != nil {
		return err
	}
	grid := Dim3{uint32(blocks(w.Rows, mmaRows)), uint32(blocks(n, mmaTokens)), 1}
	return s.launch(k, grid, D1(mmaThreads), 0, P(w.Ptr), U64(uint64(w.RowBytes())), P(x16), P(y),
		I(w.Rows), I(w.Cols), I(n))
}

// ToBF16 converts n float32 values at x to BF16 at y (nearest, ties to even).
func (s *Stream) ToBF16(y, x DevPtr, n int) error {
	return s.launch(kF32ToBF16, D1(blocks(n, 256)), D1(256), 0, P(x), P(y), U64(uint64(n)))
}

// GemmBF16 computes y [n][rows] (f32) = xbf [n][cols] · wbfᵀ with wbf [rows]
// [cols] and xbf in BF16, f32 accumulation (cublasGemmEx, CUDA_R_16BF);
// the operand layout is GemmF16's. BF16 keeps the weights' full exponent
// range: no F16 overflow.
func (s *Stream) GemmBF16(y, wbf, xbf DevPtr, rows, cols, n int) error {
	if s.blas == nil {
		return ErrNoCUBLAS
	}
	alpha, beta := float32(1), float32(0)
	r := s.blas.cublasGemmEx(s.blasH, cublasOpT, cublasOpN, int32(rows), int32(n), int32(cols),
		unsafe.Pointer(&alpha), wbf, cudaR16BF, int32(cols), xbf, cudaR16BF, int32(cols),
		unsafe.Pointer(&beta), y, cudaR32F, int32(rows), cublasCompute32F, cublasGemmDefault)
	return checkCublas("cublasGemmEx", r)
}

// gemmCublas runs MatMul's cuBLAS paths: the activations are converted to
// the weights' 16-bit type in the "gemm_x16" scratch.
func (s *Stream) gemmCublas(y DevPtr, w Weight, x DevPtr, n int, bf16 bool) error {
	if _, err := checkWeight(w.Type, w.Rows, w.Cols); err != nil {
		return err
	}
	x16, err := s.scratchBuf("gemm_x16", act16Bytes(n, w.Cols))
	if err != nil {
		return err
	}
	if bf16 {
		if err := s.ToBF16(x16, x, n*w.Cols); err != nil {
			return err
		}
		return s.GemmBF16(y, w.Ptr, x16, w.Rows, w.Cols, n)
	}
	if err := s.ToF16(x16, x, n*w.Cols); err != nil {
		return err
	}
	return s.GemmF16(y, w.Ptr, x16, w.Rows, w.Cols, n)
}
