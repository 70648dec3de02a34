package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelPrompts checks the `tokens` of every models/*.ref.json (written
// by llama.cpp with add_special=true, parse_special=false) against the
// prompts in models/prompts.txt, using each model's own GGUF vocabulary.
func TestModelPrompts(t *testing.T) {
	dir := filepath.Join(sharedDir(t), "models")
	raw, err := os.ReadFile(filepath.Join(dir, "prompts.txt"))
	if err != nil {
		t.Fatal(err)
	}
	prompts := strings.Split(string(raw), "\n__prompt__\n")
	refs, _ := filepath.Glob(filepath.Join(dir, "*.ref.json"))
	if len(refs) == 0 {
		t.Fatal("no reference files")
	}
	for _, ref := range refs {
		name := strings.TrimSuffix(filepath.Base(ref), ".ref.json")
		t.Run(name, func(t *testing.T) {
			var r struct {
				Model string `json:"model"`
				Cases []struct {
					Prompt string  `json:"prompt"`
					Tokens []int32 `json:"tokens"`
				} `json:"cases"`
			}
			b, err := os.ReadFile(ref)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Cases) != len(prompts) {
				t.Fatalf("%d cases but %d prompts", len(r.Cases), len(prompts))
			}
			tok := loadTokenizer(t, filepath.Join("models", r.Model))
			for i, c := range r.Cases {
				if c.Prompt != prompts[i] {
					t.Errorf("case %d: prompts.txt split gives %q, reference has %q", i, prompts[i], c.Prompt)
				}
				got := tok.Encode(prompts[i], EncodeOptions{AddSpecial: true})
				if !equalIDs(got, c.Tokens) {
					t.Errorf("case %d %.40q:\n got  %v\n want %v", i, prompts[i], got, c.Tokens)
				}
			}
		})
	}
}
