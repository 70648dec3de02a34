package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"oengine/kernels/cuda"
	"oengine/kernels/cuda/cudaemu"
	"oengine/model/gguf"
)

func TestOpenDevice(t *testing.T) {
	emu := func(int, *slog.Logger) (*cuda.Device, error) {
		d, err := cudaemu.Open(nil)
		if err != nil {
			return nil, err
		}
		return d.Device, nil
	}
	fail := func(err error) Opener {
		return func(int, *slog.Logger) (*cuda.Device, error) { return nil, err }
	}
	noBLAS := fmt.Errorf("%w; tried: libcublas.so.13: not found; /venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12: not found", cuda.ErrNoCUBLAS)
	tests := []struct {
		name, spec string
		open       Opener
		kind       cuda.Kind
		errHas     []string // non-empty: Open must fail with all of these
		logHas     string
	}{
		{name: "cpu", spec: "cpu", open: fail(errors.New("must not be called")), kind: cuda.KindCPU},
		{name: "cuda", spec: "cuda", open: emu, kind: cuda.KindCUDA},
		{name: "cuda:0 emulated", spec: "cuda:0", open: emu, kind: cuda.KindCUDA},
		{name: "auto with a device", spec: "auto", open: emu, kind: cuda.KindCUDA, logHas: "using CUDA"},
		{name: "auto without a driver", spec: "auto", open: fail(fmt.Errorf("%w; tried: libcuda.so.1: not found", cuda.ErrNoDriver)),
			kind: cuda.KindCPU, logHas: "no CUDA driver"},
		{name: "auto without cuBLAS", spec: "", open: fail(noBLAS), kind: cuda.KindCPU, logHas: "no cuBLAS"},
		{name: "cuda without a driver", spec: "cuda", open: fail(fmt.Errorf("%w; tried: libcuda.so.1: not found", cuda.ErrNoDriver)),
			errHas: []string{"--device cuda", "no CUDA driver", "tried: libcuda.so.1"}},
		{name: "cuda:1 without cuBLAS", spec: "cuda:1", open: fail(noBLAS),
			errHas: []string{"--device cuda:1", "no cuBLAS", "nvidia/cublas/lib/libcublas.so.12"}},
		{name: "cuda without NVRTC", spec: "cuda", open: fail(fmt.Errorf("%w; tried: libnvrtc.so.13: x", cuda.ErrNoNVRTC)),
			errHas: []string{"no NVRTC", "libnvrtc.so.13"}},
		{name: "cuda:3 absent", spec: "cuda:3", open: fail(fmt.Errorf("%w: device 3 requested, 1 present", cuda.ErrNoDevice)),
			errHas: []string{"no CUDA device", "device 3 requested"}},
		{name: "bad spec", spec: "metal", open: emu, errHas: []string{"bad device"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			d, err := OpenWith(tc.spec, slog.New(slog.NewTextHandler(&log, nil)), tc.open)
			if len(tc.errHas) > 0 {
				if err == nil {
					d.Close()
					t.Fatal("no error")
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.Kind != tc.kind || (d.Kind == cuda.KindCUDA) != (d.CUDA != nil) {
				t.Fatalf("kind %v, device %v; want %v", d.Kind, d.CUDA, tc.kind)
			}
			if !strings.Contains(log.String(), tc.logHas) {
				t.Errorf("log %q lacks %q", log.String(), tc.logHas)
			}
			if tc.kind == cuda.KindCPU && tc.logHas != "" && !strings.Contains(d.String(), "auto: ") {
				t.Errorf("banner %q does not say why auto chose the CPU", d.String())
			}
			if tc.kind == cuda.KindCUDA && !strings.Contains(d.String(), "Fake H200") {
				t.Errorf("banner %q does not name the device", d.String())
			}
		})
	}
}

// The automatic KV budget is the free device memory less the workspace
// and the headroom, and an explicit budget beyond it is refused.
func TestKVMemoryAuto(t *testing.T) {
	d := emuDevice(t)
	path := filepath.Join("..", "..", "..", "shared", "testdata", "models", "tiny-llama-q8_0.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Skip("shared testdata missing")
	}
	defer f.Close()
	m, err := Load(d.Device, f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got, err := m.KVMemoryAuto(16)
	if err != nil {
		t.Fatal(err)
	}
	// The fake driver reports 100 GiB free of 141 GiB.
	total := float64(141 << 30)
	headroom := int64(HeadroomFraction * total)
	want := int64(100<<30) - m.Workspace(16) - headroom
	if got != want || m.Workspace(16) <= 0 {
		t.Fatalf("KV budget %d, want %d", got, want)
	}
}
