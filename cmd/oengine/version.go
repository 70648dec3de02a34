package main

import (
	"errors"
	"fmt"
	"io"
	goruntime "runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/cpu"

	kcpu "oengine/kernels/cpu"
	"oengine/kernels/cuda"
)

func init() {
	register("version", "print the version, build settings, CPU features and CUDA libraries found", runVersion)
	helpTable["version"] = cmdHelp{synopsis: "", examples: []string{"oengine version", "oengine --version"}}
}

// version is the engine version reported by GetServerInfo and `oengine
// version`.
var version = "0.1.0-dev"

// versionConfig is what `oengine version` was asked for (nothing yet).
type versionConfig struct{}

func parseVersion(args []string) (versionConfig, error) {
	fs := newFlags("version", nil)
	return versionConfig{}, fs.Parse(args)
}

func runVersion(args []string, stdout, _ io.Writer) error {
	if _, err := parseVersion(args); err != nil {
		return err
	}
	_, err := io.WriteString(stdout, versionText(readBuildFacts(), cpuFeatures(), kcpu.Features(), cudaStatus()))
	return err
}

// buildFacts are the facts of debug.ReadBuildInfo that versionText prints.
type buildFacts struct {
	module, modVersion string
	commit, time       string
	dirty              bool
	goVersion          string
	settings           []string // "-race=true", "CGO_ENABLED=1", ...
}

func readBuildFacts() buildFacts {
	b := buildFacts{goVersion: goruntime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.module, b.modVersion, b.goVersion = bi.Main.Path, bi.Main.Version, bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.commit = s.Value
		case "vcs.time":
			b.time = s.Value
		case "vcs.modified":
			b.dirty = s.Value == "true"
		case "-race", "CGO_ENABLED", "-tags", "-trimpath", "-ldflags", "-gcflags", "-asan", "-msan",
			"GOAMD64", "GOARM64", "GOEXPERIMENT":
			b.settings = append(b.settings, s.Key+"="+s.Value)
		}
	}
	return b
}

// cpuFeatures lists the instruction-set extensions the kernels care about
// that this CPU has.
func cpuFeatures() []string {
	var out []string
	add := func(has bool, name string) {
		if has {
			out = append(out, name)
		}
	}
	x := cpu.X86
	add(x.HasSSE42, "SSE4.2")
	add(x.HasAVX, "AVX")
	add(x.HasAVX2, "AVX2")
	add(x.HasFMA, "FMA")
	add(x.HasAVX512F, "AVX-512F")
	add(x.HasAVX512BW, "AVX-512BW")
	add(x.HasAVX512VL, "AVX-512VL")
	add(x.HasAVX512VNNI, "AVX512-VNNI")
	add(x.HasAVX512BF16, "AVX512-BF16")
	add(x.HasAVXVNNI, "AVX-VNNI")
	a := cpu.ARM64
	add(a.HasASIMD, "ASIMD")
	add(a.HasASIMDDP, "ASIMD-DOTPROD")
	add(a.HasSVE, "SVE")
	return out
}

// cudaStatus says whether the CUDA driver and NVRTC load and what device 0
// is, or "not found" and why. It needs no GPU: without a driver or device
// the probe fails fast.
func cudaStatus() string {
	info, err := cuda.Usable(0)
	if err != nil {
		return "not found (" + shortCUDAError(err) + ")"
	}
	return fmt.Sprintf("driver %s, NVRTC found, %s", info.DriverPath, info)
}

// shortCUDAError is the sentinel's message when err wraps one (the full
// error lists every path tried).
func shortCUDAError(err error) string {
	for _, s := range []error{cuda.ErrNoDriver, cuda.ErrNoDevice, cuda.ErrDriverTooOld, cuda.ErrNoNVRTC, cuda.ErrNoCUBLAS} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return err.Error()
}

func versionText(b buildFacts, features []string, kernels, cudaLine string) string {
	var w strings.Builder
	fmt.Fprintf(&w, "oengine %s\n", version)
	mod := b.module
	if b.modVersion != "" {
		mod += " " + b.modVersion
	}
	if mod == "" {
		mod = "unknown (no build information)"
	}
	fmt.Fprintf(&w, "module:    %s\n", mod)
	commit := b.commit
	switch {
	case commit == "":
		commit = "unknown (built without VCS information)"
	case b.dirty:
		commit += " (dirty: uncommitted changes)"
	}
	if b.time != "" {
		commit += ", " + b.time
	}
	fmt.Fprintf(&w, "commit:    %s\n", commit)
	fmt.Fprintf(&w, "go:        %s %s/%s\n", b.goVersion, goruntime.GOOS, goruntime.GOARCH)
	settings := "default"
	if len(b.settings) > 0 {
		settings = strings.Join(b.settings, " ")
	}
	fmt.Fprintf(&w, "build:     %s\n", settings)
	feat := "none detected"
	if len(features) > 0 {
		feat = strings.Join(features, " ")
	}
	fmt.Fprintf(&w, "cpu:       %s (kernels: %s, %d logical CPUs)\n", feat, kernels, goruntime.NumCPU())
	fmt.Fprintf(&w, "cuda:      %s\n", cudaLine)
	return w.String()
}
