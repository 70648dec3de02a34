package cuda

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
)

// Device owns one CUDA context. All CUDA work for it runs on one goroutine
// locked to its OS thread (the driver's current context is per thread):
// callers hand it closures through Do, which run there one at a time with
// the device's *Stream.
type Device struct {
	info Info
	log  *slog.Logger

	mu     sync.RWMutex // protects closed; held (read) while a job is queued
	closed bool
	jobs   chan job
	done   chan struct{} // closed when the worker has released everything
}

type job struct {
	fn  func(*Stream) error
	res chan error
}

// Options configures Open.
type Options struct {
	// CacheDir is the compile-cache folder: "" = $OENGINE_CUDA_CACHE or the
	// user cache dir, "off" = no cache.
	CacheDir string
	// NoCublas skips loading cuBLAS; MatMul then always uses the GEMV
	// kernels. Without it a cuBLAS that cannot be loaded fails Open.
	NoCublas bool
	Logger   *slog.Logger
}

// libs is what a Device needs from the loaded libraries; tests fill it with fakes.
type libs struct {
	drv          *driverAPI
	compile      compileFunc // nil: no NVRTC
	nvrtcVersion string
	blas         *cublasAPI // nil: no cuBLAS
	onLaunch     launchHook // tests only
}

// Open loads the driver, NVRTC and (unless opts.NoCublas) cuBLAS, creates a
// context on device index, compiles the kernels (or loads them from the
// compile cache) and starts the device goroutine. Errors wrap the sentinels
// (ErrNoDriver, ErrNoDevice, ErrDriverTooOld, ErrNoNVRTC, ErrNoCUBLAS) and,
// for a library, list every file tried (LoadError). A missing cuBLAS is an
// error (prefill would silently run on GEMV kernels) unless opts.NoCublas.
func Open(index int, opts Options) (*Device, error) {
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	ds, err := loadDriver()
	if err != nil {
		return nil, err
	}
	info, err := deviceInfo(ds.api, index, ds.version, ds.count)
	if err != nil {
		return nil, err
	}
	info.DriverPath = ds.path
	nv, err := loadNVRTC(ds.version)
	if err != nil {
		return nil, err
	}
	l := libs{drv: ds.api, nvrtcVersion: nv.versionString(),
		compile: func(src string, o []string, k imageKind) ([]byte, error) { return nv.compile(src, "oengine.cu", o, k) }}
	if !opts.NoCublas {
		if l.blas, err = loadCublas(ds.version); err != nil {
			return nil, err
		}
	}
	return openWith(info, l, opts, lg)
}

func openWith(info Info, l libs, opts Options, lg *slog.Logger) (*Device, error) {
	d := &Device{info: info, log: lg, jobs: make(chan job), done: make(chan struct{})}
	cacheDir := opts.CacheDir
	switch cacheDir {
	case "":
		cacheDir = defaultCacheDir()
	case "off":
		cacheDir = ""
	}
	ready := make(chan error, 1)
	go d.run(l, diskCache{dir: cacheDir}, ready)
	if err := <-ready; err != nil {
		<-d.done
		return nil, err
	}
	return d, nil
}

// run is the device goroutine: it never unlocks its thread, so the thread
// (with its current-context state) exits with it.
func (d *Device) run(l libs, cache diskCache, ready chan<- error) {
	runtime.LockOSThread()
	defer close(d.done)
	s, err := newStream(d.info, l, cache, d.log)
	ready <- err
	if err != nil {
		return
	}
	for j := range d.jobs {
		j.res <- s.runJob(j.fn)
	}
	if err := s.release(); err != nil {
		d.log.Warn("cuda: release", "err", err)
	}
}

// Info describes the device.
func (d *Device) Info() Info { return d.info }

// Do runs fn on the device goroutine and returns its error. fn must not keep
// the *Stream after returning. Do calls from several goroutines are
// serialised; a panic inside fn is returned as an error.
func (d *Device) Do(fn func(*Stream) error) error {
	d.mu.RLock()
	if d.closed {
		d.mu.RUnlock()
		return ErrClosed
	}
	j := job{fn: fn, res: make(chan error, 1)}
	d.jobs <- j
	d.mu.RUnlock()
	return <-j.res
}

// Close stops the device goroutine after the queued jobs and releases every
// allocation, the kernels module and the context. It is safe to call twice.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		<-d.done
		return nil
	}
	d.closed = true
	close(d.jobs)
	d.mu.Unlock()
	<-d.done
	return nil
}

// runJob runs fn, turning a panic into an error so that one bad job does
// not take the process down.
func (s *Stream) runJob(fn func(*Stream) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cuda: panic in device job: %v", r)
		}
	}()
	if s.capturing {
		return errors.New("cuda: a previous job left a capture open")
	}
	return fn(s)
}
