package tokenizer

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestConcurrentEncode encodes from several goroutines at once (run it
// with -race): every result must equal the serial one, including with the
// word cache and the pooled scratch memory shared across calls.
func TestConcurrentEncode(t *testing.T) {
	for _, name := range []string{"qwen3", "llama-spm", "bert-bge", "ugm", "ugm-ja"} {
		var tok *Tokenizer
		switch name {
		case "bert-bge":
			tok = bgeTok(t)
		case "ugm":
			tok = ugmTok(t)
		case "ugm-ja":
			tok = ugmJaTok(t)
		default:
			tok = loadTokenizer(t, filepath.Join("tokenizer", "ggml-vocab-"+name+".gguf"))
		}
		r := rand.New(rand.NewPCG(3, 4))
		texts := make([]string, 64)
		want := make([][]int32, len(texts))
		for i := range texts {
			texts[i] = randomText(r, 20)
			want[i] = tok.Encode(texts[i], EncodeOptions{ParseSpecial: i%2 == 0})
		}
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for k := 0; k < 3*len(texts); k++ {
					i := (k*7 + g) % len(texts)
					got := tok.Encode(texts[i], EncodeOptions{ParseSpecial: i%2 == 0})
					if !slices.Equal(got, want[i]) {
						t.Errorf("%s: goroutine %d text %d: %v != %v", name, g, i, got, want[i])
						return
					}
					tok.StablePrefix(texts[i])
				}
			}(g)
		}
		wg.Wait()
	}
}

// TestReferencePaths compares the optimised encoding (word cache, SPM
// merged word by word) with the plain reference path on varied text.
func TestReferencePaths(t *testing.T) {
	for _, name := range []string{"llama-spm", "phi-3", "qwen3", "deepseek-llm"} {
		tok := loadTokenizer(t, filepath.Join("tokenizer", "ggml-vocab-"+name+".gguf"))
		ref, err := New(tok.Vocab())
		if err != nil {
			t.Fatal(err)
		}
		ref.noWordCache, ref.noSPMSplit = true, true
		r := rand.New(rand.NewPCG(5, 6))
		for i := 0; i < 150; i++ {
			text := randomText(r, 40)
			o := EncodeOptions{ParseSpecial: i%3 == 0}
			// Twice through the cached path, so the second run hits the cache.
			tok.Encode(text, o)
			if got, want := tok.Encode(text, o), ref.Encode(text, o); !slices.Equal(got, want) {
				t.Fatalf("%s: %q: optimised %v, reference %v", name, text, got, want)
			}
		}
	}
}
