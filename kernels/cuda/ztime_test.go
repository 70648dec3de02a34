package cuda

import (
	"testing"
	"time"
)

func TestTimeParts(t *testing.T) {
	lib, err := loadNVRTCFrom(defaultSearchEnv(), 0, dlopenNow, dlsym)
	if err != nil {
		t.Skip(err)
	}
	common, _ := kernelFS.ReadFile("kernels/common.cu")
	for _, f := range sourceOrder[1:] {
		b, _ := kernelFS.ReadFile("kernels/" + f)
		t0 := time.Now()
		_, err := lib.compile(string(common)+string(b), "x.cu", compileOptions(90, imageCUBIN), imageCUBIN)
		t.Logf("%s: %v %v", f, time.Since(t0), err)
	}
}
