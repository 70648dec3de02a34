package cuda

import (
	"errors"
	"testing"
)

func TestStatusNames(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"success", Result(0), "cuda: CUDA_SUCCESS"},
		{"oom", Result(2), "cuda: CUDA_ERROR_OUT_OF_MEMORY"},
		{"no binary", Result(209), "cuda: CUDA_ERROR_NO_BINARY_FOR_GPU"},
		{"illegal address", Result(700), "cuda: CUDA_ERROR_ILLEGAL_ADDRESS"},
		{"capture invalidated", Result(901), "cuda: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
		{"unknown code", Result(12345), "cuda: CUresult(12345)"},
		{"negative code", Result(-3), "cuda: CUresult(-3)"},
		{"nvrtc", NVRTCResult(6), "cuda: NVRTC_ERROR_COMPILATION"},
		{"nvrtc unknown", NVRTCResult(99), "cuda: nvrtcResult(99)"},
		{"cublas", CublasStatus(13), "cuda: CUBLAS_STATUS_EXECUTION_FAILED"},
		{"cublas unknown", CublasStatus(2), "cuda: cublasStatus_t(2)"},
		{"call", check("cuMemAlloc_v2", 2), "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY"},
		{"nvrtc call", checkNVRTC("nvrtcCompileProgram", 5), "cuda: nvrtcCompileProgram: NVRTC_ERROR_INVALID_OPTION"},
		{"cublas call", checkCublas("cublasGemmEx", 7), "cuda: cublasGemmEx: CUBLAS_STATUS_INVALID_VALUE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	if check("x", 0) != nil || checkNVRTC("x", 0) != nil || checkCublas("x", 0) != nil {
		t.Fatal("success is an error")
	}
	var r Result
	if err := check("cuLaunchKernel", 719); !errors.As(err, &r) || r != 719 {
		t.Fatalf("errors.As Result: %v", err)
	}
	if !errors.Is(check("cuInit", 100), Result(100)) {
		t.Fatal("errors.Is on the code")
	}
	for code, name := range resultNames {
		if Result(code).Name() != name || len(name) < 12 || name[:5] != "CUDA_" {
			t.Fatalf("table entry %d %q", code, name)
		}
	}
}
