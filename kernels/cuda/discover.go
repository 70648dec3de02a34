package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Library discovery. Which files to try, in which order, is computed here
// from the environment and the file system alone (no dlopen), so tests run
// it on temporary folders. The order for one library:
//
//  1. its own env override, a full file path (libSpec.env, e.g. OENGINE_NVRTC_LIB);
//  2. each folder of OENGINE_CUDA_LIB_DIR (colon separated);
//  3. the bare sonames, searched by the dynamic loader (LD_LIBRARY_PATH, ld.so.cache);
//  4. each CUDA root ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda): lib64, then
//     targets/x86_64-linux/lib;
//  5. pip wheels: every site-packages/nvidia/*/lib folder (nvidia-cublas-cu12,
//     nvidia-cuda-nvrtc-cu12, the cu13 wheels' nvidia/cu13/lib, ...).
//
// Within one location the sonames are tried newest first (13 before 12),
// unless the driver is older than CUDA 13, in which case 12 comes first: a
// CUDA 13 NVRTC or cuBLAS does not run on a 12.x driver.

// EnvLibDir names a colon-separated list of folders searched before the
// system locations.
const EnvLibDir = "OENGINE_CUDA_LIB_DIR"

// libSpec describes one shared library to find.
type libSpec struct {
	what    string   // human name for errors: "driver", "NVRTC", ...
	env     string   // env var holding a full path that overrides the search
	sonames []string // newest first
	missing error    // sentinel returned when nothing loads
}

var (
	specDriver = libSpec{what: "CUDA driver", env: "OENGINE_CUDA_DRIVER_LIB",
		sonames: []string{"libcuda.so.1"}, missing: ErrNoDriver}
	specNVRTC = libSpec{what: "NVRTC", env: "OENGINE_NVRTC_LIB",
		sonames: []string{"libnvrtc.so.13", "libnvrtc.so.12"}, missing: ErrNoNVRTC}
	specCublasLt = libSpec{what: "cuBLASLt", env: "OENGINE_CUBLASLT_LIB",
		sonames: []string{"libcublasLt.so.13", "libcublasLt.so.12"}, missing: ErrNoCUBLAS}
	specCublas = libSpec{what: "cuBLAS", env: "OENGINE_CUBLAS_LIB",
		sonames: []string{"libcublas.so.13", "libcublas.so.12"}, missing: ErrNoCUBLAS}
)

// forDriver returns l with its sonames ordered for a driver of the given
// version (cuDriverGetVersion encoding; 0 = unknown, keep newest first).
func (l libSpec) forDriver(version int) libSpec {
	if version == 0 || version >= 13000 || len(l.sonames) < 2 {
		return l
	}
	s := append([]string(nil), l.sonames...)
	// Older driver: versions whose major exceeds the driver's go last.
	major := version / 1000
	sort.SliceStable(s, func(i, j int) bool {
		return sonameMajor(s[i]) <= major && sonameMajor(s[j]) > major
	})
	l.sonames = s
	return l
}

// sonameMajor returns N of "libX.so.N" (0 when there is none).
func sonameMajor(s string) int {
	i := strings.LastIndex(s, ".so.")
	if i < 0 {
		return 0
	}
	n := 0
	for _, c := range s[i+4:] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// searchEnv is everything discovery reads from the outside world.
type searchEnv struct {
	getenv    func(string) string
	cudaRoots []string // CUDA toolkit roots, in order
	sites     []string // python site-packages / dist-packages folders, in order
	exists    func(path string) bool
	glob      func(pattern string) ([]string, error)
}

// defaultSearchEnv reads the real environment and file system.
func defaultSearchEnv() searchEnv {
	e := searchEnv{
		getenv: os.Getenv,
		exists: func(p string) bool {
			st, err := os.Stat(p)
			return err == nil && !st.IsDir()
		},
		glob: filepath.Glob,
	}
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if r := os.Getenv(v); r != "" {
			e.cudaRoots = append(e.cudaRoots, r)
		}
	}
	e.cudaRoots = append(e.cudaRoots, "/usr/local/cuda")
	e.sites = sitePackages(os.Getenv, filepath.Glob)
	return e
}

// sitePackages lists the python package folders that may hold pip's nvidia
// wheels: the active virtualenv / conda env first, then those of each
// python3 interpreter on $PATH (its prefix is the folder above its bin/,
// after symlinks: pyenv, /opt installs, a venv's bin on the PATH), then the
// user's and the system's. Nothing is executed.
func sitePackages(getenv func(string) string, glob func(string) ([]string, error)) []string {
	var pats []string
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if r := getenv(v); r != "" {
			pats = append(pats, filepath.Join(r, "lib/python3*/site-packages"))
		}
	}
	for _, dir := range filepath.SplitList(getenv("PATH")) {
		if dir == "" {
			continue
		}
		for _, exe := range []string{"python3", "python"} {
			m, _ := glob(filepath.Join(dir, exe))
			if len(m) == 0 {
				continue
			}
			for _, p := range []string{m[0], resolve(m[0])} {
				prefix := filepath.Dir(filepath.Dir(p))
				pats = append(pats, filepath.Join(prefix, "lib/python3*/site-packages"),
					filepath.Join(prefix, "lib/python3*/dist-packages"))
			}
		}
	}
	if h := getenv("HOME"); h != "" {
		pats = append(pats, filepath.Join(h, ".local/lib/python3*/site-packages"))
	}
	pats = append(pats,
		"/usr/local/lib/python3*/dist-packages",
		"/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages",
		"/usr/lib/python3*/site-packages",
		"/opt/conda/lib/python3*/site-packages",
	)
	var out []string
	seen := map[string]bool{}
	for _, p := range pats {
		m, _ := glob(p)
		sort.Sort(sort.Reverse(sort.StringSlice(m))) // python3.12 before python3.10
		for _, d := range m {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}

// resolve follows symlinks (p itself when that fails).
func resolve(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// candidates returns the paths to hand to dlopen for l, in order. Paths
// inside folders are listed only when the file exists; bare sonames are
// always listed (the dynamic loader searches for them).
func (e searchEnv) candidates(l libSpec) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	inDir := func(dir string) {
		for _, s := range l.sonames {
			if p := filepath.Join(dir, s); e.exists(p) {
				add(p)
			}
		}
	}
	if l.env != "" {
		if p := e.getenv(l.env); p != "" {
			add(p) // as given: an explicit choice is tried even if stat fails
		}
	}
	for _, d := range filepath.SplitList(e.getenv(EnvLibDir)) {
		if d != "" {
			inDir(d)
		}
	}
	for _, s := range l.sonames {
		add(s)
	}
	for _, r := range e.cudaRoots {
		inDir(filepath.Join(r, "lib64"))
		inDir(filepath.Join(r, "targets/x86_64-linux/lib"))
	}
	for _, site := range e.sites {
		dirs, _ := e.glob(filepath.Join(site, "nvidia/*/lib"))
		sort.Strings(dirs)
		for _, d := range dirs {
			inDir(d)
		}
	}
	return out
}

// openFunc loads a shared library (purego.Dlopen in production).
type openFunc func(path string) (uintptr, error)

// openLib tries l's candidates in order and returns the first that loads.
// When none does, the error wraps l.missing and lists every attempt.
func openLib(l libSpec, e searchEnv, open openFunc) (handle uintptr, path string, err error) {
	var tries []string
	for _, p := range e.candidates(l) {
		h, err := open(p)
		if err == nil {
			return h, p, nil
		}
		tries = append(tries, fmt.Sprintf("%s: %v", p, err))
	}
	return 0, "", &LoadError{What: l.what, Tries: tries, Err: l.missing}
}

// LoadError says which files were tried for a library and why each failed.
type LoadError struct {
	What  string
	Tries []string
	Err   error // one of the sentinel errors
}

func (e *LoadError) Error() string {
	if len(e.Tries) == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("%v; tried: %s", e.Err, strings.Join(e.Tries, "; "))
}

func (e *LoadError) Unwrap() error { return e.Err }

// isSentinel reports whether err wraps one of the "unusable" sentinels.
func isSentinel(err error) bool {
	for _, s := range []error{ErrNoDriver, ErrNoDevice, ErrDriverTooOld, ErrNoNVRTC, ErrNoCUBLAS} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
