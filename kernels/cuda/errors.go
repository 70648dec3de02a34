package cuda

import (
	"errors"
	"fmt"
)

// Sentinel errors a caller reacts to (the CLI's --device auto falls back to
// the CPU on any of them and logs which one).
var (
	// ErrNoDriver: libcuda.so.1 could not be found or loaded.
	ErrNoDriver = errors.New("cuda: no CUDA driver (libcuda.so.1 not found or not loadable)")
	// ErrNoDevice: the driver loaded but reports no usable device, or the
	// requested ordinal does not exist.
	ErrNoDevice = errors.New("cuda: no CUDA device")
	// ErrDriverTooOld: the driver's CUDA version is below MinDriverVersion or
	// lacks a symbol oengine needs.
	ErrDriverTooOld = errors.New("cuda: CUDA driver too old")
	// ErrNoNVRTC: libnvrtc (13 or 12) could not be found or loaded.
	ErrNoNVRTC = errors.New("cuda: NVRTC runtime compiler not found (libnvrtc.so.13 or .12)")
	// ErrNoCUBLAS: libcublas/libcublasLt (13 or 12) could not be found or loaded.
	ErrNoCUBLAS = errors.New("cuda: cuBLAS not found (libcublas.so.13 or .12)")
	// ErrClosed: the Device was closed.
	ErrClosed = errors.New("cuda: device closed")
)

// MinDriverVersion is the oldest driver API version accepted (cuDriverGetVersion
// encodes 1000*major + 10*minor): CUDA 12.0.
const MinDriverVersion = 12000

// Result is a CUresult status of the driver API. Its Error names the code
// (CUDA_ERROR_OUT_OF_MEMORY) as cuda.h does.
type Result int32

// CUresult values the code reacts to.
const (
	resultSuccess            Result = 0
	resultNotInitialized     Result = 3
	resultStubLibrary        Result = 34
	resultNoDevice           Result = 100
	resultInvalidDevice      Result = 101
	resultInvalidImage       Result = 200
	resultNoBinaryForGPU     Result = 209
	resultInvalidPTX         Result = 218
	resultUnsupportedPTX     Result = 222
	resultNotFound           Result = 500
	resultNotReady           Result = 600
	resultOutOfMemory        Result = 2
	resultSystemDriverMismat Result = 803
	resultCompatNotSupported Result = 804
)

// resultNames is the CUresult enumeration of cuda.h (CUDA 12.x/13.x).
var resultNames = map[Result]string{
	0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
	3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED",
	5: "CUDA_ERROR_PROFILER_DISABLED", 6: "CUDA_ERROR_PROFILER_NOT_INITIALIZED",
	7: "CUDA_ERROR_PROFILER_ALREADY_STARTED", 8: "CUDA_ERROR_PROFILER_ALREADY_STOPPED",
	34: "CUDA_ERROR_STUB_LIBRARY", 46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
	100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE", 102: "CUDA_ERROR_DEVICE_NOT_LICENSED",
	200: "CUDA_ERROR_INVALID_IMAGE", 201: "CUDA_ERROR_INVALID_CONTEXT",
	202: "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", 205: "CUDA_ERROR_MAP_FAILED",
	206: "CUDA_ERROR_UNMAP_FAILED", 207: "CUDA_ERROR_ARRAY_IS_MAPPED",
	208: "CUDA_ERROR_ALREADY_MAPPED", 209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	210: "CUDA_ERROR_ALREADY_ACQUIRED", 211: "CUDA_ERROR_NOT_MAPPED",
	212: "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", 213: "CUDA_ERROR_NOT_MAPPED_AS_POINTER",
	214: "CUDA_ERROR_ECC_UNCORRECTABLE", 215: "CUDA_ERROR_UNSUPPORTED_LIMIT",
	216: "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", 217: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
	218: "CUDA_ERROR_INVALID_PTX", 219: "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT",
	220: "CUDA_ERROR_NVLINK_UNCORRECTABLE", 221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", 223: "CUDA_ERROR_JIT_COMPILATION_DISABLED",
	224: "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", 225: "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC",
	226: "CUDA_ERROR_CONTAINED",
	300: "CUDA_ERROR_INVALID_SOURCE", 301: "CUDA_ERROR_FILE_NOT_FOUND",
	302: "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", 303: "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",
	304: "CUDA_ERROR_OPERATING_SYSTEM",
	400: "CUDA_ERROR_INVALID_HANDLE", 401: "CUDA_ERROR_ILLEGAL_STATE", 402: "CUDA_ERROR_LOSSY_QUERY",
	500: "CUDA_ERROR_NOT_FOUND", 600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS", 701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	702: "CUDA_ERROR_LAUNCH_TIMEOUT", 703: "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING",
	704: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", 705: "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
	708: "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", 709: "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	710: "CUDA_ERROR_ASSERT", 711: "CUDA_ERROR_TOO_MANY_PEERS",
	712: "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", 713: "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
	714: "CUDA_ERROR_HARDWARE_STACK_ERROR", 715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	716: "CUDA_ERROR_MISALIGNED_ADDRESS", 717: "CUDA_ERROR_INVALID_ADDRESS_SPACE",
	718: "CUDA_ERROR_INVALID_PC", 719: "CUDA_ERROR_LAUNCH_FAILED",
	720: "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", 721: "CUDA_ERROR_TENSOR_MEMORY_LEAK",
	800: "CUDA_ERROR_NOT_PERMITTED", 801: "CUDA_ERROR_NOT_SUPPORTED",
	802: "CUDA_ERROR_SYSTEM_NOT_READY", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", 805: "CUDA_ERROR_MPS_CONNECTION_FAILED",
	806: "CUDA_ERROR_MPS_RPC_FAILURE", 807: "CUDA_ERROR_MPS_SERVER_NOT_READY",
	808: "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", 809: "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",
	810: "CUDA_ERROR_MPS_CLIENT_TERMINATED", 811: "CUDA_ERROR_CDP_NOT_SUPPORTED",
	812: "CUDA_ERROR_CDP_VERSION_MISMATCH",
	900: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", 901: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	902: "CUDA_ERROR_STREAM_CAPTURE_MERGE", 903: "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
	904: "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", 905: "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
	906: "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", 907: "CUDA_ERROR_CAPTURED_EVENT",
	908: "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", 909: "CUDA_ERROR_TIMEOUT",
	910: "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", 911: "CUDA_ERROR_EXTERNAL_DEVICE",
	912: "CUDA_ERROR_INVALID_CLUSTER_SIZE", 913: "CUDA_ERROR_FUNCTION_NOT_LOADED",
	914: "CUDA_ERROR_INVALID_RESOURCE_TYPE", 915: "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION",
	916: "CUDA_ERROR_KEY_ROTATION",
	999: "CUDA_ERROR_UNKNOWN",
}

// Name returns the cuda.h name of r, or CUresult(N) for a code not in the table.
func (r Result) Name() string {
	if n, ok := resultNames[r]; ok {
		return n
	}
	return fmt.Sprintf("CUresult(%d)", int32(r))
}

func (r Result) Error() string { return "cuda: " + r.Name() }

// CallError is a failed driver, NVRTC or cuBLAS call: which function, and
// its status (a Result, NVRTCResult or CublasStatus, reachable with
// errors.As).
type CallError struct {
	Func   string
	Status error
}

func (e *CallError) Error() string { return fmt.Sprintf("cuda: %s: %s", e.Func, statusName(e.Status)) }
func (e *CallError) Unwrap() error { return e.Status }

func statusName(err error) string {
	switch s := err.(type) {
	case Result:
		return s.Name()
	case NVRTCResult:
		return s.Name()
	case CublasStatus:
		return s.Name()
	}
	return err.Error()
}

// check turns a CUresult into nil or a *CallError naming fn.
func check(fn string, r int32) error {
	if r == 0 {
		return nil
	}
	return &CallError{Func: fn, Status: Result(r)}
}

// NVRTCResult is an nvrtcResult status.
type NVRTCResult int32

var nvrtcNames = map[NVRTCResult]string{
	0: "NVRTC_SUCCESS", 1: "NVRTC_ERROR_OUT_OF_MEMORY", 2: "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	3: "NVRTC_ERROR_INVALID_INPUT", 4: "NVRTC_ERROR_INVALID_PROGRAM", 5: "NVRTC_ERROR_INVALID_OPTION",
	6: "NVRTC_ERROR_COMPILATION", 7: "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	8: "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION", 9: "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	10: "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID", 11: "NVRTC_ERROR_INTERNAL_ERROR",
	12: "NVRTC_ERROR_TIME_FILE_WRITE_FAILED", 13: "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED",
	14: "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED", 15: "NVRTC_ERROR_PCH_CREATE",
	16: "NVRTC_ERROR_CANCELLED", 17: "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED",
}

// Name returns the nvrtc.h name of r.
func (r NVRTCResult) Name() string {
	if n, ok := nvrtcNames[r]; ok {
		return n
	}
	return fmt.Sprintf("nvrtcResult(%d)", int32(r))
}

func (r NVRTCResult) Error() string { return "cuda: " + r.Name() }

func checkNVRTC(fn string, r int32) error {
	if r == 0 {
		return nil
	}
	return &CallError{Func: fn, Status: NVRTCResult(r)}
}

// CublasStatus is a cublasStatus_t.
type CublasStatus int32

var cublasNames = map[CublasStatus]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// Name returns the cublas_api.h name of s.
func (s CublasStatus) Name() string {
	if n, ok := cublasNames[s]; ok {
		return n
	}
	return fmt.Sprintf("cublasStatus_t(%d)", int32(s))
}

func (s CublasStatus) Error() string { return "cuda: " + s.Name() }

func checkCublas(fn string, r int32) error {
	if r == 0 {
		return nil
	}
	return &CallError{Func: fn, Status: CublasStatus(r)}
}

// CompileError is an NVRTC compilation failure with the compiler's log.
type CompileError struct {
	Options []string
	Log     string
	Err     error
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("cuda: NVRTC compile %v: %v\n%s", e.Options, e.Err, e.Log)
}
func (e *CompileError) Unwrap() error { return e.Err }
