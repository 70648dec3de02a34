package tokenizer

import (
	"oengine/internal/refdata"
	"path/filepath"
	"sync"
	"testing"

	"oengine/model/gguf"
)

// sharedDir returns ../shared/testdata relative to the repository root,
// skipping the test when it is absent.
func sharedDir(t testing.TB) string {
	t.Helper()
	return refdata.Dir(t)
}

var (
	loadMu    sync.Mutex
	loadCache = map[string]*Tokenizer{}
)

// loadTokenizer loads (once per test binary) the tokenizer of a GGUF file
// under the shared test data directory.
func loadTokenizer(t testing.TB, rel string) *Tokenizer {
	t.Helper()
	return localTokenizer(t, filepath.Join(sharedDir(t), rel))
}

// localTokenizer loads (once per test binary) the tokenizer of the GGUF
// file at path.
func localTokenizer(t testing.TB, path string) *Tokenizer {
	t.Helper()
	loadMu.Lock()
	defer loadMu.Unlock()
	if tok, ok := loadCache[path]; ok {
		return tok
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatalf("tokenizer from %s: %v", path, err)
	}
	loadCache[path] = tok
	return tok
}
