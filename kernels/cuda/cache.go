package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Compile cache. A compiled module (CUBIN or PTX) is stored on disk under a
// key that hashes everything the result depends on: the source, the NVRTC
// options, the NVRTC version and the device's compute capability. Files are
// written to a temporary name in the same folder and renamed into place, so
// a reader never sees a partial file; each file starts with a header
// carrying the SHA-256 of its image, so a damaged file is a miss, not a
// crash in cuModuleLoadData.

// EnvCacheDir overrides the cache folder ("off" disables the cache).
const EnvCacheDir = "OENGINE_CUDA_CACHE"

const cacheMagic = "OECUDA1\n"

// cacheKey returns the hex SHA-256 key of a compilation.
func cacheKey(src string, opts []string, nvrtcVersion string, cc int, kind imageKind) string {
	h := sha256.New()
	field := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	field("oengine-cuda-v1")
	field(src)
	field(strconv.Itoa(len(opts)))
	for _, o := range opts {
		field(o)
	}
	field(nvrtcVersion)
	field(strconv.Itoa(cc))
	field(strconv.Itoa(int(kind)))
	return hex.EncodeToString(h.Sum(nil))
}

// diskCache stores compiled images in dir ("" = disabled).
type diskCache struct {
	dir string
}

// defaultCacheDir returns $OENGINE_CUDA_CACHE, else <user cache dir>/oengine/cuda.
func defaultCacheDir() string {
	if d := os.Getenv(EnvCacheDir); d != "" {
		if d == "off" {
			return ""
		}
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "oengine-cuda-cache")
	}
	return filepath.Join(base, "oengine", "cuda")
}

func (c diskCache) path(key string) string { return filepath.Join(c.dir, key+".bin") }

// get returns the image stored under key; ok is false on a miss, including
// a file whose header or checksum does not match.
func (c diskCache) get(key string) (img []byte, ok bool) {
	if c.dir == "" {
		return nil, false
	}
	data, err := os.ReadFile(c.path(key))
	if err != nil {
		return nil, false
	}
	if !bytes.HasPrefix(data, []byte(cacheMagic)) || len(data) < len(cacheMagic)+sha256.Size {
		return nil, false
	}
	sum := data[len(cacheMagic) : len(cacheMagic)+sha256.Size]
	img = data[len(cacheMagic)+sha256.Size:]
	if got := sha256.Sum256(img); !bytes.Equal(got[:], sum) {
		return nil, false
	}
	return img, true
}

// put stores img under key: temp file in the same folder, then rename.
func (c diskCache) put(key string, img []byte) error {
	if c.dir == "" {
		return nil
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("cuda: compile cache: %w", err)
	}
	f, err := os.CreateTemp(c.dir, key+".*.tmp")
	if err != nil {
		return fmt.Errorf("cuda: compile cache: %w", err)
	}
	tmp := f.Name()
	sum := sha256.Sum256(img)
	_, err = f.Write(append(append([]byte(cacheMagic), sum[:]...), img...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.path(key))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cuda: compile cache: %w", err)
	}
	return nil
}

// sweepTemps removes temporary files left by an interrupted put.
func (c diskCache) sweepTemps() {
	if c.dir == "" {
		return
	}
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".tmp") {
			// Only stale ones: a fresh one may be another process's write in flight.
			if info, err := e.Info(); err == nil && info.Mode()&fs.ModeType == 0 && time.Since(info.ModTime()) > 10*time.Minute {
				os.Remove(filepath.Join(c.dir, e.Name()))
			}
		}
	}
}

// compileFunc compiles the program (NVRTC in production, a fake in tests).
type compileFunc func(src string, opts []string, kind imageKind) ([]byte, error)

// cachedCompile returns the image for (src, opts) from the cache or compiles
// and stores it. A failure to write the cache is returned as warn, not as an
// error: the image is still usable.
func cachedCompile(c diskCache, compile compileFunc, src string, opts []string, nvrtcVersion string, cc int, kind imageKind) (img []byte, hit bool, warn, err error) {
	key := cacheKey(src, opts, nvrtcVersion, cc, kind)
	if img, ok := c.get(key); ok {
		return img, true, nil, nil
	}
	img, err = compile(src, opts, kind)
	if err != nil {
		return nil, false, nil, err
	}
	if len(img) == 0 {
		return nil, false, nil, errors.New("cuda: compiler returned an empty image")
	}
	return img, false, c.put(key, img), nil
}
