package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"oengine/ggml"
)

// fuzzSeeds returns the seed inputs: a valid file with every value type, a
// few of its truncations, a shared vocab-less quant file and every
// malformed case.
func fuzzSeeds(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{}
	b, err := sampleWriter(t).Bytes()
	must(t, err)
	seeds["valid"] = b
	for _, n := range []int{4, 8, 23, 24, 40, 100, 300, len(b) / 2, len(b) - 1} {
		if n < len(b) {
			seeds[fmt.Sprintf("truncated-%d", n)] = b[:n]
		}
	}
	for _, c := range malformedCases() {
		if len(c.data) <= 4096 {
			seeds[strings.ReplaceAll(c.name, " ", "-")] = c.data
		}
	}
	return seeds
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "gguf: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ggml.ErrUnsupportedType) {
				t.Fatalf("error %v matches neither sentinel", err)
			}
			return
		}
		checkParsed(t, g, data)
	})
}

// checkParsed asserts the invariants of a successful Parse, then re-encodes
// the file and parses it again.
func checkParsed(t *testing.T, g *File, data []byte) {
	t.Helper()
	for _, k := range g.Keys() {
		v, ok := g.Value(k)
		if !ok {
			t.Fatalf("key %q listed but missing", k)
		}
		_ = v.String()
	}
	for _, ti := range g.Tensors {
		size, err := tensorBytes(ti.Type, ti.Dims)
		if err != nil || uint64(len(ti.Data)) != size || !ti.Type.Supported() {
			t.Fatalf("tensor %q: %d bytes, want %d (%v)", ti.Name, len(ti.Data), size, err)
		}
		start := g.DataOffset() + int64(ti.Offset)
		if start+int64(size) > int64(len(data)) || !bytes.Equal(data[start:start+int64(size)], ti.Data) {
			t.Fatalf("tensor %q data is not the file's bytes at %d", ti.Name, start)
		}
		if got, _ := g.Tensor(ti.Name); got != ti {
			t.Fatalf("Tensor(%q) lookup differs", ti.Name)
		}
	}
	w := NewWriter()
	for _, k := range g.Keys() {
		v, _ := g.Value(k)
		if err := w.Set(k, v); err != nil {
			t.Fatalf("re-encode key %q: %v", k, err)
		}
	}
	for _, ti := range g.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
			t.Fatalf("re-encode tensor: %v", err)
		}
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	h, err := Parse(b)
	if err != nil {
		t.Fatalf("re-encoded file does not parse: %v", err)
	}
	if !slices.Equal(h.Keys(), g.Keys()) || len(h.Tensors) != len(g.Tensors) || h.Alignment != g.Alignment {
		t.Fatal("re-encoded file differs")
	}
	for _, k := range g.Keys() {
		a, _ := g.Value(k)
		b, _ := h.Value(k)
		if a.Type() != b.Type() || a.Len() != b.Len() || a.String() != b.String() {
			t.Fatalf("key %q: %s became %s", k, a, b)
		}
	}
	for i, ti := range h.Tensors {
		if !bytes.Equal(ti.Data, g.Tensors[i].Data) {
			t.Fatalf("tensor %q data differs", ti.Name)
		}
	}
}

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzParse when
// GGUF_WRITE_CORPUS=1; otherwise it checks that the committed corpus holds
// every seed.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	write := os.Getenv("GGUF_WRITE_CORPUS") == "1"
	for name, data := range fuzzSeeds(t) {
		path := filepath.Join(dir, "seed-"+name)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if write {
			must(t, os.MkdirAll(dir, 0o755))
			must(t, os.WriteFile(path, []byte(want), 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("corpus file %s is missing or stale (run with GGUF_WRITE_CORPUS=1): %v", path, err)
		}
	}
}
