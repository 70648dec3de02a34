package tokenizer

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"oengine/model/gguf"
)

// sharedDir returns ../shared/testdata relative to the repository root,
// skipping the test when it is absent.
func sharedDir(t testing.TB) string {
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
			t.Skip("repository root not found")
		}
		dir = parent
	}
	td := filepath.Join(dir, "..", "shared", "testdata")
	if _, err := os.Stat(td); err != nil {
		t.Skipf("shared test data missing: %v", err)
	}
	return td
}

var (
	loadMu    sync.Mutex
	loadCache = map[string]*Tokenizer{}
)

// loadTokenizer loads (once per test binary) the tokenizer of a GGUF file
// under the shared test data directory.
func loadTokenizer(t testing.TB, rel string) *Tokenizer {
	t.Helper()
	path := filepath.Join(sharedDir(t), rel)
	loadMu.Lock()
	defer loadMu.Unlock()
	if tok, ok := loadCache[path]; ok {
		return tok
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", rel, err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatalf("tokenizer from %s: %v", rel, err)
	}
	loadCache[path] = tok
	return tok
}
