package gpu

import (
	"errors"
	"fmt"
	"log/slog"

	"oengine/kernels/cuda"
)

// Device is the compute backend --device chose.
type Device struct {
	Kind cuda.Kind    // cuda.KindCPU or cuda.KindCUDA
	CUDA *cuda.Device // the open device when Kind is KindCUDA
	Info cuda.Info    // the device's description when Kind is KindCUDA
	// Reason says why --device auto chose the CPU ("" otherwise).
	Reason string
}

// String names the device for banners and logs: "cpu", "cpu (auto: …)" or
// the CUDA device's description.
func (d Device) String() string {
	if d.Kind == cuda.KindCUDA {
		return d.Info.String()
	}
	if d.Reason != "" {
		return "cpu (auto: " + d.Reason + ")"
	}
	return "cpu"
}

// Close releases the CUDA device, if any (safe to call twice).
func (d Device) Close() error {
	if d.CUDA != nil {
		return d.CUDA.Close()
	}
	return nil
}

// Opener opens CUDA device index (cuda.Open in production; tests pass an
// emulated or failing one).
type Opener func(index int, lg *slog.Logger) (*cuda.Device, error)

// OpenCUDA is the production Opener: the driver, NVRTC and cuBLAS, all
// required.
func OpenCUDA(index int, lg *slog.Logger) (*cuda.Device, error) {
	return cuda.Open(index, cuda.Options{Logger: lg})
}

// Open resolves a --device value: "cpu"; "cuda" or "cuda:N", which opens
// that device or fails with an error naming what is missing (driver,
// device, NVRTC, cuBLAS) and the files tried; "auto" (or ""), which opens
// CUDA device 0 when it can and otherwise chooses the CPU, logging why.
func Open(spec string, lg *slog.Logger) (Device, error) { return OpenWith(spec, lg, OpenCUDA) }

// OpenWith is Open with another way to open a CUDA device.
func OpenWith(spec string, lg *slog.Logger, open Opener) (Device, error) {
	if lg == nil {
		lg = slog.Default()
	}
	kind, idx, err := cuda.ParseDevice(spec)
	if err != nil {
		return Device{}, fmt.Errorf("gpu: --device: %w", err)
	}
	switch kind {
	case cuda.KindCPU:
		return Device{Kind: cuda.KindCPU}, nil
	case cuda.KindCUDA:
		d, err := open(idx, lg)
		if err != nil {
			return Device{}, fmt.Errorf("gpu: --device %s: %s: %w", spec, Missing(err), err)
		}
		return Device{Kind: cuda.KindCUDA, CUDA: d, Info: d.Info()}, nil
	}
	d, err := open(0, lg)
	if err != nil {
		reason := Missing(err)
		lg.Info("device auto: using the CPU", "reason", reason, "detail", err.Error())
		return Device{Kind: cuda.KindCPU, Reason: reason}, nil
	}
	lg.Info("device auto: using CUDA", "device", d.Info().String())
	return Device{Kind: cuda.KindCUDA, CUDA: d, Info: d.Info()}, nil
}

// Missing names what a failed CUDA open lacked, in a few words.
func Missing(err error) string {
	switch {
	case errors.Is(err, cuda.ErrNoDriver):
		return "no CUDA driver (libcuda.so.1)"
	case errors.Is(err, cuda.ErrDriverTooOld):
		return "CUDA driver too old"
	case errors.Is(err, cuda.ErrNoDevice):
		return "no CUDA device"
	case errors.Is(err, cuda.ErrNoNVRTC):
		return "no NVRTC (libnvrtc.so.13/.12)"
	case errors.Is(err, cuda.ErrNoCUBLAS):
		return "no cuBLAS (libcublas.so.13/.12 with libcublasLt)"
	}
	return "CUDA unusable"
}
