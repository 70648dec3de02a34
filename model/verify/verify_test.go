package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdataDir returns shared/testdata next to the repository root (found by
// walking up to go.mod), skipping the test when it is absent.
func testdataDir(t testing.TB) string {
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
		t.Skipf("no shared testdata: %v", err)
	}
	return td
}

var refModels = []string{
	"tiny-llama-f16", "tiny-llama-q8_0", "tiny-llama-q4_0", "tiny-llama-q4_k_m",
	"tiny-qwen2-q8_0", "tiny-qwen3-q4_k_m",
}

func TestReferenceModels(t *testing.T) {
	models := filepath.Join(testdataDir(t), "models")
	for _, name := range refModels {
		t.Run(name, func(t *testing.T) {
			opts := Options{}
			if v := os.Getenv("VERIFY_MAX_TOKENS"); v != "" {
				opts.MaxTokens = 200
			}
			rep, err := Run(filepath.Join(models, name+".gguf"), filepath.Join(models, name+".ref.json"), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + strings.TrimSpace(rep.String()))
			if !rep.Pass {
				t.Fail()
			}
		})
	}
}
