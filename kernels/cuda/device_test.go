package cuda

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"

	"oengine/ggml"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openFake(t *testing.T, f *fakeDriver) *Device {
	t.Helper()
	var n int
	info := Info{Index: 0, Name: "Fake", Major: 9, Minor: 0}
	d, err := openWith(info, libs{drv: f.api(), compile: fakeCompile(&n), nvrtcVersion: "12.8"}, Options{CacheDir: "off"}, quietLog())
	if err != nil {
		t.Fatalf("openWith: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestInitDriver(t *testing.T) {
	tests := []struct {
		name    string
		initRes int32
		version int32
		count   int32
		want    error
		wantErr string
	}{
		{name: "ok", version: 12080, count: 2},
		{name: "cuda13", version: 13000, count: 1},
		{name: "no device at init", initRes: 100, version: 12080, want: ErrNoDevice, wantErr: "CUDA_ERROR_NO_DEVICE"},
		{name: "stub library", initRes: 34, want: ErrNoDriver, wantErr: "CUDA_ERROR_STUB_LIBRARY"},
		{name: "driver mismatch", initRes: 803, want: ErrNoDriver, wantErr: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
		{name: "too old", version: 11080, count: 1, want: ErrDriverTooOld, wantErr: "CUDA 11.8"},
		{name: "zero devices", version: 12000, count: 0, want: ErrNoDevice},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeDriver()
			f.initRes, f.version, f.count = tc.initRes, tc.version, tc.count
			v, n, err := initDriver(f.api())
			if tc.want == nil {
				if err != nil || v != int(tc.version) || n != int(tc.count) {
					t.Fatalf("got (%d, %d, %v), want (%d, %d, nil)", v, n, err, tc.version, tc.count)
				}
				if got := f.callNames(); got[0] != "cuInit" {
					t.Fatalf("first call %s, want cuInit", got[0])
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %q lacks %q", err, tc.wantErr)
			}
		})
	}
}

func TestDeviceInfo(t *testing.T) {
	f := newFakeDriver()
	info, err := deviceInfo(f.api(), 0, 12080, 1)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "Fake H200" || info.CC() != 90 || info.SMs != 132 || info.TotalMem != 141<<30 {
		t.Fatalf("info %+v", info)
	}
	// 2 * 2.619 GHz * 6144 bits / 8 = 4.02 TB/s
	if math.Abs(info.Bandwidth-4.023e12) > 0.01e12 {
		t.Fatalf("bandwidth %g", info.Bandwidth)
	}
	if !strings.Contains(info.String(), "sm_90") {
		t.Fatalf("String %q", info.String())
	}
	if _, err := deviceInfo(f.api(), 3, 12080, 1); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("ordinal 3 of 1: %v", err)
	}
	f.failCalls["cuDeviceGetAttribute"] = 1
	_, err = deviceInfo(f.api(), 0, 12080, 1)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Func != "cuDeviceGetAttribute" || ce.Status != Result(1) {
		t.Fatalf("attribute failure: %v", err)
	}
}

func TestOpenSequenceAndLaunch(t *testing.T) {
	f := newFakeDriver()
	d := openFake(t, f)
	calls := f.callNames()
	want := []string{"cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuStreamCreate", "cuModuleLoadData"}
	if len(calls) < len(want) {
		t.Fatalf("calls %v", calls)
	}
	for i, w := range want {
		if calls[i] != w {
			t.Fatalf("call %d = %s, want %s (all: %v)", i, calls[i], w, calls[:len(want)])
		}
	}
	if string(f.image) != "FAKEIMG-" {
		t.Fatalf("module image %q", f.image)
	}
	if len(f.funcs) != len(allKernels()) {
		t.Fatalf("resolved %d functions, want %d", len(f.funcs), len(allKernels()))
	}

	var x, y DevPtr
	err := d.Do(func(s *Stream) error {
		var err error
		if x, err = s.Alloc(4 * 1024); err != nil {
			return err
		}
		if y, err = s.Alloc(4 * 1024); err != nil {
			return err
		}
		return s.RMSNorm(y, x, 0, 4, 1024, 1e-5)
	})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	l := f.launches[len(f.launches)-1]
	f.mu.Unlock()
	if l.name != "rms_norm" || l.grid != (Dim3{4, 1, 1}) || l.blk != (Dim3{256, 1, 1}) {
		t.Fatalf("launch %+v", l)
	}
	if DevPtr(l.params[0]) != y || DevPtr(l.params[1]) != x || l.params[2] != 0 ||
		int32(l.params[3]) != 1024 || math.Float32frombits(uint32(l.params[4])) != 1e-5 {
		t.Fatalf("params %v", l.params[:5])
	}
	// Every driver call so far came from one OS thread.
	f.mu.Lock()
	nthreads := len(f.threads)
	f.mu.Unlock()
	if nthreads != 1 {
		t.Fatalf("driver called from %d threads", nthreads)
	}
}

func TestUploadDownloadAndFree(t *testing.T) {
	f := newFakeDriver()
	d := openFake(t, f)
	in := []float32{1, -2.5, 3e7, float32(math.Inf(1))}
	out := make([]float32, len(in))
	err := d.Do(func(s *Stream) error {
		p, err := s.Alloc(16)
		if err != nil {
			return err
		}
		if err := s.UploadF32(p, in); err != nil {
			return err
		}
		if err := s.DownloadF32(out, p); err != nil {
			return err
		}
		if s.Allocated() != 16 {
			t.Errorf("Allocated %d", s.Allocated())
		}
		if err := s.Free(p); err != nil {
			return err
		}
		if s.Allocated() != 0 {
			t.Errorf("Allocated after free %d", s.Allocated())
		}
		_, err = s.Alloc(64) // left for Close
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if in[i] != out[i] {
			t.Fatalf("round trip %v -> %v", in, out)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.mem) != 0 {
		t.Fatalf("%d allocations left after Close", len(f.mem))
	}
	if f.modules != 0 {
		t.Fatal("module not unloaded")
	}
	if f.calls[len(f.calls)-1] != "cuDevicePrimaryCtxRelease_v2" {
		t.Fatalf("last call %s", f.calls[len(f.calls)-1])
	}
	if err := d.Do(func(*Stream) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
}

func TestDriverErrorsAreTyped(t *testing.T) {
	f := newFakeDriver()
	d := openFake(t, f)
	f.mu.Lock()
	f.failCalls["cuMemAlloc_v2"] = 2
	f.failCalls["cuLaunchKernel"] = 719
	f.mu.Unlock()
	err := d.Do(func(s *Stream) error { _, err := s.Alloc(1 << 40); return err })
	var ce *CallError
	if !errors.As(err, &ce) || ce.Status != Result(2) || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
		t.Fatalf("alloc: %v", err)
	}
	err = d.Do(func(s *Stream) error { return s.Add(0, 0, 0, 10) })
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "cuLaunchKernel(add_f32)") || !strings.Contains(err.Error(), "CUDA_ERROR_LAUNCH_FAILED") {
		t.Fatalf("launch: %v", err)
	}
}

func TestOpenFailureReleases(t *testing.T) {
	tests := []struct {
		name string
		fail string
		code int32
	}{
		{"module load", "cuModuleLoadData", 209},
		{"function lookup", "cuModuleGetFunction", 500},
		{"stream", "cuStreamCreate", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeDriver()
			f.failCalls[tc.fail] = tc.code
			var n int
			_, err := openWith(Info{Major: 9}, libs{drv: f.api(), compile: fakeCompile(&n), nvrtcVersion: "12.8"}, Options{CacheDir: "off"}, quietLog())
			if !strings.Contains(err.Error(), Result(tc.code).Name()) {
				t.Fatalf("err %v", err)
			}
			calls := f.callNames()
			if calls[len(calls)-1] != "cuDevicePrimaryCtxRelease_v2" {
				t.Fatalf("context not released: %v", calls)
			}
		})
	}
	// No NVRTC: a sentinel.
	f := newFakeDriver()
	if _, err := openWith(Info{}, libs{drv: f.api()}, Options{CacheDir: "off"}, quietLog()); !errors.Is(err, ErrNoNVRTC) {
		t.Fatalf("no compiler: %v", err)
	}
}

func TestCompileErrorReachesOpen(t *testing.T) {
	f := newFakeDriver()
	bad := func(string, []string, imageKind) ([]byte, error) {
		return nil, &CompileError{Log: "oops", Err: &CallError{"nvrtcCompileProgram", NVRTCResult(6)}}
	}
	_, err := openWith(Info{Major: 9}, libs{drv: f.api(), compile: bad}, Options{CacheDir: "off"}, quietLog())
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "NVRTC_ERROR_COMPILATION") {
		t.Fatalf("err %v", err)
	}
}

func TestPTXFallbackOnUnknownArch(t *testing.T) {
	f := newFakeDriver()
	var kinds []imageKind
	comp := func(src string, opts []string, k imageKind) ([]byte, error) {
		kinds = append(kinds, k)
		if k == imageCUBIN {
			return nil, &CompileError{Err: &CallError{"nvrtcCompileProgram", NVRTCResult(5)}}
		}
		return []byte("PTXIMAGE\x00"), nil
	}
	d, err := openWith(Info{Major: 12}, libs{drv: f.api(), compile: comp}, Options{CacheDir: "off"}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if len(kinds) != 2 || kinds[1] != imagePTX {
		t.Fatalf("compile kinds %v", kinds)
	}
}

func TestDoSerialisesAndRecoversPanics(t *testing.T) {
	f := newFakeDriver()
	d := openFake(t, f)
	if err := d.Do(func(*Stream) error { panic("boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("panic: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	inside := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.Do(func(s *Stream) error {
				mu.Lock()
				inside++
				if inside != 1 {
					t.Error("two jobs at once")
				}
				mu.Unlock()
				_, err := s.Alloc(8)
				mu.Lock()
				inside--
				mu.Unlock()
				return err
			})
		}()
	}
	wg.Wait()
}

func TestGraphCapture(t *testing.T) {
	f := newFakeDriver()
	d := openFake(t, f)
	err := d.Do(func(s *Stream) error {
		x, err := s.Alloc(1024)
		if err != nil {
			return err
		}
		g, err := s.Capture(func() error {
			if err := s.Add(x, x, x, 256); err != nil {
				return err
			}
			if err := s.Upload(x, []byte{1}); err == nil {
				t.Error("Upload allowed during capture")
			}
			if _, err := s.Alloc(8); err == nil {
				t.Error("Alloc allowed during capture")
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i := 0; i < 3; i++ {
			if err := g.Launch(); err != nil {
				return err
			}
		}
		g.Destroy()
		g.Destroy()
		if err := g.Launch(); err == nil {
			t.Error("launch of a destroyed graph")
		}
		// A failing body ends the capture and returns its error.
		_, err = s.Capture(func() error { return errors.New("body failed") })
		if err == nil || !strings.Contains(err.Error(), "body failed") {
			t.Errorf("failing capture: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == "cuGraphLaunch" {
			n++
		}
	}
	if n != 3 || f.graphs != 0 {
		t.Fatalf("graph launches %d, live graphs %d", n, f.graphs)
	}
	last := f.launches[len(f.launches)-1]
	if !last.inCapture || last.name != "add_f32" {
		t.Fatalf("captured launch %+v", last)
	}
}

func TestOpsValidateShapes(t *testing.T) {
	f := newFakeDriver()
	d := openFake(t, f)
	tests := []struct {
		name string
		op   func(s *Stream) error
	}{
		{"unsupported weight type", func(s *Stream) error {
			return s.Gemv(0, Weight{Type: ggml.TypeQ5_1, Rows: 4, Cols: 32}, 0, 1)
		}},
		{"cols not a multiple of the block", func(s *Stream) error {
			return s.Gemv(0, Weight{Type: ggml.TypeQ4_K, Rows: 4, Cols: 128}, 0, 1)
		}},
		{"weight bytes", func(s *Stream) error {
			_, err := s.UploadWeight(ggml.TypeQ8_0, 2, 32, make([]byte, 33))
			return err
		}},
		{"head dim", func(s *Stream) error {
			return s.AttnDecode(0, 0, 0, 0, 0, 0, 0, 1, 1, AttnParams{Heads: 4, KVHeads: 2, HeadDim: 48, PageSize: 16, MaxPages: 1})
		}},
		{"gqa ratio", func(s *Stream) error {
			return s.AttnDecode(0, 0, 0, 0, 0, 0, 0, 1, 1, AttnParams{Heads: 32, KVHeads: 2, HeadDim: 64, PageSize: 16, MaxPages: 1})
		}},
		{"rope", func(s *Stream) error {
			return s.Rope(0, 0, 1, RopeParams{Heads: 1, KVHeads: 1, HeadDim: 64, NRot: 65})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := d.Do(tc.op); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestGemvSplitsTokens(t *testing.T) {
	f := newFakeDriver()
	d := openFake(t, f)
	w := Weight{Type: ggml.TypeQ8_0, Rows: 100, Cols: 64, Ptr: 0x9000}
	err := d.Do(func(s *Stream) error { return s.Gemv(0x100000, w, 0x200000, 19) })
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	ls := f.launches[len(f.launches)-3:]
	f.mu.Unlock()
	for i, l := range ls {
		nt := []int32{8, 8, 3}[i]
		if l.name != "gemv_q8_0" || int32(l.params[6]) != nt || l.grid.X != 13 {
			t.Fatalf("launch %d: %+v", i, l)
		}
		if DevPtr(l.params[2]) != 0x200000+DevPtr(i*8*64*4) || DevPtr(l.params[3]) != 0x100000+DevPtr(i*8*100*4) {
			t.Fatalf("launch %d pointers x %#x y %#x", i, l.params[2], l.params[3])
		}
		if l.params[1] != 68 { // two Q8_0 blocks of 34 bytes
			t.Fatalf("row bytes %d", l.params[1])
		}
	}
}

func TestGraphGoesStaleWhenScratchMoves(t *testing.T) {
	f := newFakeDriver()
	d := openFake(t, f)
	a := AttnParams{Heads: 4, KVHeads: 2, HeadDim: 64, PageSize: 16, MaxPages: 8, Scale: 0.125}
	err := d.Do(func(s *Stream) error {
		if err := s.AttnDecode(0, 0, 0, 0, 0, 0, 0, 1, 16, a); err != nil { // sizes the scratch
			return err
		}
		g, err := s.Capture(func() error { return s.AttnDecode(0, 0, 0, 0, 0, 0, 0, 1, 16, a) })
		if err != nil {
			return err
		}
		if g.Stale() || g.Launch() != nil {
			t.Error("fresh graph unusable")
		}
		// A bigger batch grows the scratch: the graph's pointers are gone.
		if err := s.AttnDecode(0, 0, 0, 0, 0, 0, 0, 8, 1000, a); err != nil {
			return err
		}
		if !g.Stale() || !errors.Is(g.Launch(), ErrGraphStale) {
			t.Error("graph not stale after the scratch moved")
		}
		// Growing during capture is refused.
		_, err = s.Capture(func() error { return s.AttnDecode(0, 0, 0, 0, 0, 0, 0, 64, 4000, a) })
		if err == nil || !strings.Contains(err.Error(), "during graph capture") {
			t.Errorf("scratch growth in capture: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
