// Package cuda is oengine's NVIDIA GPU backend, built without cgo, build
// tags or CUDA headers: the driver API (libcuda.so.1), NVRTC
// (libnvrtc.so.13/.12) and cuBLAS (libcublas.so.13/.12 with cuBLASLt) are
// loaded at run time through github.com/ebitengine/purego.
//
// Layers, bottom up:
//
//   - discover.go, dl.go: which library files to try (env overrides, the
//     soname, /usr/local/cuda, pip nvidia/*/lib folders) and binding their
//     symbols; missing pieces become the sentinel errors ErrNoDriver,
//     ErrNoDevice, ErrDriverTooOld, ErrNoNVRTC, ErrNoCUBLAS.
//   - driver.go, nvrtc.go, cublas.go: the C functions as Go function fields
//     (prototypes quoted; tests substitute fakes); errors.go names every
//     CUresult / nvrtcResult / cublasStatus_t.
//   - kernels/*.cu (embedded, compiled by NVRTC for the device's sm_XY at
//     start-up, cached on disk by cache.go) with extern "C" entry points
//     listed in kernels.go.
//   - device.go, stream.go: a Device owns one context on one goroutine
//     locked to its OS thread; Device.Do runs closures there with the
//     *Stream, which allocates, copies, launches (parameters in a pinned
//     block, cuLaunchKernel through purego.SyscallN) and captures CUDA graphs.
//   - ops.go: the operations with their shapes (GEMV per weight type, RMSNorm,
//     RoPE fused with the paged KV write, paged attention, sampling, ...);
//     ops_fattn.go: prefill attention on tensor cores (kernels/fattn.cu,
//     twin AttnPrefillMMARef in fattn_ref.go).
//   - probe.go: Probe / Usable / ParseDevice / Select for --device
//     auto|cpu|cuda[:N].
//
// The llama-family forward pass that strings these operations together
// lives above the kernels, in the model room (model/gpu).
//
// Reference twins: kernels/cpu for the numeric kernels, ref.go for
// sampling. Tests without a GPU use the in-memory fake driver (fake.go,
// OpenFake) with the CPU emulator of the kernels in package cudaemu, which
// the model and engine tests use too; the GPU tests (gpu_*_test.go) skip
// without a GPU and fail when REQUIRE_GPU=1. scripts/gpu-check.sh runs them
// on a GPU machine.
package cuda
