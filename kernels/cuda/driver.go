package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DevPtr is a CUdeviceptr: an address in device memory.
type DevPtr uint64

// Opaque driver handles (pointers owned by the driver).
type (
	cuContext  uintptr // CUcontext
	cuModule   uintptr // CUmodule
	cuFunction uintptr // CUfunction
	cuStream   uintptr // CUstream
	cuGraph    uintptr // CUgraph
	cuGraphExc uintptr // CUgraphExec
)

// CUdevice_attribute values used here (cuda.h).
const (
	attrMaxThreadsPerBlock     = 1
	attrMaxSharedPerBlock      = 8
	attrMultiprocessorCount    = 16
	attrMemoryClockRate        = 36 // kHz
	attrGlobalMemoryBusWidth   = 37 // bits
	attrL2CacheSize            = 38
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
	attrMaxSharedPerBlockOptin = 97
)

// driverAPI is the driver API (libcuda.so.1) as Go function fields, so that
// tests substitute fakes. Every field returns the CUresult as a signed int32.
type driverAPI struct {
	// CUresult cuInit(unsigned int Flags);
	cuInit func(flags uint32) int32
	// CUresult cuDriverGetVersion(int *driverVersion);
	cuDriverGetVersion func(version *int32) int32
	// CUresult cuDeviceGetCount(int *count);
	cuDeviceGetCount func(count *int32) int32
	// CUresult cuDeviceGet(CUdevice *device, int ordinal);
	cuDeviceGet func(dev *int32, ordinal int32) int32
	// CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
	cuDeviceGetName func(name *byte, n int32, dev int32) int32
	// CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev);
	cuDeviceGetAttribute func(v *int32, attr int32, dev int32) int32
	// CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
	cuDeviceTotalMem func(bytes *uint64, dev int32) int32
	// CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
	cuDevicePrimaryCtxRetain func(ctx *cuContext, dev int32) int32
	// CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
	cuDevicePrimaryCtxRelease func(dev int32) int32
	// CUresult cuCtxSetCurrent(CUcontext ctx);
	cuCtxSetCurrent func(ctx cuContext) int32
	// CUresult cuCtxSynchronize(void);
	cuCtxSynchronize func() int32
	// CUresult cuMemGetInfo_v2(size_t *free, size_t *total);
	cuMemGetInfo func(free, total *uint64) int32
	// CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
	cuMemAlloc func(p *DevPtr, bytes uint64) int32
	// CUresult cuMemFree_v2(CUdeviceptr dptr);
	cuMemFree func(p DevPtr) int32
	// CUresult cuMemAllocHost_v2(void **pp, size_t bytesize);
	cuMemAllocHost func(pp *unsafe.Pointer, bytes uint64) int32
	// CUresult cuMemFreeHost(void *p);
	cuMemFreeHost func(p unsafe.Pointer) int32
	// CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount);
	cuMemcpyHtoD func(dst DevPtr, src unsafe.Pointer, bytes uint64) int32
	// CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount);
	cuMemcpyDtoH func(dst unsafe.Pointer, src DevPtr, bytes uint64) int32
	// CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream);
	cuMemcpyHtoDAsync func(dst DevPtr, src unsafe.Pointer, bytes uint64, s cuStream) int32
	// CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream);
	cuMemcpyDtoHAsync func(dst unsafe.Pointer, src DevPtr, bytes uint64, s cuStream) int32
	// CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream);
	cuMemcpyDtoDAsync func(dst, src DevPtr, bytes uint64, s cuStream) int32
	// CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);
	cuMemsetD8Async func(dst DevPtr, v uint8, n uint64, s cuStream) int32
	// CUresult cuModuleLoadData(CUmodule *module, const void *image);
	cuModuleLoadData func(m *cuModule, image unsafe.Pointer) int32
	// CUresult cuModuleUnload(CUmodule hmod);
	cuModuleUnload func(m cuModule) int32
	// CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
	cuModuleGetFunction func(f *cuFunction, m cuModule, name string) int32
	// CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value);
	cuFuncSetAttribute func(f cuFunction, attr int32, v int32) int32
	// CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
	//     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
	//     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
	//     void **kernelParams, void **extra);
	// Bound through purego.SyscallN (no reflection per launch), see bindLaunch.
	cuLaunchKernel func(f cuFunction, gx, gy, gz, bx, by, bz, shmem uint32, s cuStream, params, extra unsafe.Pointer) int32
	// CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags);
	cuStreamCreate func(s *cuStream, flags uint32) int32
	// CUresult cuStreamDestroy_v2(CUstream hStream);
	cuStreamDestroy func(s cuStream) int32
	// CUresult cuStreamSynchronize(CUstream hStream);
	cuStreamSynchronize func(s cuStream) int32
	// CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode);
	cuStreamBeginCapture func(s cuStream, mode int32) int32
	// CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph);
	cuStreamEndCapture func(s cuStream, g *cuGraph) int32
	// CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags);
	cuGraphInstantiateWithFlags func(e *cuGraphExc, g cuGraph, flags uint64) int32
	// CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream);
	cuGraphLaunch func(e cuGraphExc, s cuStream) int32
	// CUresult cuGraphExecDestroy(CUgraphExec hGraphExec);
	cuGraphExecDestroy func(e cuGraphExc) int32
	// CUresult cuGraphDestroy(CUgraph hGraph);
	cuGraphDestroy func(g cuGraph) int32
}

// Stream and capture flags (cuda.h).
const (
	streamNonBlocking        = 0x1 // CU_STREAM_NON_BLOCKING
	captureModeThreadLocal   = 1   // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
	funcAttrMaxDynamicShared = 8   // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
)

// symbols lists the exported name of every field. The _v2 names are the
// ones cuda.h's macros select for the plain names since CUDA 4/10.
func (d *driverAPI) symbols() []symbol {
	return []symbol{
		{"cuInit", &d.cuInit, false},
		{"cuDriverGetVersion", &d.cuDriverGetVersion, false},
		{"cuDeviceGetCount", &d.cuDeviceGetCount, false},
		{"cuDeviceGet", &d.cuDeviceGet, false},
		{"cuDeviceGetName", &d.cuDeviceGetName, false},
		{"cuDeviceGetAttribute", &d.cuDeviceGetAttribute, false},
		{"cuDeviceTotalMem_v2", &d.cuDeviceTotalMem, false},
		{"cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain, false},
		{"cuDevicePrimaryCtxRelease_v2", &d.cuDevicePrimaryCtxRelease, false},
		{"cuCtxSetCurrent", &d.cuCtxSetCurrent, false},
		{"cuCtxSynchronize", &d.cuCtxSynchronize, false},
		{"cuMemGetInfo_v2", &d.cuMemGetInfo, false},
		{"cuMemAlloc_v2", &d.cuMemAlloc, false},
		{"cuMemFree_v2", &d.cuMemFree, false},
		{"cuMemAllocHost_v2", &d.cuMemAllocHost, false},
		{"cuMemFreeHost", &d.cuMemFreeHost, false},
		{"cuMemcpyHtoD_v2", &d.cuMemcpyHtoD, false},
		{"cuMemcpyDtoH_v2", &d.cuMemcpyDtoH, false},
		{"cuMemcpyHtoDAsync_v2", &d.cuMemcpyHtoDAsync, false},
		{"cuMemcpyDtoHAsync_v2", &d.cuMemcpyDtoHAsync, false},
		{"cuMemcpyDtoDAsync_v2", &d.cuMemcpyDtoDAsync, false},
		{"cuMemsetD8Async", &d.cuMemsetD8Async, false},
		{"cuModuleLoadData", &d.cuModuleLoadData, false},
		{"cuModuleUnload", &d.cuModuleUnload, false},
		{"cuModuleGetFunction", &d.cuModuleGetFunction, false},
		{"cuFuncSetAttribute", &d.cuFuncSetAttribute, false},
		{"cuStreamCreate", &d.cuStreamCreate, false},
		{"cuStreamDestroy_v2", &d.cuStreamDestroy, false},
		{"cuStreamSynchronize", &d.cuStreamSynchronize, false},
		{"cuStreamBeginCapture_v2", &d.cuStreamBeginCapture, false},
		{"cuStreamEndCapture", &d.cuStreamEndCapture, false},
		{"cuGraphInstantiateWithFlags", &d.cuGraphInstantiateWithFlags, false},
		{"cuGraphLaunch", &d.cuGraphLaunch, false},
		{"cuGraphExecDestroy", &d.cuGraphExecDestroy, false},
		{"cuGraphDestroy", &d.cuGraphDestroy, false},
	}
}

// bindLaunch binds cuLaunchKernel to a direct purego.SyscallN call: eleven
// integer-class arguments, no float registers, no per-call reflection.
func (d *driverAPI) bindLaunch(addr uintptr) {
	d.cuLaunchKernel = func(f cuFunction, gx, gy, gz, bx, by, bz, shmem uint32, s cuStream, params, extra unsafe.Pointer) int32 {
		r, _, _ := purego.SyscallN(addr, uintptr(f),
			uintptr(gx), uintptr(gy), uintptr(gz), uintptr(bx), uintptr(by), uintptr(bz),
			uintptr(shmem), uintptr(s), uintptr(params), uintptr(extra))
		return int32(uint32(r))
	}
}

// loadDriverFrom opens libcuda and binds every symbol. A missing symbol means
// a driver older than the API oengine calls: ErrDriverTooOld.
func loadDriverFrom(e searchEnv, open openFunc, lookup symLookup) (*driverAPI, string, error) {
	h, path, err := openLib(specDriver, e, open)
	if err != nil {
		return nil, "", err
	}
	d := &driverAPI{}
	if err := bindSymbols(h, lookup, d.symbols()); err != nil {
		return nil, path, fmt.Errorf("%w: %s: %v", ErrDriverTooOld, path, err)
	}
	addr, err := lookup(h, "cuLaunchKernel")
	if err != nil || addr == 0 {
		return nil, path, fmt.Errorf("%w: %s: no cuLaunchKernel", ErrDriverTooOld, path)
	}
	d.bindLaunch(addr)
	return d, path, nil
}

// driverState is the process-wide driver: loaded and initialised once.
type driverState struct {
	api     *driverAPI
	path    string
	version int // cuDriverGetVersion
	count   int // devices
	err     error
}

var (
	driverOnce sync.Once
	driverMain driverState
)

// loadDriver returns the process-wide initialised driver (lazily, once).
func loadDriver() (*driverState, error) {
	driverOnce.Do(func() {
		api, path, err := loadDriverFrom(defaultSearchEnv(), dlopenNow, dlsym)
		if err != nil {
			driverMain.err = err
			return
		}
		driverMain.api, driverMain.path = api, path
		driverMain.version, driverMain.count, driverMain.err = initDriver(api)
	})
	if driverMain.err != nil {
		return nil, driverMain.err
	}
	return &driverMain, nil
}

// initDriver runs cuInit and checks the version and the device count,
// mapping the failures to the sentinel errors.
func initDriver(d *driverAPI) (version, count int, err error) {
	if r := d.cuInit(0); r != 0 {
		switch Result(r) {
		case resultNoDevice, resultInvalidDevice:
			return 0, 0, fmt.Errorf("%w: %w", ErrNoDevice, &CallError{"cuInit", Result(r)})
		case resultStubLibrary, resultSystemDriverMismat, resultCompatNotSupported:
			return 0, 0, fmt.Errorf("%w: %w", ErrNoDriver, &CallError{"cuInit", Result(r)})
		}
		return 0, 0, fmt.Errorf("%w: %w", ErrNoDevice, &CallError{"cuInit", Result(r)})
	}
	var v int32
	if err := check("cuDriverGetVersion", d.cuDriverGetVersion(&v)); err != nil {
		return 0, 0, err
	}
	if v < MinDriverVersion {
		return int(v), 0, fmt.Errorf("%w: driver supports CUDA %d.%d, need %d.%d",
			ErrDriverTooOld, v/1000, v%1000/10, MinDriverVersion/1000, MinDriverVersion%1000/10)
	}
	var n int32
	if err := check("cuDeviceGetCount", d.cuDeviceGetCount(&n)); err != nil {
		return int(v), 0, err
	}
	if n <= 0 {
		return int(v), 0, fmt.Errorf("%w: the driver reports 0 devices", ErrNoDevice)
	}
	return int(v), int(n), nil
}

// Info describes one device.
type Info struct {
	Index         int
	Name          string
	Major, Minor  int    // compute capability
	TotalMem      uint64 // bytes
	SMs           int
	DriverVersion int     // cuDriverGetVersion, e.g. 12080
	Bandwidth     float64 // nominal bytes/s from memory clock and bus width (0 if unknown)
	DriverPath    string
}

// CC returns the compute capability as an integer, e.g. 90 for sm_90.
func (i Info) CC() int { return i.Major*10 + i.Minor }

func (i Info) String() string {
	return fmt.Sprintf("cuda:%d %s (sm_%d, %d SMs, %.1f GiB, driver %d.%d)", i.Index, i.Name,
		i.CC(), i.SMs, float64(i.TotalMem)/(1<<30), i.DriverVersion/1000, i.DriverVersion%1000/10)
}

// deviceInfo queries device ordinal idx (the driver must be initialised).
func deviceInfo(d *driverAPI, idx, version, count int) (Info, error) {
	if idx < 0 || idx >= count {
		return Info{}, fmt.Errorf("%w: device %d requested, %d present", ErrNoDevice, idx, count)
	}
	var dev int32
	if err := check("cuDeviceGet", d.cuDeviceGet(&dev, int32(idx))); err != nil {
		return Info{}, errors.Join(ErrNoDevice, err)
	}
	info := Info{Index: idx, DriverVersion: version}
	var name [256]byte
	if err := check("cuDeviceGetName", d.cuDeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return Info{}, err
	}
	info.Name = cString(name[:])
	attr := func(a int32) (int, error) {
		var v int32
		err := check("cuDeviceGetAttribute", d.cuDeviceGetAttribute(&v, a, dev))
		return int(v), err
	}
	var err error
	if info.Major, err = attr(attrComputeCapabilityMajor); err != nil {
		return Info{}, err
	}
	if info.Minor, err = attr(attrComputeCapabilityMinor); err != nil {
		return Info{}, err
	}
	if info.SMs, err = attr(attrMultiprocessorCount); err != nil {
		return Info{}, err
	}
	clock, err1 := attr(attrMemoryClockRate)
	bus, err2 := attr(attrGlobalMemoryBusWidth)
	if err1 == nil && err2 == nil {
		// DDR: two transfers per clock; clock in kHz, bus in bits.
		info.Bandwidth = 2 * float64(clock) * 1e3 * float64(bus) / 8
	}
	if err := check("cuDeviceTotalMem_v2", d.cuDeviceTotalMem(&info.TotalMem, dev)); err != nil {
		return Info{}, err
	}
	return info, nil
}

// cString returns the NUL-terminated prefix of b.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
