package gguf

import (
	"bytes"
	"path/filepath"
	"testing"
)

// TestOpenCopyEqualsOpen: a file read with OpenCopy has the same metadata
// and tensor bytes as the mapped one, survives its own Close twice, and a
// missing file is an error.
func TestOpenCopyEqualsOpen(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(sharedTestdata(t), "models", "*.gguf"))
	if len(paths) == 0 {
		t.Fatal("no shared models")
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			a := openT(t, p)
			b, err := OpenCopy(p)
			if err != nil {
				t.Fatal(err)
			}
			if a.Size() != b.Size() || len(a.Tensors) != len(b.Tensors) || len(a.Keys()) != len(b.Keys()) {
				t.Fatalf("size %d/%d, tensors %d/%d", a.Size(), b.Size(), len(a.Tensors), len(b.Tensors))
			}
			for i, ta := range a.Tensors {
				tb := b.Tensors[i]
				if ta.Name != tb.Name || ta.Type != tb.Type || !bytes.Equal(ta.Data, tb.Data) {
					t.Fatalf("tensor %s differs", ta.Name)
				}
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := OpenCopy(filepath.Join(t.TempDir(), "missing.gguf")); err == nil {
		t.Fatal("OpenCopy of a missing file succeeded")
	}
}

// TestOpenCopyProgress: the progress callback sees increasing byte counts
// ending at the file size.
func TestOpenCopyProgress(t *testing.T) {
	p := filepath.Join(sharedTestdata(t), "models", "tiny-llama-f16.gguf")
	var calls []int64
	var total int64
	f, err := OpenCopyProgress(p, func(done, tot int64) { calls = append(calls, done); total = tot })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(calls) == 0 || calls[len(calls)-1] != f.Size() || total != f.Size() {
		t.Fatalf("progress %v of %d, file %d bytes", calls, total, f.Size())
	}
	for i := 1; i < len(calls); i++ {
		if calls[i] <= calls[i-1] {
			t.Fatalf("progress not increasing: %v", calls)
		}
	}
}
