// Package refdata finds the reference data the tests read: ../shared beside
// the repository root (testdata: tiny GGUF models with llama.cpp's outputs,
// tokenizer vectors, quantization goldens; openengine: the pinned wire
// contract). Only tests import it; the product never reads that directory.
package refdata

import (
	"os"
	"path/filepath"
	"testing"
)

// Root is the repository root: the directory holding go.mod above the
// test's working directory.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("repository root (go.mod) not found")
		}
		dir = parent
	}
}

// Shared returns ../shared joined with elem, relative to the repository
// root; the test is skipped when it is missing.
func Shared(t testing.TB, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{Root(t), "..", "shared"}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared reference data missing: %v", err)
	}
	return p
}

// Dir returns ../shared/testdata joined with elem (Shared).
func Dir(t testing.TB, elem ...string) string {
	t.Helper()
	return Shared(t, append([]string{"testdata"}, elem...)...)
}
