package tokenizer

import (
	"oengine/internal/refdata"
	"path/filepath"
	"strings"
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

// decodeBoth decodes ids whole (Decode, or DecodeSpecial with special)
// and token by token through the streaming decoder.
func decodeBoth(tok *Tokenizer, ids []int32, special bool) (whole, streamed string) {
	dec, d := tok.Decode, tok.NewDecoder()
	if special {
		dec, d = tok.DecodeSpecial, tok.NewDecoderSpecial()
	}
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(d.Push(id))
	}
	sb.WriteString(d.Flush())
	return string(dec(ids)), sb.String()
}
