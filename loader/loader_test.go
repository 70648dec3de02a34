package loader

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"oengine/engine"
	"oengine/model/gguf"
	"oengine/sampling"
)

// tinyFile opens tiny-llama-f16 of shared/testdata (beside the repository).
func tinyFile(t *testing.T) *gguf.File {
	t.Helper()
	path := filepath.Join("..", "..", "shared", "testdata", "models", "tiny-llama-f16.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("shared testdata missing: %v", err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestLoadServesGreedyTokens(t *testing.T) {
	f := tinyFile(t)
	m, err := Load(f, Options{Threads: 1, Engine: engine.Config{PageSize: 16, KVPages: 32}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	name, _ := f.String("general.name")
	if got := m.Engine.ModelName(); got != name || name == "" {
		t.Fatalf("engine name %q, want general.name %q", got, name)
	}
	if m.Tokenizer.VocabSize() != m.Engine.Limits().Vocab {
		t.Fatalf("tokenizer vocabulary %d, engine %d", m.Tokenizer.VocabSize(), m.Engine.Limits().Vocab)
	}
	zero := 0.0
	st, err := m.Engine.Submit(context.Background(), engine.Request{Prompt: "Hello", MaxTokens: 4,
		Sampling: sampling.Options{Temperature: &zero}, MinTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		ev, err := st.Next(context.Background())
		if err != nil {
			break
		}
		n += len(ev.Tokens)
	}
	if n != 4 {
		t.Fatalf("generated %d tokens, want 4", n)
	}
	m.Close()
	m.Close() // safe twice
}

func TestLoadRejects(t *testing.T) {
	if _, err := Load(nil, Options{}); err == nil {
		t.Fatal("Load accepted no file")
	}
	f := tinyFile(t)
	if _, err := Load(f, Options{Threads: -1}); err == nil {
		t.Fatal("Load accepted a negative thread count")
	}
	if _, err := Load(f, Options{Name: "x", Engine: engine.Config{PageSize: -3}}); err == nil {
		t.Fatal("Load accepted a negative page size")
	}
}
