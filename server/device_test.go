package server

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"oengine/kernels/cuda"
	"oengine/kernels/cuda/cudaemu"
	"oengine/loader"
)

// testDeviceEnv selects where the real-engine harnesses run the model:
// unset, the CPU; "cuda-emu", the CUDA model on the emulated device
// (kernels/cuda/cudaemu), so that the conformance and sessions suites run
// a second time on the GPU path (make test does).
const testDeviceEnv = "OENGINE_TEST_DEVICE"

// withTestDevice applies $OENGINE_TEST_DEVICE to loader options.
func withTestDevice(o loader.Options) loader.Options {
	if os.Getenv(testDeviceEnv) != "cuda-emu" {
		return o
	}
	o.Device = "cuda"
	o.OpenCUDA = func(int, *slog.Logger) (*cuda.Device, error) {
		d, err := cudaemu.Open(nil)
		if err != nil {
			return nil, err
		}
		return d.Device, nil
	}
	return o
}

// checkTestDevice fails when $OENGINE_TEST_DEVICE asked for the emulated
// CUDA device and the model does not run on it.
func checkTestDevice(t testing.TB, lm *loader.Model) {
	t.Helper()
	if os.Getenv(testDeviceEnv) == "cuda-emu" && (lm.GPU == nil || !strings.Contains(lm.Device.String(), "emulated")) {
		t.Fatalf("%s=cuda-emu but the model runs on %s", testDeviceEnv, lm.Device)
	}
}
