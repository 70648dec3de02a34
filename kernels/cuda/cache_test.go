package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCacheKey(t *testing.T) {
	base := cacheKey("src", []string{"-a", "-b"}, "12.8", 90, imageCUBIN)
	if base != cacheKey("src", []string{"-a", "-b"}, "12.8", 90, imageCUBIN) {
		t.Fatal("key not deterministic")
	}
	if len(base) != 64 {
		t.Fatalf("key %q", base)
	}
	variants := map[string]string{
		"source":        cacheKey("src2", []string{"-a", "-b"}, "12.8", 90, imageCUBIN),
		"option":        cacheKey("src", []string{"-a", "-c"}, "12.8", 90, imageCUBIN),
		"option order":  cacheKey("src", []string{"-b", "-a"}, "12.8", 90, imageCUBIN),
		"option split":  cacheKey("src", []string{"-a-b"}, "12.8", 90, imageCUBIN),
		"nvrtc version": cacheKey("src", []string{"-a", "-b"}, "13.0", 90, imageCUBIN),
		"arch":          cacheKey("src", []string{"-a", "-b"}, "12.8", 89, imageCUBIN),
		"image kind":    cacheKey("src", []string{"-a", "-b"}, "12.8", 90, imagePTX),
		"boundary":      cacheKey("src-a", []string{"-b"}, "12.8", 90, imageCUBIN),
	}
	seen := map[string]string{base: "base"}
	for name, k := range variants {
		if prev, ok := seen[k]; ok {
			t.Fatalf("%s collides with %s", name, prev)
		}
		seen[k] = name
	}
}

func TestCachedCompile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	c := diskCache{dir: dir}
	calls := 0
	compile := func(src string, opts []string, k imageKind) ([]byte, error) {
		calls++
		return []byte("IMAGE:" + src), nil
	}
	img, hit, warn, err := cachedCompile(c, compile, "prog", []string{"-x"}, "12.8", 90, imageCUBIN)
	if err != nil || warn != nil || hit || string(img) != "IMAGE:prog" || calls != 1 {
		t.Fatalf("first: %q %v %v %v calls=%d", img, hit, warn, err, calls)
	}
	img, hit, _, err = cachedCompile(c, compile, "prog", []string{"-x"}, "12.8", 90, imageCUBIN)
	if err != nil || !hit || string(img) != "IMAGE:prog" || calls != 1 {
		t.Fatalf("second: %q %v %v calls=%d", img, hit, err, calls)
	}
	// Other options: a miss.
	if _, hit, _, _ = cachedCompile(c, compile, "prog", []string{"-y"}, "12.8", 90, imageCUBIN); hit || calls != 2 {
		t.Fatalf("different options hit the cache")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("temp file left: %s", e.Name())
		}
	}
	if len(ents) != 2 {
		t.Fatalf("%d cache files", len(ents))
	}

	// A damaged file is a miss and is rewritten.
	key := cacheKey("prog", []string{"-x"}, "12.8", 90, imageCUBIN)
	p := c.path(key)
	data, _ := os.ReadFile(p)
	data[len(data)-1] ^= 0xff
	os.WriteFile(p, data, 0o644)
	if _, ok := c.get(key); ok {
		t.Fatal("corrupt file accepted")
	}
	img, hit, _, _ = cachedCompile(c, compile, "prog", []string{"-x"}, "12.8", 90, imageCUBIN)
	if hit || calls != 3 || string(img) != "IMAGE:prog" {
		t.Fatalf("corrupt: hit=%v calls=%d", hit, calls)
	}
	if got, ok := c.get(key); !ok || string(got) != "IMAGE:prog" {
		t.Fatal("not rewritten")
	}
	// Truncated and foreign files too.
	for _, bad := range [][]byte{nil, []byte("OECUDA1\nshort"), []byte("something else entirely, long enough to pass the length check.....")} {
		os.WriteFile(p, bad, 0o644)
		if _, ok := c.get(key); ok {
			t.Fatalf("accepted %q", bad)
		}
	}
}

func TestCacheErrors(t *testing.T) {
	// Compiler errors are returned and nothing is stored.
	c := diskCache{dir: t.TempDir()}
	boom := errors.New("boom")
	_, _, _, err := cachedCompile(c, func(string, []string, imageKind) ([]byte, error) { return nil, boom }, "p", nil, "1", 90, imageCUBIN)
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if _, _, _, err = cachedCompile(c, func(string, []string, imageKind) ([]byte, error) { return nil, nil }, "p", nil, "1", 90, imageCUBIN); err == nil {
		t.Fatal("empty image accepted")
	}
	// An unwritable cache folder is a warning; the image is still returned.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	img, _, warn, err := cachedCompile(diskCache{dir: filepath.Join(file, "sub")}, func(string, []string, imageKind) ([]byte, error) { return []byte("ok"), nil }, "p", nil, "1", 90, imageCUBIN)
	if err != nil || warn == nil || string(img) != "ok" {
		t.Fatalf("unwritable: %q %v %v", img, warn, err)
	}
	// Disabled cache: always compiles.
	n := 0
	for i := 0; i < 2; i++ {
		cachedCompile(diskCache{}, func(string, []string, imageKind) ([]byte, error) { n++; return []byte("x"), nil }, "p", nil, "1", 90, imageCUBIN)
	}
	if n != 2 {
		t.Fatalf("disabled cache compiled %d times", n)
	}
}

func TestCacheDirEnv(t *testing.T) {
	t.Setenv(EnvCacheDir, "/some/where")
	if d := defaultCacheDir(); d != "/some/where" {
		t.Fatalf("dir %q", d)
	}
	t.Setenv(EnvCacheDir, "off")
	if d := defaultCacheDir(); d != "" {
		t.Fatalf("off: %q", d)
	}
}
