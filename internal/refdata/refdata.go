// Package refdata finds the reference data the tests read:
// ../shared/testdata beside the repository root (tiny GGUF models with
// llama.cpp's outputs, tokenizer vectors, quantization goldens). Only tests
// import it; the product never reads that directory.
package refdata

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns ../shared/testdata relative to the repository root (the
// directory holding go.mod above the test's working directory), joined
// with elem. The test is skipped when the directory is missing.
func Dir(t testing.TB, elem ...string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("repository root (go.mod) not found")
		}
		dir = parent
	}
	td := filepath.Join(append([]string{dir, "..", "shared", "testdata"}, elem...)...)
	if _, err := os.Stat(td); err != nil {
		t.Skipf("shared testdata missing: %v", err)
	}
	return td
}
