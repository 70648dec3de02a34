package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// nvrtcAPI is NVRTC (libnvrtc.so.13 or .12) as Go function fields. Every
// field returns the nvrtcResult as a signed int32.
type nvrtcAPI struct {
	// nvrtcResult nvrtcVersion(int *major, int *minor);
	nvrtcVersion func(major, minor *int32) int32
	// nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name,
	//     int numHeaders, const char * const *headers, const char * const *includeNames);
	nvrtcCreateProgram func(prog *uintptr, src, name *byte, numHeaders int32, headers, includeNames unsafe.Pointer) int32
	// nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char * const *options);
	nvrtcCompileProgram func(prog uintptr, numOptions int32, options unsafe.Pointer) int32
	// nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *logSizeRet);
	nvrtcGetProgramLogSize func(prog uintptr, n *uint64) int32
	// nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log);
	nvrtcGetProgramLog func(prog uintptr, log *byte) int32
	// nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *cubinSizeRet);
	nvrtcGetCUBINSize func(prog uintptr, n *uint64) int32
	// nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin);
	nvrtcGetCUBIN func(prog uintptr, out *byte) int32
	// nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *ptxSizeRet);
	nvrtcGetPTXSize func(prog uintptr, n *uint64) int32
	// nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx);
	nvrtcGetPTX func(prog uintptr, out *byte) int32
	// nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog);
	nvrtcDestroyProgram func(prog *uintptr) int32
}

func (n *nvrtcAPI) symbols() []symbol {
	return []symbol{
		{"nvrtcVersion", &n.nvrtcVersion, false},
		{"nvrtcCreateProgram", &n.nvrtcCreateProgram, false},
		{"nvrtcCompileProgram", &n.nvrtcCompileProgram, false},
		{"nvrtcGetProgramLogSize", &n.nvrtcGetProgramLogSize, false},
		{"nvrtcGetProgramLog", &n.nvrtcGetProgramLog, false},
		{"nvrtcGetCUBINSize", &n.nvrtcGetCUBINSize, false},
		{"nvrtcGetCUBIN", &n.nvrtcGetCUBIN, false},
		{"nvrtcGetPTXSize", &n.nvrtcGetPTXSize, false},
		{"nvrtcGetPTX", &n.nvrtcGetPTX, false},
		{"nvrtcDestroyProgram", &n.nvrtcDestroyProgram, false},
	}
}

// nvrtcLib is a loaded NVRTC with its version.
type nvrtcLib struct {
	api          *nvrtcAPI
	path         string
	major, minor int
}

func (l *nvrtcLib) versionString() string { return fmt.Sprintf("%d.%d", l.major, l.minor) }

var (
	nvrtcOnce sync.Once
	nvrtcMain *nvrtcLib
	nvrtcErr  error
)

// loadNVRTC loads NVRTC once per process, preferring the major version the
// driver supports.
func loadNVRTC(driverVersion int) (*nvrtcLib, error) {
	nvrtcOnce.Do(func() {
		nvrtcMain, nvrtcErr = loadNVRTCFrom(defaultSearchEnv(), driverVersion, dlopenNow, dlsym)
	})
	return nvrtcMain, nvrtcErr
}

func loadNVRTCFrom(e searchEnv, driverVersion int, open openFunc, lookup symLookup) (*nvrtcLib, error) {
	h, path, err := openLib(specNVRTC.forDriver(driverVersion), e, open)
	if err != nil {
		return nil, err
	}
	api := &nvrtcAPI{}
	if err := bindSymbols(h, lookup, api.symbols()); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoNVRTC, path, err)
	}
	l := &nvrtcLib{api: api, path: path}
	var maj, min int32
	if err := checkNVRTC("nvrtcVersion", api.nvrtcVersion(&maj, &min)); err != nil {
		return nil, errors.Join(ErrNoNVRTC, err)
	}
	l.major, l.minor = int(maj), int(min)
	return l, nil
}

// imageKind says what a compiled module holds.
type imageKind uint8

const (
	imageCUBIN imageKind = iota // machine code for one sm_XY
	imagePTX                    // PTX, JIT-compiled by the driver
)

// cstr returns s as a NUL-terminated byte slice.
func cstr(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// compile compiles src with NVRTC and returns a CUBIN (kind imageCUBIN) or
// PTX image. Compilation errors carry the compiler log.
func (l *nvrtcLib) compile(src, name string, opts []string, kind imageKind) ([]byte, error) {
	api := l.api
	srcb, nameb := cstr(src), cstr(name)
	var prog uintptr
	if err := checkNVRTC("nvrtcCreateProgram", api.nvrtcCreateProgram(&prog, &srcb[0], &nameb[0], 0, nil, nil)); err != nil {
		return nil, err
	}
	defer api.nvrtcDestroyProgram(&prog)

	// const char * const *options: an array of pointers into Go memory, so
	// every option buffer is pinned while NVRTC reads it.
	var pin runtime.Pinner
	defer pin.Unpin()
	bufs := make([][]byte, len(opts))
	ptrs := make([]*byte, len(opts)+1)
	for i, o := range opts {
		bufs[i] = cstr(o)
		pin.Pin(&bufs[i][0])
		ptrs[i] = &bufs[i][0]
	}
	cerr := checkNVRTC("nvrtcCompileProgram", api.nvrtcCompileProgram(prog, int32(len(opts)), unsafe.Pointer(&ptrs[0])))
	runtime.KeepAlive(bufs)
	if cerr != nil {
		return nil, &CompileError{Options: opts, Log: l.programLog(prog), Err: cerr}
	}
	var n uint64
	sizeFn, getFn, what := api.nvrtcGetCUBINSize, api.nvrtcGetCUBIN, "nvrtcGetCUBIN"
	if kind == imagePTX {
		sizeFn, getFn, what = api.nvrtcGetPTXSize, api.nvrtcGetPTX, "nvrtcGetPTX"
	}
	if err := checkNVRTC(what+"Size", sizeFn(prog, &n)); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: %s: empty image", what)
	}
	img := make([]byte, n)
	if err := checkNVRTC(what, getFn(prog, &img[0])); err != nil {
		return nil, err
	}
	return img, nil
}

// programLog returns NVRTC's log for prog ("" if it cannot be read).
func (l *nvrtcLib) programLog(prog uintptr) string {
	var n uint64
	if l.api.nvrtcGetProgramLogSize(prog, &n) != 0 || n <= 1 {
		return ""
	}
	buf := make([]byte, n)
	if l.api.nvrtcGetProgramLog(prog, &buf[0]) != 0 {
		return ""
	}
	return cString(buf)
}
