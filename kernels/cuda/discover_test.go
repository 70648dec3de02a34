package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeTree creates empty files at the given paths under root.
func fakeTree(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("not really ELF"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func testEnv(root string, env map[string]string) searchEnv {
	e := defaultSearchEnv()
	e.getenv = func(k string) string { return env[k] }
	e.cudaRoots = []string{filepath.Join(root, "cuda")}
	e.sites = []string{filepath.Join(root, "venv/lib/python3.12/site-packages"), filepath.Join(root, "usr/lib/python3/dist-packages")}
	return e
}

func rel(root string, ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") && filepath.IsAbs(p) {
			out[i] = r
		} else {
			out[i] = p
		}
	}
	return out
}

func TestCandidatesOrder(t *testing.T) {
	root := t.TempDir()
	fakeTree(t, root,
		"override/libnvrtc.so.12",
		"cuda/lib64/libnvrtc.so.12",
		"cuda/lib64/libnvrtc.so.13",
		"cuda/targets/x86_64-linux/lib/libnvrtc.so.12",
		"venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
		"venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
		"usr/lib/python3/dist-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
		"venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12",
	)
	tests := []struct {
		name   string
		env    map[string]string
		spec   libSpec
		driver int
		want   []string
	}{
		{
			name: "system only",
			spec: specNVRTC,
			want: []string{"libnvrtc.so.13", "libnvrtc.so.12",
				"cuda/lib64/libnvrtc.so.13", "cuda/lib64/libnvrtc.so.12",
				"cuda/targets/x86_64-linux/lib/libnvrtc.so.12",
				"venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
				"venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
				"usr/lib/python3/dist-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"},
		},
		{
			name: "env override and lib dir first",
			spec: specNVRTC,
			env: map[string]string{"OENGINE_NVRTC_LIB": "/opt/x/libnvrtc.so",
				EnvLibDir: filepath.Join(root, "nothing") + ":" + filepath.Join(root, "override")},
			want: []string{"/opt/x/libnvrtc.so", "override/libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so.12",
				"cuda/lib64/libnvrtc.so.13", "cuda/lib64/libnvrtc.so.12",
				"cuda/targets/x86_64-linux/lib/libnvrtc.so.12",
				"venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
				"venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
				"usr/lib/python3/dist-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"},
		},
		{
			name:   "CUDA 12 driver prefers the .12 libraries",
			spec:   specNVRTC,
			driver: 12080,
			want: []string{"libnvrtc.so.12", "libnvrtc.so.13",
				"cuda/lib64/libnvrtc.so.12", "cuda/lib64/libnvrtc.so.13",
				"cuda/targets/x86_64-linux/lib/libnvrtc.so.12",
				"venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
				"venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
				"usr/lib/python3/dist-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"},
		},
		{
			name: "cublas from pip",
			spec: specCublas,
			want: []string{"libcublas.so.13", "libcublas.so.12", "venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12"},
		},
		{
			name: "driver soname only",
			spec: specDriver,
			want: []string{"libcuda.so.1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := rel(root, testEnv(root, tc.env).candidates(tc.spec.forDriver(tc.driver)))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("candidates\n got  %q\n want %q", got, tc.want)
			}
		})
	}
}

func TestOpenLibTriesInOrder(t *testing.T) {
	root := t.TempDir()
	fakeTree(t, root, "cuda/lib64/libcublas.so.12")
	e := testEnv(root, nil)
	var tried []string
	open := func(p string) (uintptr, error) {
		tried = append(tried, p)
		if strings.HasSuffix(p, "cuda/lib64/libcublas.so.12") {
			return 42, nil
		}
		return 0, fmt.Errorf("cannot open %s", filepath.Base(p))
	}
	h, path, err := openLib(specCublas, e, open)
	if err != nil || h != 42 || !strings.HasSuffix(path, "cuda/lib64/libcublas.so.12") {
		t.Fatalf("openLib = %d, %q, %v", h, path, err)
	}
	if len(tried) != 3 {
		t.Fatalf("tried %q", tried)
	}

	fail := func(string) (uintptr, error) { return 0, errors.New("nope") }
	for _, tc := range []struct {
		spec libSpec
		want error
	}{{specDriver, ErrNoDriver}, {specNVRTC, ErrNoNVRTC}, {specCublas, ErrNoCUBLAS}, {specCublasLt, ErrNoCUBLAS}} {
		_, _, err := openLib(tc.spec, e, fail)
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v", tc.spec.what, err)
		}
		var le *LoadError
		if !errors.As(err, &le) || len(le.Tries) == 0 || !strings.Contains(err.Error(), "nope") {
			t.Fatalf("%s: load error lists no attempts: %v", tc.spec.what, err)
		}
	}
}

func TestSitePackages(t *testing.T) {
	root := t.TempDir()
	fakeTree(t, root, "venv/lib/python3.10/site-packages/x", "venv/lib/python3.12/site-packages/x", "home/.local/lib/python3.11/site-packages/x")
	env := map[string]string{"VIRTUAL_ENV": filepath.Join(root, "venv"), "HOME": filepath.Join(root, "home")}
	got := rel(root, sitePackages(func(k string) string { return env[k] }, filepath.Glob))
	want := []string{"venv/lib/python3.12/site-packages", "venv/lib/python3.10/site-packages", "home/.local/lib/python3.11/site-packages"}
	if len(got) < 3 || !reflect.DeepEqual(got[:3], want) {
		t.Fatalf("sites %q, want prefix %q", got, want)
	}
}

func TestLoadDriverMissingSymbol(t *testing.T) {
	root := t.TempDir()
	e := testEnv(root, nil)
	open := func(string) (uintptr, error) { return 7, nil }
	lookup := func(h uintptr, name string) (uintptr, error) {
		if name == "cuGraphInstantiateWithFlags" {
			return 0, errors.New("undefined symbol")
		}
		return 0x1234, nil // never called
	}
	_, _, err := loadDriverFrom(e, open, lookup)
	if !errors.Is(err, ErrDriverTooOld) || !strings.Contains(err.Error(), "cuGraphInstantiateWithFlags") {
		t.Fatalf("err %v", err)
	}
}

// TestNoDriverHere: on a machine without libcuda (CI, this dev box) Probe
// must fail with ErrNoDriver, and Select("auto") must choose the CPU.
func TestNoDriverHere(t *testing.T) {
	h, _, err := openLib(specDriver, defaultSearchEnv(), dlopenNow)
	if err == nil {
		t.Skipf("a CUDA driver is present (handle %#x)", h)
	}
	if _, err := Probe(); !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Probe: %v", err)
	}
	if _, err := Open(0, Options{Logger: quietLog()}); !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Open: %v", err)
	}
	k, _, err := Select("auto", quietLog())
	if err != nil || k != KindCPU {
		t.Fatalf("Select auto = %v, %v", k, err)
	}
	if _, _, err := Select("cuda", quietLog()); !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Select cuda: %v", err)
	}
}

// CUDA libraries installed as Python wheels are found through the active
// virtualenv and through the python3 interpreter on $PATH (its prefix after
// symlinks), here on a fake folder tree.
func TestWheelDiscovery(t *testing.T) {
	root := t.TempDir()
	fakeTree(t, root,
		"venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublasLt.so.12",
		"opt/py312/bin/python3.12",
		"opt/py312/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
		"opt/py312/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13")
	if err := os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "opt/py312/bin/python3.12"), filepath.Join(root, "usr/bin/python3")); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"VIRTUAL_ENV": filepath.Join(root, "venv"), "PATH": filepath.Join(root, "usr/bin") + ":" + filepath.Join(root, "nowhere")}
	e := testEnv(root, nil)
	e.getenv = func(k string) string { return env[k] }
	e.cudaRoots = nil
	e.sites = nil
	for _, d := range sitePackages(e.getenv, filepath.Glob) {
		if strings.HasPrefix(d, root) { // the system's own folders stay out of the expectation
			e.sites = append(e.sites, d)
		}
	}
	tests := []struct {
		spec libSpec
		want []string
	}{
		{specCublas, []string{"libcublas.so.13", "libcublas.so.12", "venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12"}},
		{specNVRTC, []string{"libnvrtc.so.13", "libnvrtc.so.12",
			"opt/py312/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
			"opt/py312/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"}},
	}
	for _, tc := range tests {
		if got := rel(root, e.candidates(tc.spec)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: candidates %q, want %q", tc.spec.what, got, tc.want)
		}
	}
	// Only the wheel file loads: the error-free path is the wheel's.
	open := func(p string) (uintptr, error) {
		if strings.HasSuffix(p, "nvidia/cublas/lib/libcublas.so.12") {
			return 1, nil
		}
		return 0, errors.New("not here")
	}
	_, path, err := openLib(specCublas, e, open)
	if err != nil || !strings.HasSuffix(path, "venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12") {
		t.Fatalf("openLib: %q, %v", path, err)
	}
	// Nothing loads: the error is ErrNoCUBLAS and names every file tried.
	_, _, err = openLib(specCublas, e, func(string) (uintptr, error) { return 0, errors.New("nope") })
	if !errors.Is(err, ErrNoCUBLAS) || !strings.Contains(err.Error(), "nvidia/cublas/lib/libcublas.so.12: nope") {
		t.Fatalf("err %v", err)
	}
}
