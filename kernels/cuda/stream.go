package cuda

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"strconv"
	"unsafe"
)

// Stream is the device goroutine's view of its context: one CUDA stream, the
// loaded kernels, the cuBLAS handle and the pinned kernel-parameter block.
// It is only valid inside a Device.Do closure.
type Stream struct {
	drv    *driverAPI
	info   Info
	log    *slog.Logger
	dev    int32
	ctx    cuContext
	stream cuStream
	mod    cuModule
	fns    map[kernelName]cuFunction

	// Kernel parameters: cuLaunchKernel takes void** pointing at each
	// argument value. The block is one Go allocation pinned for the life of
	// the stream (runtime.Pinner), so handing its address to the driver
	// follows the cgo pointer rules; ptrs[i] points at vals[i] forever.
	params *paramBlock
	pin    runtime.Pinner

	blas   *cublasAPI
	blasH  uintptr
	blasWS DevPtr

	allocs     map[DevPtr]uint64 // live allocations and their sizes
	scratch    map[string]DevPtr // named growable scratch buffers (see scratchBuf)
	scratchN   map[string]uint64
	scratchGen uint64 // bumped when a scratch buffer moves: graphs captured before are stale
	capturing  bool
	graphs     map[*Graph]bool
	onLaunch   launchHook // tests only: sees every launch before the driver
}

// launchHook observes (or, in the emulator tests, executes) a launch.
type launchHook func(k kernelName, grid, block Dim3, shmem uint32, args []Arg) error

const maxParams = 24

type paramBlock struct {
	vals [maxParams]uint64
	ptrs [maxParams]unsafe.Pointer
}

// Arg is one kernel argument, stored in an 8-byte slot: the kernel reads as
// many bytes as its parameter type has (little-endian).
type Arg struct {
	v    uint64
	kind argKind
}

// argKind is the C type class of an argument; tests check it against the
// kernel's signature in the source.
type argKind uint8

const (
	argPtr argKind = iota + 1 // any pointer
	argI32                    // int
	argU64                    // u64 / size_t
	argF32                    // float
)

// P passes a device pointer.
func P(p DevPtr) Arg { return Arg{uint64(p), argPtr} }

// I passes a C int (int32).
func I(v int) Arg { return Arg{uint64(uint32(int32(v))), argI32} }

// U64 passes an unsigned 64-bit value (size_t, u64).
func U64(v uint64) Arg { return Arg{v, argU64} }

// F passes a float.
func F(v float32) Arg { return Arg{uint64(math.Float32bits(v)), argF32} }

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// D1 returns the one-dimensional shape (x, 1, 1).
func D1(x int) Dim3 { return Dim3{uint32(x), 1, 1} }

// newStream makes the context current on this (locked) thread and sets up
// everything the kernels need. On error it releases what it created.
func newStream(info Info, l libs, cache diskCache, lg *slog.Logger) (s *Stream, err error) {
	if l.compile == nil {
		return nil, ErrNoNVRTC
	}
	s = &Stream{drv: l.drv, info: info, log: lg, fns: map[kernelName]cuFunction{},
		allocs: map[DevPtr]uint64{}, scratch: map[string]DevPtr{}, scratchN: map[string]uint64{},
		graphs: map[*Graph]bool{}, onLaunch: l.onLaunch}
	defer func() {
		if err != nil {
			s.release()
			s = nil
		}
	}()
	d := s.drv
	if err := check("cuDeviceGet", d.cuDeviceGet(&s.dev, int32(info.Index))); err != nil {
		return s, errors.Join(ErrNoDevice, err)
	}
	if err := check("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(&s.ctx, s.dev)); err != nil {
		return s, err
	}
	if err := check("cuCtxSetCurrent", d.cuCtxSetCurrent(s.ctx)); err != nil {
		return s, err
	}
	if err := check("cuStreamCreate", d.cuStreamCreate(&s.stream, streamNonBlocking)); err != nil {
		return s, err
	}
	s.params = &paramBlock{}
	s.pin.Pin(s.params)
	for i := range s.params.ptrs {
		s.params.ptrs[i] = unsafe.Pointer(&s.params.vals[i])
	}
	if err := s.loadKernels(l, cache); err != nil {
		return s, err
	}
	if l.blas != nil {
		if err := s.initBlas(l.blas); err != nil {
			lg.Warn("cuda: cuBLAS init failed, prefill uses GEMV kernels", "err", err)
			s.blas = nil
		}
	}
	return s, nil
}

// compileOptions are the NVRTC options for a device of compute capability cc.
func compileOptions(cc int, kind imageKind) []string {
	arch := "--gpu-architecture=sm_" + strconv.Itoa(cc)
	if kind == imagePTX {
		arch = "--gpu-architecture=compute_" + strconv.Itoa(cc)
	}
	return []string{arch, "--std=c++17", "--fmad=true"}
}

// loadKernels compiles (or reads from the cache) and loads the module, then
// resolves every kernel the Go code launches.
func (s *Stream) loadKernels(l libs, cache diskCache) error {
	cache.sweepTemps()
	src := Source()
	kind := imageCUBIN
	opts := compileOptions(s.info.CC(), kind)
	img, hit, warn, err := cachedCompile(cache, l.compile, src, opts, l.nvrtcVersion, s.info.CC(), kind)
	var nv *CallError
	if err != nil && errors.As(err, &nv) && nv.Status == NVRTCResult(5) { // NVRTC_ERROR_INVALID_OPTION: arch unknown for CUBIN
		kind = imagePTX
		opts = compileOptions(s.info.CC(), kind)
		img, hit, warn, err = cachedCompile(cache, l.compile, src, opts, l.nvrtcVersion, s.info.CC(), kind)
	}
	if err != nil {
		return err
	}
	if warn != nil {
		s.log.Warn("cuda: compile cache not written", "err", warn)
	}
	s.log.Debug("cuda: kernels ready", "cache_hit", hit, "bytes", len(img), "nvrtc", l.nvrtcVersion)
	if err := check("cuModuleLoadData", s.drv.cuModuleLoadData(&s.mod, unsafe.Pointer(&img[0]))); err != nil {
		return err
	}
	runtime.KeepAlive(img)
	for _, k := range allKernels() {
		var f cuFunction
		if err := check("cuModuleGetFunction("+string(k)+")", s.drv.cuModuleGetFunction(&f, s.mod, string(k))); err != nil {
			return err
		}
		s.fns[k] = f
	}
	return nil
}

func (s *Stream) initBlas(b *cublasAPI) error {
	if err := checkCublas("cublasCreate_v2", b.cublasCreate(&s.blasH)); err != nil {
		return err
	}
	s.blas = b
	if err := checkCublas("cublasSetStream_v2", b.cublasSetStream(s.blasH, s.stream)); err != nil {
		return err
	}
	// An explicit workspace keeps cuBLAS from allocating during graph capture.
	ws, err := s.Alloc(cublasWorkspaceLen)
	if err != nil {
		return err
	}
	s.blasWS = ws
	return checkCublas("cublasSetWorkspace_v2", b.cublasSetWorkspace(s.blasH, ws, cublasWorkspaceLen))
}

// release frees everything the stream owns (safe on a partial stream).
func (s *Stream) release() error {
	d := s.drv
	var errs []error
	for g := range s.graphs {
		g.destroy()
	}
	if s.blas != nil && s.blasH != 0 {
		errs = append(errs, checkCublas("cublasDestroy_v2", s.blas.cublasDestroy(s.blasH)))
		s.blasH = 0
	}
	for p := range s.allocs {
		errs = append(errs, check("cuMemFree_v2", d.cuMemFree(p)))
	}
	clear(s.allocs)
	if s.mod != 0 {
		errs = append(errs, check("cuModuleUnload", d.cuModuleUnload(s.mod)))
		s.mod = 0
	}
	if s.stream != 0 {
		errs = append(errs, check("cuStreamDestroy_v2", d.cuStreamDestroy(s.stream)))
		s.stream = 0
	}
	if s.ctx != 0 {
		errs = append(errs, check("cuDevicePrimaryCtxRelease_v2", d.cuDevicePrimaryCtxRelease(s.dev)))
		s.ctx = 0
	}
	s.pin.Unpin()
	return errors.Join(errs...)
}

// Info describes the device.
func (s *Stream) Info() Info { return s.info }

// MemInfo returns the free and total device memory in bytes.
func (s *Stream) MemInfo() (free, total uint64, err error) {
	err = check("cuMemGetInfo_v2", s.drv.cuMemGetInfo(&free, &total))
	return free, total, err
}

// Alloc allocates bytes of device memory (not initialised).
func (s *Stream) Alloc(bytes uint64) (DevPtr, error) {
	if s.capturing {
		return 0, errors.New("cuda: Alloc during graph capture")
	}
	if bytes == 0 {
		bytes = 1
	}
	var p DevPtr
	if err := check("cuMemAlloc_v2", s.drv.cuMemAlloc(&p, bytes)); err != nil {
		return 0, fmt.Errorf("cuda: allocating %d bytes: %w", bytes, err)
	}
	s.allocs[p] = bytes
	return p, nil
}

// Free releases an allocation made by Alloc (0 and unknown pointers are ignored).
func (s *Stream) Free(p DevPtr) error {
	if _, ok := s.allocs[p]; !ok {
		return nil
	}
	delete(s.allocs, p)
	return check("cuMemFree_v2", s.drv.cuMemFree(p))
}

// Allocated returns the bytes currently allocated through this stream.
func (s *Stream) Allocated() uint64 {
	var n uint64
	for _, b := range s.allocs {
		n += b
	}
	return n
}

// Scratch returns the named stream scratch buffer, at least n bytes (see
// scratchBuf); graphs captured before it moves become stale.
func (s *Stream) Scratch(name string, n uint64) (DevPtr, error) { return s.scratchBuf(name, n) }

// scratchBuf returns a named scratch buffer of at least n bytes, growing it
// (outside graph capture) when needed.
func (s *Stream) scratchBuf(name string, n uint64) (DevPtr, error) {
	if p, ok := s.scratch[name]; ok && s.scratchN[name] >= n {
		return p, nil
	}
	if s.capturing {
		return 0, fmt.Errorf("cuda: scratch %q must grow to %d bytes during graph capture; size it first", name, n)
	}
	if p, ok := s.scratch[name]; ok {
		// Queued kernels may still read the old buffer.
		if err := s.Sync(); err != nil {
			return 0, err
		}
		if err := s.Free(p); err != nil {
			return 0, err
		}
		delete(s.scratch, name)
	}
	s.scratchGen++
	p, err := s.Alloc(n)
	if err != nil {
		return 0, err
	}
	s.scratch[name], s.scratchN[name] = p, n
	return p, nil
}

// Upload copies src to device address dst and waits for it (stream ordered).
func (s *Stream) Upload(dst DevPtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if s.capturing {
		return errors.New("cuda: Upload during graph capture")
	}
	if err := check("cuMemcpyHtoDAsync_v2", s.drv.cuMemcpyHtoDAsync(dst, unsafe.Pointer(&src[0]), uint64(len(src)), s.stream)); err != nil {
		return err
	}
	err := s.Sync()
	runtime.KeepAlive(src)
	return err
}

// Download copies len(dst) bytes from device address src after all queued work.
func (s *Stream) Download(dst []byte, src DevPtr) error {
	if len(dst) == 0 {
		return nil
	}
	if s.capturing {
		return errors.New("cuda: Download during graph capture")
	}
	if err := check("cuMemcpyDtoHAsync_v2", s.drv.cuMemcpyDtoHAsync(unsafe.Pointer(&dst[0]), src, uint64(len(dst)), s.stream)); err != nil {
		return err
	}
	err := s.Sync()
	runtime.KeepAlive(dst)
	return err
}

// Copy queues a device-to-device copy of n bytes.
func (s *Stream) Copy(dst, src DevPtr, n uint64) error {
	return check("cuMemcpyDtoDAsync_v2", s.drv.cuMemcpyDtoDAsync(dst, src, n, s.stream))
}

// Zero queues a fill of n bytes at p with zeros.
func (s *Stream) Zero(p DevPtr, n uint64) error {
	return check("cuMemsetD8Async", s.drv.cuMemsetD8Async(p, 0, n, s.stream))
}

// Sync waits for all work queued on the stream.
func (s *Stream) Sync() error {
	return check("cuStreamSynchronize", s.drv.cuStreamSynchronize(s.stream))
}

// bytesOf views a slice of fixed-size values as bytes.
func bytesOf[T float32 | int32 | uint16 | uint32](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}

// UploadF32 copies float32 values to dst.
func (s *Stream) UploadF32(dst DevPtr, v []float32) error { return s.Upload(dst, bytesOf(v)) }

// UploadI32 copies int32 values to dst.
func (s *Stream) UploadI32(dst DevPtr, v []int32) error { return s.Upload(dst, bytesOf(v)) }

// DownloadF32 copies len(v) float32 values from src.
func (s *Stream) DownloadF32(v []float32, src DevPtr) error { return s.Download(bytesOf(v), src) }

// DownloadI32 copies len(v) int32 values from src.
func (s *Stream) DownloadI32(v []int32, src DevPtr) error { return s.Download(bytesOf(v), src) }

// Launch queues kernel k on the stream. Arguments are copied into the
// pinned parameter block; the driver reads them before cuLaunchKernel
// returns, so the block is reused by the next launch.
func (s *Stream) launch(k kernelName, grid, block Dim3, shmem uint32, args ...Arg) error {
	f, ok := s.fns[k]
	if !ok {
		return fmt.Errorf("cuda: kernel %s not loaded", k)
	}
	if len(args) > maxParams {
		return fmt.Errorf("cuda: kernel %s: %d arguments, at most %d", k, len(args), maxParams)
	}
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 {
		return nil // nothing to do
	}
	if s.onLaunch != nil {
		if err := s.onLaunch(k, grid, block, shmem, args); err != nil {
			return err
		}
	}
	for i, a := range args {
		s.params.vals[i] = a.v
	}
	r := s.drv.cuLaunchKernel(f, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, shmem, s.stream,
		unsafe.Pointer(&s.params.ptrs[0]), nil)
	if r != 0 {
		return &CallError{Func: "cuLaunchKernel(" + string(k) + ")", Status: Result(r)}
	}
	return nil
}

// Graph is an instantiated CUDA graph captured from the stream.
type Graph struct {
	s    *Stream
	exec cuGraphExc
	gen  uint64 // the stream's scratchGen at capture
}

// ErrGraphStale: a scratch buffer the graph uses was reallocated after the
// capture; capture again.
var ErrGraphStale = errors.New("cuda: graph is stale (scratch buffers moved); capture again")

// Stale reports whether Launch would fail with ErrGraphStale (or the graph
// was destroyed).
func (g *Graph) Stale() bool { return g.exec == 0 || g.gen != g.s.scratchGen }

// Capture records the work fn queues on the stream (kernel launches, device
// copies; no Upload, Download, Alloc or Sync) into a graph and instantiates
// it. Values that change between launches (positions, page tables, token
// ids) must live in device buffers that are updated before each Launch.
func (s *Stream) Capture(fn func() error) (*Graph, error) {
	if s.capturing {
		return nil, errors.New("cuda: nested capture")
	}
	if err := check("cuStreamBeginCapture_v2", s.drv.cuStreamBeginCapture(s.stream, captureModeThreadLocal)); err != nil {
		return nil, err
	}
	s.capturing = true
	ferr := fn()
	s.capturing = false
	var g cuGraph
	eerr := check("cuStreamEndCapture", s.drv.cuStreamEndCapture(s.stream, &g))
	if ferr != nil || eerr != nil {
		if g != 0 {
			s.drv.cuGraphDestroy(g)
		}
		return nil, errors.Join(ferr, eerr)
	}
	var exec cuGraphExc
	ierr := check("cuGraphInstantiateWithFlags", s.drv.cuGraphInstantiateWithFlags(&exec, g, 0))
	s.drv.cuGraphDestroy(g)
	if ierr != nil {
		return nil, ierr
	}
	gr := &Graph{s: s, exec: exec, gen: s.scratchGen}
	s.graphs[gr] = true
	return gr, nil
}

// Launch queues the graph on the stream.
func (g *Graph) Launch() error {
	if g.exec == 0 {
		return errors.New("cuda: graph destroyed")
	}
	if g.gen != g.s.scratchGen {
		return ErrGraphStale
	}
	return check("cuGraphLaunch", g.s.drv.cuGraphLaunch(g.exec, g.s.stream))
}

// Destroy frees the graph (safe to call twice).
func (g *Graph) Destroy() { g.destroy() }

func (g *Graph) destroy() {
	if g.exec != 0 {
		g.s.drv.cuGraphExecDestroy(g.exec)
		g.exec = 0
	}
	delete(g.s.graphs, g)
}
