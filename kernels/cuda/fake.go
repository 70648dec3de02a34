package cuda

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// An emulated device for tests above the kernels (the model room, the
// engine): the in-memory fake driver below plus an executor that computes
// what each kernel computes on the CPU (package cudaemu holds it). Nothing
// here runs unless a caller asks for it: production code opens devices
// through Open.

// KernelFunc executes one kernel launch on the fake device's memory:
// kernel is the extern "C" name, args in the kernel's signature order.
type KernelFunc func(mem *FakeMemory, kernel string, grid, block Dim3, shmem uint32, args []Arg) error

// FakeMemory is the emulated device's memory, for a KernelFunc.
type FakeMemory struct{ f *fakeDriver }

// Bytes returns the bytes from device address p to the end of its
// allocation (nil for p == 0). It panics on an address that is not
// allocated (the device goroutine turns the panic into the job's error).
func (m *FakeMemory) Bytes(p DevPtr) []byte {
	if p == 0 {
		return nil
	}
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	for base, b := range m.f.mem {
		if p >= base && uint64(p-base) < uint64(len(b)) {
			return b[p-base:]
		}
	}
	panic(fmt.Sprintf("cuda: fake device: address %#x is not allocated", uint64(p)))
}

// Live returns the number of allocations not yet freed.
func (m *FakeMemory) Live() int {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	return len(m.f.mem)
}

// OpenFake opens a Device on the in-memory fake driver (a "Fake H200",
// sm_90) whose kernel launches run exec on the calling device goroutine;
// launches queued during graph capture are recorded and run at each graph
// launch. Copies, fills, allocation and graphs behave as the driver's.
func OpenFake(exec KernelFunc, lg *slog.Logger) (*Device, *FakeMemory, error) {
	if lg == nil {
		lg = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f := newFakeDriver()
	mem := &FakeMemory{f: f}
	hook := func(k kernelName, grid, block Dim3, shmem uint32, a []Arg) error {
		f.mu.Lock()
		capturing := f.capture
		if capturing {
			args := append([]Arg(nil), a...)
			f.recording = append(f.recording, func() error { return exec(mem, string(k), grid, block, shmem, args) })
		}
		f.mu.Unlock()
		if capturing {
			return nil
		}
		return exec(mem, string(k), grid, block, shmem, a)
	}
	var n int
	info := Info{Name: "Fake H200 (emulated)", Major: 9, SMs: 132, TotalMem: 141 << 30, DriverVersion: int(f.version), DriverPath: "fake"}
	d, err := openWith(info, libs{drv: f.api(), compile: fakeCompile(&n), nvrtcVersion: "emulated", onLaunch: hook},
		Options{CacheDir: "off"}, lg)
	if err != nil {
		return nil, nil, err
	}
	return d, mem, nil
}

// KernelNames lists the extern "C" name of every kernel the Go side can
// launch (an emulator checks that it covers them).
func KernelNames() []string {
	var out []string
	for _, k := range allKernels() {
		out = append(out, string(k))
	}
	return out
}

// Ptr reads the argument as a device pointer.
func (a Arg) Ptr() DevPtr { return DevPtr(a.v) }

// Int reads the argument as a C int.
func (a Arg) Int() int { return int(int32(uint32(a.v))) }

// Uint reads the argument as an unsigned 64-bit value.
func (a Arg) Uint() int { return int(a.v) }

// Float reads the argument as a float.
func (a Arg) Float() float32 { return math.Float32frombits(uint32(a.v)) }

// fakeCompile is a compileFunc that returns a recognisable image.
func fakeCompile(calls *int) compileFunc {
	return func(src string, opts []string, kind imageKind) ([]byte, error) {
		*calls++
		return []byte("FAKEIMG-" + strings.Join(opts, ",")), nil
	}
}

// fakeDriver is an in-memory stand-in for libcuda: device memory is a map
// of Go byte slices, kernel launches are recorded with their decoded
// parameter block, and every call records the OS thread it came from.
type fakeDriver struct {
	mu sync.Mutex // protects everything below (the fake is called from the device goroutine and the test)

	version   int32
	count     int32
	initRes   int32
	failCalls map[string]int32 // call name -> CUresult to return

	calls    []string
	threads  map[int]bool
	mem      map[DevPtr][]byte
	next     DevPtr
	freed    []DevPtr
	launches []fakeLaunch
	modules  int
	funcs    map[cuFunction]string
	image    []byte // last cuModuleLoadData image
	graphs   int
	capture  bool

	// Graph emulation: launches recorded during capture (by the emulator's
	// hook) become the graph's body, replayed by cuGraphLaunch.
	recording  []func() error
	graphBody  map[cuGraph][]func() error
	execBody   map[cuGraphExc][]func() error
	nextHandle uintptr
}

type fakeLaunch struct {
	name      string
	grid, blk Dim3
	shmem     uint32
	params    [maxParams]uint64
	inCapture bool
}

func newFakeDriver() *fakeDriver {
	return &fakeDriver{version: 12080, count: 1, failCalls: map[string]int32{}, threads: map[int]bool{},
		mem: map[DevPtr][]byte{}, next: 0x10000, funcs: map[cuFunction]string{},
		graphBody: map[cuGraph][]func() error{}, execBody: map[cuGraphExc][]func() error{}, nextHandle: 0x100}
}

// rec records a call and returns the configured failure, if any.
func (f *fakeDriver) rec(name string) int32 {
	f.calls = append(f.calls, name)
	f.threads[syscall.Gettid()] = true
	return f.failCalls[name]
}

func (f *fakeDriver) callNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// api returns a driverAPI whose fields call into f.
func (f *fakeDriver) api() *driverAPI {
	d := &driverAPI{}
	d.cuInit = func(uint32) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.rec("cuInit")
		return f.initRes
	}
	d.cuDriverGetVersion = func(v *int32) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		*v = f.version
		return f.rec("cuDriverGetVersion")
	}
	d.cuDeviceGetCount = func(n *int32) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		*n = f.count
		return f.rec("cuDeviceGetCount")
	}
	d.cuDeviceGet = func(dev *int32, ord int32) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		*dev = ord
		return f.rec("cuDeviceGet")
	}
	d.cuDeviceGetName = func(name *byte, n int32, dev int32) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		copy(unsafe.Slice(name, n), "Fake H200\x00")
		return f.rec("cuDeviceGetName")
	}
	d.cuDeviceGetAttribute = func(v *int32, attr int32, dev int32) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch attr {
		case attrComputeCapabilityMajor:
			*v = 9
		case attrComputeCapabilityMinor:
			*v = 0
		case attrMultiprocessorCount:
			*v = 132
		case attrMemoryClockRate:
			*v = 2619000
		case attrGlobalMemoryBusWidth:
			*v = 6144
		default:
			*v = 0
		}
		return f.rec("cuDeviceGetAttribute")
	}
	d.cuDeviceTotalMem = func(b *uint64, dev int32) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		*b = 141 << 30
		return f.rec("cuDeviceTotalMem_v2")
	}
	d.cuDevicePrimaryCtxRetain = func(ctx *cuContext, dev int32) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		*ctx = 0xC0
		return f.rec("cuDevicePrimaryCtxRetain")
	}
	d.cuDevicePrimaryCtxRelease = func(dev int32) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.rec("cuDevicePrimaryCtxRelease_v2")
	}
	d.cuCtxSetCurrent = func(cuContext) int32 { f.mu.Lock(); defer f.mu.Unlock(); return f.rec("cuCtxSetCurrent") }
	d.cuCtxSynchronize = func() int32 { f.mu.Lock(); defer f.mu.Unlock(); return f.rec("cuCtxSynchronize") }
	d.cuMemGetInfo = func(free, total *uint64) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		*free, *total = 100<<30, 141<<30
		return f.rec("cuMemGetInfo_v2")
	}
	d.cuMemAlloc = func(p *DevPtr, n uint64) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r := f.rec("cuMemAlloc_v2"); r != 0 {
			return r
		}
		*p = f.next
		f.mem[f.next] = make([]byte, n)
		f.next += DevPtr((n + 255) &^ 255)
		return 0
	}
	d.cuMemFree = func(p DevPtr) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.mem[p]; !ok {
			return 1 // CUDA_ERROR_INVALID_VALUE
		}
		delete(f.mem, p)
		f.freed = append(f.freed, p)
		return f.rec("cuMemFree_v2")
	}
	d.cuMemAllocHost = func(pp *unsafe.Pointer, n uint64) int32 { return 801 }
	d.cuMemFreeHost = func(unsafe.Pointer) int32 { return 801 }
	d.cuMemcpyHtoD = func(dst DevPtr, src unsafe.Pointer, n uint64) int32 {
		return f.copyIn("cuMemcpyHtoD_v2", dst, src, n)
	}
	d.cuMemcpyHtoDAsync = func(dst DevPtr, src unsafe.Pointer, n uint64, s cuStream) int32 {
		return f.copyIn("cuMemcpyHtoDAsync_v2", dst, src, n)
	}
	d.cuMemcpyDtoH = func(dst unsafe.Pointer, src DevPtr, n uint64) int32 {
		return f.copyOut("cuMemcpyDtoH_v2", dst, src, n)
	}
	d.cuMemcpyDtoHAsync = func(dst unsafe.Pointer, src DevPtr, n uint64, s cuStream) int32 {
		return f.copyOut("cuMemcpyDtoHAsync_v2", dst, src, n)
	}
	d.cuMemcpyDtoDAsync = func(dst, src DevPtr, n uint64, s cuStream) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		a, ok1 := f.find(dst, n)
		b, ok2 := f.find(src, n)
		if !ok1 || !ok2 {
			return 1
		}
		copy(a, b)
		return f.rec("cuMemcpyDtoDAsync_v2")
	}
	d.cuMemsetD8Async = func(p DevPtr, v uint8, n uint64, s cuStream) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		a, ok := f.find(p, n)
		if !ok {
			return 1
		}
		for i := range a {
			a[i] = v
		}
		return f.rec("cuMemsetD8Async")
	}
	d.cuModuleLoadData = func(m *cuModule, img unsafe.Pointer) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r := f.rec("cuModuleLoadData"); r != 0 {
			return r
		}
		f.modules++
		*m = cuModule(0x400 + f.modules)
		f.image = append([]byte(nil), unsafe.Slice((*byte)(img), 8)...)
		return 0
	}
	d.cuModuleUnload = func(cuModule) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.modules--
		return f.rec("cuModuleUnload")
	}
	d.cuModuleGetFunction = func(fn *cuFunction, m cuModule, name string) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r := f.rec("cuModuleGetFunction"); r != 0 {
			return r
		}
		id := cuFunction(0x1000 + len(f.funcs))
		f.funcs[id] = name
		*fn = id
		return 0
	}
	d.cuFuncSetAttribute = func(cuFunction, int32, int32) int32 { return 0 }
	d.cuLaunchKernel = func(fn cuFunction, gx, gy, gz, bx, by, bz, shmem uint32, s cuStream, params, extra unsafe.Pointer) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r := f.rec("cuLaunchKernel"); r != 0 {
			return r
		}
		l := fakeLaunch{name: f.funcs[fn], grid: Dim3{gx, gy, gz}, blk: Dim3{bx, by, bz}, shmem: shmem, inCapture: f.capture}
		ptrs := unsafe.Slice((*unsafe.Pointer)(params), maxParams)
		for i := range l.params {
			l.params[i] = *(*uint64)(ptrs[i])
		}
		f.launches = append(f.launches, l)
		return 0
	}
	d.cuStreamCreate = func(s *cuStream, flags uint32) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		*s = 0x5
		return f.rec("cuStreamCreate")
	}
	d.cuStreamDestroy = func(cuStream) int32 { f.mu.Lock(); defer f.mu.Unlock(); return f.rec("cuStreamDestroy_v2") }
	d.cuStreamSynchronize = func(cuStream) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.rec("cuStreamSynchronize")
	}
	d.cuStreamBeginCapture = func(s cuStream, mode int32) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.capture = true
		return f.rec("cuStreamBeginCapture_v2")
	}
	d.cuStreamEndCapture = func(s cuStream, g *cuGraph) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.capture = false
		f.nextHandle++
		*g = cuGraph(f.nextHandle)
		f.graphBody[*g], f.recording = f.recording, nil
		return f.rec("cuStreamEndCapture")
	}
	d.cuGraphInstantiateWithFlags = func(e *cuGraphExc, g cuGraph, flags uint64) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.graphs++
		f.nextHandle++
		*e = cuGraphExc(f.nextHandle)
		f.execBody[*e] = f.graphBody[g]
		return f.rec("cuGraphInstantiateWithFlags")
	}
	d.cuGraphLaunch = func(e cuGraphExc, s cuStream) int32 {
		f.mu.Lock()
		body := f.execBody[e]
		r := f.rec("cuGraphLaunch")
		f.mu.Unlock()
		for _, op := range body { // outside the lock: the emulator reads memory through f
			if op() != nil {
				return 719 // CUDA_ERROR_LAUNCH_FAILED
			}
		}
		return r
	}
	d.cuGraphExecDestroy = func(e cuGraphExc) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.execBody, e)
		f.graphs--
		return f.rec("cuGraphExecDestroy")
	}
	d.cuGraphDestroy = func(g cuGraph) int32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.graphBody, g)
		return f.rec("cuGraphDestroy")
	}
	return d
}

// find returns the n bytes at device address p (inside one allocation).
func (f *fakeDriver) find(p DevPtr, n uint64) ([]byte, bool) {
	for base, b := range f.mem {
		if p >= base && uint64(p-base)+n <= uint64(len(b)) {
			return b[p-base : uint64(p-base)+n], true
		}
	}
	return nil, false
}

func (f *fakeDriver) copyIn(name string, dst DevPtr, src unsafe.Pointer, n uint64) int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.find(dst, n)
	if !ok {
		return 1
	}
	copy(a, unsafe.Slice((*byte)(src), n))
	return f.rec(name)
}

func (f *fakeDriver) copyOut(name string, dst unsafe.Pointer, src DevPtr, n uint64) int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.find(src, n)
	if !ok {
		return 1
	}
	copy(unsafe.Slice((*byte)(dst), n), a)
	return f.rec(name)
}

func (f *fakeDriver) String() string { return fmt.Sprintf("fake driver: %d calls", len(f.calls)) }
