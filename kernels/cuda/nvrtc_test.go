package cuda

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestNVRTCCompilesKernels compiles the embedded kernels for the
// architectures oengine targets with whatever NVRTC this machine has
// (found by the normal search, or OENGINE_NVRTC_LIB, or Debian's
// libnvrtc11.2 package, which CI installs: CUDA 11.8 knows sm_80 and
// sm_90). NVRTC needs no GPU, so this runs wherever the library is present:
// the real compiler checks every kernel, inline PTX included (the CUBIN
// compile runs ptxas), on a machine without a GPU. It skips when there is
// no NVRTC, except under REQUIRE_GPU=1 or OENGINE_REQUIRE_NVRTC=1.
func TestNVRTCCompilesKernels(t *testing.T) {
	lib, err := loadNVRTCFrom(defaultSearchEnv(), 0, dlopenNow, dlsym)
	if err != nil {
		debian := defaultSearchEnv()
		getenv := debian.getenv
		debian.getenv = func(k string) string {
			if k == specNVRTC.env && getenv(k) == "" {
				return "libnvrtc.so.11.2"
			}
			return getenv(k)
		}
		if l, err2 := loadNVRTCFrom(debian, 0, dlopenNow, dlsym); err2 == nil {
			lib, err = l, nil
		}
	}
	if err != nil {
		if os.Getenv("REQUIRE_GPU") == "1" || os.Getenv("OENGINE_REQUIRE_NVRTC") == "1" {
			t.Fatalf("NVRTC required: %v", err)
		}
		if !errors.Is(err, ErrNoNVRTC) {
			t.Fatalf("load error does not wrap ErrNoNVRTC: %v", err)
		}
		t.Skipf("no NVRTC: %v", err)
	}
	t.Logf("NVRTC %s from %s", lib.versionString(), lib.path)
	src := Source()
	// PTX for every entry point, then machine code for the Hopper and
	// Ampere targets (ptxas checks the inline PTX: mma, ldmatrix, dp4a).
	for _, cc := range []int{90, 80} {
		for _, kind := range []imageKind{imagePTX, imageCUBIN} {
			img, err := lib.compile(src, "oengine.cu", compileOptions(cc, kind), kind)
			if err != nil {
				t.Fatalf("sm_%d kind %d: %v", cc, kind, err)
			}
			if kind == imagePTX {
				ptx := string(img)
				for _, k := range allKernels() {
					if !strings.Contains(ptx, ".entry "+string(k)+"(") {
						t.Errorf("sm_%d PTX lacks entry %s", cc, k)
					}
				}
			} else if len(img) < 4 || string(img[1:4]) != "ELF" {
				t.Errorf("sm_%d CUBIN is not an ELF image", cc)
			}
		}
	}
	// A broken program reports the compiler log.
	_, err = lib.compile("extern \"C\" __global__ void f() { undefined_thing(); }", "bad.cu", compileOptions(90, imagePTX), imagePTX)
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, "undefined_thing") {
		t.Fatalf("bad program: want CompileError with log, got %v", err)
	}
}
