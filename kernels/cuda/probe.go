package cuda

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// Probe loads the driver (once per process) and describes device 0, or
// returns why CUDA is unusable: an error wrapping ErrNoDriver, ErrNoDevice
// or ErrDriverTooOld.
func Probe() (Info, error) { return ProbeIndex(0) }

// ProbeIndex is Probe for device ordinal index.
func ProbeIndex(index int) (Info, error) {
	ds, err := loadDriver()
	if err != nil {
		return Info{}, err
	}
	info, err := deviceInfo(ds.api, index, ds.version, ds.count)
	if err != nil {
		return Info{}, err
	}
	info.DriverPath = ds.path
	return info, nil
}

// Usable is ProbeIndex plus the libraries Open needs: it also fails with
// ErrNoNVRTC when NVRTC cannot be loaded and ErrNoCUBLAS when cuBLAS
// cannot (each a *LoadError listing the files tried).
func Usable(index int) (Info, error) {
	info, err := ProbeIndex(index)
	if err != nil {
		return info, err
	}
	if _, err := loadNVRTC(info.DriverVersion); err != nil {
		return info, err
	}
	if _, err := loadCublas(info.DriverVersion); err != nil {
		return info, err
	}
	return info, nil
}

// Kind is a compute backend chosen by --device.
type Kind int

const (
	KindAuto Kind = iota // CUDA when usable, else CPU
	KindCPU
	KindCUDA
)

func (k Kind) String() string {
	switch k {
	case KindAuto:
		return "auto"
	case KindCPU:
		return "cpu"
	case KindCUDA:
		return "cuda"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseDevice parses a --device value: "auto", "cpu", "cuda" (device 0) or
// "cuda:N". The index is 0 except for cuda:N.
func ParseDevice(s string) (Kind, int, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	switch v {
	case "", "auto":
		return KindAuto, 0, nil
	case "cpu":
		return KindCPU, 0, nil
	case "cuda", "gpu":
		return KindCUDA, 0, nil
	}
	if rest, ok := strings.CutPrefix(v, "cuda:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			return 0, 0, fmt.Errorf("cuda: bad device %q: want cuda:N with N a device ordinal >= 0", s)
		}
		return KindCUDA, n, nil
	}
	return 0, 0, fmt.Errorf("cuda: bad device %q: want auto, cpu, cuda or cuda:N", s)
}

// usableFunc is Usable; tests substitute it.
type usableFunc func(index int) (Info, error)

// Select resolves a --device value to the backend to use. "auto" picks CUDA
// device 0 when Usable says so and otherwise the CPU, logging the reason;
// "cuda[:N]" returns the sentinel error when that device is unusable, so the
// caller fails instead of silently running on the CPU.
func Select(spec string, log *slog.Logger) (Kind, Info, error) {
	return selectWith(spec, log, Usable)
}

func selectWith(spec string, log *slog.Logger, usable usableFunc) (Kind, Info, error) {
	if log == nil {
		log = slog.Default()
	}
	kind, idx, err := ParseDevice(spec)
	if err != nil {
		return 0, Info{}, err
	}
	switch kind {
	case KindCPU:
		return KindCPU, Info{}, nil
	case KindCUDA:
		info, err := usable(idx)
		if err != nil {
			return 0, Info{}, err
		}
		return KindCUDA, info, nil
	}
	info, err := usable(0)
	if err != nil {
		log.Info("device auto: using CPU", "reason", err.Error())
		return KindCPU, Info{}, nil
	}
	log.Info("device auto: using CUDA", "device", info.String())
	return KindCUDA, info, nil
}
