package cuda

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestNVRTCCompilesKernels compiles the embedded kernels for the
// architectures oengine targets with whatever NVRTC this machine has
// (found by the normal search, or OENGINE_NVRTC_LIB). NVRTC needs no GPU,
// so this runs wherever the library is present; it skips otherwise, except
// under REQUIRE_GPU=1.
func TestNVRTCCompilesKernels(t *testing.T) {
	lib, err := loadNVRTCFrom(defaultSearchEnv(), 0, dlopenNow, dlsym)
	if err != nil {
		if os.Getenv("REQUIRE_GPU") == "1" {
			t.Fatalf("NVRTC required: %v", err)
		}
		if !errors.Is(err, ErrNoNVRTC) {
			t.Fatalf("load error does not wrap ErrNoNVRTC: %v", err)
		}
		t.Skipf("no NVRTC: %v", err)
	}
	t.Logf("NVRTC %s from %s", lib.versionString(), lib.path)
	src := Source()
	// One PTX compile checks every entry point (the CUBIN path runs in Open,
	// exercised by the GPU tests; a full compile takes tens of seconds).
	for _, cc := range []int{90} {
		for _, kind := range []imageKind{imagePTX} {
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
