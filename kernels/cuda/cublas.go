package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// cublasAPI is cuBLAS (libcublas.so.13 or .12) as Go function fields. Every
// field returns the cublasStatus_t as a signed int32.
type cublasAPI struct {
	// cublasStatus_t cublasCreate_v2(cublasHandle_t *handle);
	cublasCreate func(h *uintptr) int32
	// cublasStatus_t cublasDestroy_v2(cublasHandle_t handle);
	cublasDestroy func(h uintptr) int32
	// cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int *version);
	cublasGetVersion func(h uintptr, v *int32) int32
	// cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId);
	cublasSetStream func(h uintptr, s cuStream) int32
	// cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t workspaceSizeInBytes);
	cublasSetWorkspace func(h uintptr, ws DevPtr, bytes uint64) int32
	// cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
	cublasSetMathMode func(h uintptr, mode int32) int32
	// cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
	//     cublasOperation_t transb, int m, int n, int k, const void *alpha,
	//     const void *A, cudaDataType_t Atype, int lda, const void *B,
	//     cudaDataType_t Btype, int ldb, const void *beta, void *C,
	//     cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
	//     cublasGemmAlgo_t algo);
	cublasGemmEx func(h uintptr, transa, transb int32, m, n, k int32, alpha unsafe.Pointer,
		a DevPtr, atype int32, lda int32, b DevPtr, btype int32, ldb int32, beta unsafe.Pointer,
		c DevPtr, ctype int32, ldc int32, compute int32, algo int32) int32
}

// cuBLAS and CUDA library enums (cublas_api.h, library_types.h).
const (
	cublasOpN          = 0  // CUBLAS_OP_N
	cublasOpT          = 1  // CUBLAS_OP_T
	cudaR32F           = 0  // CUDA_R_32F
	cudaR16F           = 2  // CUDA_R_16F
	cudaR16BF          = 14 // CUDA_R_16BF
	cublasCompute32F   = 68 // CUBLAS_COMPUTE_32F
	cublasGemmDefault  = -1 // CUBLAS_GEMM_DEFAULT
	cublasDefaultMath  = 0  // CUBLAS_DEFAULT_MATH
	cublasWorkspaceLen = 32 << 20
)

func (c *cublasAPI) symbols() []symbol {
	return []symbol{
		{"cublasCreate_v2", &c.cublasCreate, false},
		{"cublasDestroy_v2", &c.cublasDestroy, false},
		{"cublasGetVersion_v2", &c.cublasGetVersion, false},
		{"cublasSetStream_v2", &c.cublasSetStream, false},
		{"cublasSetWorkspace_v2", &c.cublasSetWorkspace, false},
		{"cublasSetMathMode", &c.cublasSetMathMode, false},
		{"cublasGemmEx", &c.cublasGemmEx, false},
	}
}

var (
	cublasOnce sync.Once
	cublasMain *cublasAPI
	cublasErr  error
)

// loadCublas loads cuBLASLt then cuBLAS once per process (cuBLAS needs
// cuBLASLt; loading it first lets the loader find it even in a pip folder
// that is not on the library path).
func loadCublas(driverVersion int) (*cublasAPI, error) {
	cublasOnce.Do(func() {
		cublasMain, cublasErr = loadCublasFrom(defaultSearchEnv(), driverVersion, dlopenNow, dlsym)
	})
	return cublasMain, cublasErr
}

func loadCublasFrom(e searchEnv, driverVersion int, open openFunc, lookup symLookup) (*cublasAPI, error) {
	if _, _, err := openLib(specCublasLt.forDriver(driverVersion), e, open); err != nil {
		return nil, err
	}
	h, path, err := openLib(specCublas.forDriver(driverVersion), e, open)
	if err != nil {
		return nil, err
	}
	api := &cublasAPI{}
	if err := bindSymbols(h, lookup, api.symbols()); err != nil {
		return nil, errors.Join(ErrNoCUBLAS, fmt.Errorf("cuda: %s: %w", path, err))
	}
	return api, nil
}
