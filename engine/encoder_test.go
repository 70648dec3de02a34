package engine

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// loadEncoder loads an encoder model of testdata/embed (README.md there).
func loadEncoder(t testing.TB, name string) (Model, Tokenizer) {
	t.Helper()
	return loadModelFile(t, filepath.Join("testdata", "embed", name+".gguf"))
}

// TestEncoderLlamaCppReference: BERT-style encoders (every token attends
// to its whole input) give llama.cpp's pooled embeddings of the seven
// prompts (the long one 273 tokens), with every pooling: "bert" (learned
// positions, biases, GELU) and "nomic-bert" (RoPE, fused QKV, SwiGLU),
// F16 weights and the WordPiece vocabulary of bge-small-en. The bounds
// are about twice the worst measured: nomic-bert's last-token vectors
// move most (llama.cpp's attention keeps F16 queries and sums where
// oengine's keeps float32, and three post-norm blocks amplify it); with
// Q8_0 weights, whose activation rounding differs in near-ties, the
// cosine falls to 0.997 on the same rows, so the references are F16.
func TestEncoderLlamaCppReference(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cos, diff float64
	}{{"tiny-bert-f16", 0.99999, 0.005}, {"tiny-nomic-bert-f16", 0.9999, 0.02}} {
		m, tok := loadEncoder(t, tc.name)
		e := newRealEngine(t, Config{KVPages: 256}, m, tok)
		if l := e.Limits(); !l.EmbeddingsOnly || l.MaxBatchedTokens != 512 || l.MaxOutputTokens != 511 {
			t.Fatalf("%s: limits %+v; want embeddings only, a step of the whole context (512)", tc.name, l)
		}
		checkEmbedRefs(t, e, tok, tc.name, tc.cos, tc.diff)
	}
}

// TestEncoderBatching: many inputs at once (several whole sequences per
// step, steps shared as they come) give each input's vector bit for bit
// as computed alone, and the identical input twice is computed twice (no
// prefix cache: an encoder's K/V depends on the whole input).
func TestEncoderBatching(t *testing.T) {
	m, tok := loadEncoder(t, "tiny-bert-f16")
	e := newRealEngine(t, Config{KVPages: 256}, m, tok)
	prompts := []string{"Once upon a time", "The quick brown fox jumps over the lazy dog.", "a",
		strings.Repeat("Embeddings of longer inputs, ", 20), "Once upon a time"}
	var alone [][]float32
	var mu sync.Mutex
	total := 0 // prompt tokens submitted
	for _, p := range prompts {
		for _, pl := range []Pooling{PoolingMean, PoolingCLS} {
			vec, usage, err, _ := embedResult(t, e, Request{Prompt: p, Embed: &EmbedOptions{Pooling: pl}})
			if err != nil {
				t.Fatal(err)
			}
			alone = append(alone, vec)
			total += usage.PromptTokens
		}
	}
	got := make([][]float32, len(alone))
	var wg sync.WaitGroup
	for round := 0; round < 3; round++ {
		for i := range alone {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				pl := []Pooling{PoolingMean, PoolingCLS}[i%2]
				vec, usage, err, _ := embedResult(t, e, Request{Prompt: prompts[i/2], Embed: &EmbedOptions{Pooling: pl}})
				if err != nil || usage.CachedPromptTokens != 0 {
					t.Errorf("input %d: %v, %d tokens cached", i, err, usage.CachedPromptTokens)
					return
				}
				mu.Lock()
				got[i], total = vec, total+usage.PromptTokens
				mu.Unlock()
			}(i)
		}
		wg.Wait()
		for i := range alone {
			if !slices.Equal(got[i], alone[i]) {
				t.Fatalf("round %d input %d: batched vector differs from the one computed alone", round, i)
			}
		}
	}
	if s := e.Stats(); s.PromptTokens != uint64(total) || s.PrefixHits != 0 {
		t.Fatalf("%d prompt tokens computed, %d from the prefix cache; want all %d computed", s.PromptTokens, s.PrefixHits, total)
	}
}

// TestEncoderRefusals: an encoder generates nothing (400-class
// unsupported_feature for a completion), and an input must fit one step:
// over --max-batched-tokens it is refused before acceptance, naming the
// step; at the limit it is computed.
func TestEncoderRefusals(t *testing.T) {
	m, tok := loadEncoder(t, "tiny-bert-f16")
	e := newRealEngine(t, Config{KVPages: 256, MaxBatchedTokens: 64}, m, tok)
	_, err := e.Submit(context.Background(), Request{Prompt: "Once upon a time", MaxTokens: 4})
	var ee *Error
	if !errors.As(err, &ee) || ee.Code != CodeUnsupportedFeature || !strings.Contains(ee.Message, "encoder") {
		t.Fatalf("completion on an encoder: %v, want unsupported_feature", err)
	}
	ids := make([]int32, 65)
	for i := range ids {
		ids[i] = 2000 + int32(i)
	}
	_, err = e.Submit(context.Background(), Request{TokenIDs: ids, Embed: &EmbedOptions{}})
	if !errors.As(err, &ee) || ee.Code != CodeContextLengthExceeded || !strings.Contains(ee.Message, "one step 64 tokens") {
		t.Fatalf("65 tokens over a step of 64: %v, want context_length_exceeded naming the step", err)
	}
	vec, usage, eerr, _ := embedResult(t, e, Request{TokenIDs: ids[:64], Embed: &EmbedOptions{Pooling: PoolingMean}})
	if eerr != nil || len(vec) != 32 || usage.PromptTokens != 64 {
		t.Fatalf("64 tokens: %v, %d values, usage %+v", eerr, len(vec), usage)
	}
}
