package engine

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"oengine/ggml"
	"oengine/model/gguf"
	"oengine/model/llama"
	"oengine/model/synth"
	"oengine/model/tokenizer"
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
// "tiny-xlmr-f16" is bert with a SentencePiece unigram vocabulary that
// adds <s> and </s>, as XLM-RoBERTa's (bge-m3, multilingual-e5): the
// tokens are llama.cpp's too. "tiny-gemma-embed-f16" is EmbeddingGemma's
// form (Gemma 3's block without the mask, its symmetric windows, the
// Dense layers after pooling), "tiny-nomic-moe-f16" nomic-embed-text-v2-
// moe's (GELU experts on the odd layers; its bound is about twice its
// worst, a router near-tie in cls pooling).
func TestEncoderLlamaCppReference(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cos, diff float64
	}{{"tiny-bert-f16", 0.99999, 0.005}, {"tiny-nomic-bert-f16", 0.9999, 0.02}, {"tiny-xlmr-f16", 0.99999, 0.005}, {"tiny-modernbert-f16", 0.9999, 0.02}, {"tiny-gemma-embed-f16", 0.9999, 0.02}, {"tiny-nomic-moe-f16", 0.99985, 0.025}, {"tiny-jina-f16", 0.9999, 0.02}} {
		m, tok := loadEncoder(t, tc.name)
		e := newRealEngine(t, Config{KVPages: 256}, m, tok)
		if l := e.Limits(); !l.EmbeddingsOnly || l.MaxBatchedTokens != l.ContextLen || l.MaxOutputTokens != l.ContextLen-1 {
			t.Fatalf("%s: limits %+v; want embeddings only, a step of the whole context", tc.name, l)
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
			vec, usage, err, evs := embedResult(t, e, Request{Prompt: p, Embed: &EmbedOptions{Pooling: pl}})
			if err != nil || len(evs) != 1 || evs[0].Kind != EventDone {
				t.Fatalf("%v, events %v (want one EventDone)", err, evs)
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
	// The engine counts a step's tokens when the step ends, after it has
	// sent the requests' terminal events: wait for the last step's count.
	s := e.Stats()
	for deadline := time.Now().Add(10 * time.Second); s.PromptTokens < uint64(total) && time.Now().Before(deadline); s = e.Stats() {
		time.Sleep(time.Millisecond)
	}
	if s.PromptTokens != uint64(total) || s.PrefixHits != 0 {
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

// TestRerankLlamaCppReference: rerankers (bert with a classification
// head, one token type as XLM-R-based rerankers have) give llama.cpp's
// relevance logits for query-document pairs, the pair tokenized as
// [CLS] query [SEP] document [SEP] (WordPiece) or <s> query </s></s>
// document </s> (XLM-R's unigram vocabulary); llama.cpp was given those
// tokens: the text "query [SEP] document" (or "query </s></s> document")
// with special tokens parsed and added.
func TestRerankLlamaCppReference(t *testing.T) {
	for _, tc := range []rerankRef{
		{"tiny-bert-rerank-f16", " [SEP] ", PoolingCLS, false},
		{"tiny-xlmr-rerank-f16", " </s></s> ", PoolingCLS, false},
		{"tiny-modernbert-rerank-f16", "\t", PoolingMean, false},
		{"tiny-qwen3-rerank-f16", "\t", PoolingLast, true},
		{"tiny-jina-rerank-f16", " </s></s> ", PoolingCLS, false},
	} {
		checkRerankRefs(t, tc)
	}
	// A model without a head ranks nothing.
	plain, ptok := loadEncoder(t, "tiny-bert-f16")
	pe := newRealEngine(t, Config{KVPages: 64}, plain, ptok)
	_, _, eerr, _ := embedResult(t, pe, Request{Prompt: "q", Embed: &EmbedOptions{Pooling: PoolingRank, Pair: "d"}})
	if eerr == nil || eerr.Code != CodeUnsupportedFeature {
		t.Fatalf("rank on a model without a head: %v", eerr)
	}
}

// rerankRef is a reranker with llama.cpp's scores in testdata/embed: each
// reference prompt is query, sep, document; pooling is the state its head
// reads (the engine's default pooling of its embeddings); prob: llama.cpp
// gives the softmax of "yes" and "no" (Qwen3-Reranker), the engine their
// log-odds, whose sigmoid is P(yes).
type rerankRef struct {
	name, sep string
	pooling   Pooling
	prob      bool
}

// checkRerankRefs compares a reranker's scores of testdata/embed's pairs
// with llama.cpp's: the same tokens (llama.cpp's server forms them: the
// file's rerank template, else its pair form) and the same score.
func checkRerankRefs(t *testing.T, tc rerankRef) {
	t.Helper()
	name := tc.name
	m, tok := loadEncoder(t, name)
	e := newRealEngine(t, Config{KVPages: 256}, m, tok)
	if l := e.Limits(); l.RankOutputs != 1 || l.Pooling != tc.pooling {
		t.Fatalf("%s limits: rank outputs %d, default pooling %v; want 1 and %v", name, l.RankOutputs, l.Pooling, tc.pooling)
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "embed", name+".rank.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref embedRef
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if want := map[bool]int{false: 1, true: 2}[tc.prob]; ref.Dim != want || ref.Pooling != "rank" || len(ref.Prompts) != 7 {
		t.Fatalf("%s: reference of %d values, %q pooling, %d pairs", name, ref.Dim, ref.Pooling, len(ref.Prompts))
	}
	worst := 0.0
	for i, p := range ref.Prompts {
		q, d, ok := strings.Cut(p.Prompt, tc.sep)
		if !ok {
			t.Fatalf("%s pair %d has no %q", name, i, tc.sep)
		}
		ids, _, err := tok.(PairEncoder).EncodePair(q, d, true)
		if err != nil || !slices.Equal(ids, p.Tokens) {
			t.Fatalf("%s pair %d: tokens %v (%v), llama.cpp %v", name, i, ids, err, p.Tokens)
		}
		scores, usage, eerr, evs := embedResult(t, e, Request{Prompt: q, Embed: &EmbedOptions{Pooling: PoolingRank, Pair: d}})
		if eerr != nil || len(scores) != 1 || usage.PromptTokens != len(ids) || len(evs) != 1 || evs[0].Kind != EventDone {
			t.Fatalf("%s pair %d: %v, %d scores, usage %+v, events %v (want one EventDone)", name, i, eerr, len(scores), usage, evs)
		}
		got, want := float64(scores[0]), p.Embedding[0]
		if tc.prob {
			got = 1 / (1 + math.Exp(-got))
			if math.Abs(want+p.Embedding[1]-1) > 1e-5 {
				t.Fatalf("%s pair %d: llama.cpp's probabilities %v do not add up to 1", name, i, p.Embedding)
			}
		}
		diff := math.Abs(got - want)
		worst = max(worst, diff)
		if diff > 0.01 {
			t.Errorf("%s pair %d (%d tokens): score %.5f, llama.cpp %.5f", name, i, len(ids), got, want)
		}
	}
	t.Logf("%s: worst score difference %.2e", name, worst)
}

// TestRerankTokenTypes: with two token types a pair's document is of type
// 1 (its score differs from the same tokens all of type 0, as token ids
// give them), and pairs batched with each other and with plain embedding
// inputs in any mix score bit for bit as alone.
func TestRerankTokenTypes(t *testing.T) {
	vocab, err := gguf.Open(filepath.Join("..", "model", "tokenizer", "testdata", "ggml-vocab-bert-bge.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer vocab.Close()
	data, err := synth.Build(synth.Options{Arch: "bert", Dims: synth.Dims{Dim: 32, Layers: 2, Heads: 2, KVHeads: 2, FFN: 64, CtxLen: 512},
		Type: ggml.TypeF16, Seed: 11, Vocab: vocab, Rerank: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	lm, err := llama.Load(f, llama.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	tok := WrapTokenizer(tk)
	e := newRealEngine(t, Config{KVPages: 256}, FromLlama(lm, llama.KVF16), tok)
	q := "how do plants make food"
	docs := []string{"Photosynthesis converts light energy into chemical energy.", "The stock market closed higher on Friday.", "a"}
	rank := func(r Request) float32 {
		t.Helper()
		s, _, err, _ := embedResult(t, e, r)
		if err != nil {
			t.Fatal(err)
		}
		return s[0]
	}
	alone := make([]float32, len(docs))
	for i, d := range docs {
		alone[i] = rank(Request{Prompt: q, Embed: &EmbedOptions{Pooling: PoolingRank, Pair: d}})
	}
	ids, _, _ := tok.(PairEncoder).EncodePair(q, docs[0], true)
	if typed0 := rank(Request{TokenIDs: ids, Embed: &EmbedOptions{Pooling: PoolingRank}}); typed0 == alone[0] {
		t.Fatal("the document's tokens are not of type 1: the same tokens all of type 0 score the same")
	}
	for round := 0; round < 3; round++ {
		got := make([]float32, len(docs))
		var wg sync.WaitGroup
		for i, d := range docs {
			wg.Add(2)
			go func() {
				defer wg.Done()
				s, _, err, _ := embedResult(t, e, Request{Prompt: q, Embed: &EmbedOptions{Pooling: PoolingRank, Pair: d}})
				if err != nil {
					t.Error(err)
					return
				}
				got[i] = s[0]
			}()
			go func() { // a plain input (types all 0) in the same steps
				defer wg.Done()
				if _, _, err, _ := embedResult(t, e, Request{Prompt: d, Embed: &EmbedOptions{Pooling: PoolingMean}}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if !slices.Equal(got, alone) {
			t.Fatalf("round %d: batched scores %v, alone %v", round, got, alone)
		}
	}
}

// TestRerankTruncate: a pair over the context is refused unless Truncate,
// which keeps the query and the longest prefix of the document that fits
// (found here by a plain scan from the end): the score is bit for bit
// that pair's. A query that alone overflows is still refused.
func TestRerankTruncate(t *testing.T) {
	m, tok := loadEncoder(t, "tiny-bert-rerank-f16")
	e := newRealEngine(t, Config{KVPages: 256}, m, tok)
	limit := e.Limits().MaxOutputTokens + 1
	pe := tok.(PairEncoder)
	q := "What is the capital of France?"
	doc := strings.Repeat("Paris is the capital and largest city of France, on the Seine. ", 60)
	if _, _, err, _ := embedResult(t, e, Request{Prompt: q, Embed: &EmbedOptions{Pooling: PoolingRank, Pair: doc}}); err == nil || err.Code != CodeContextLengthExceeded {
		t.Fatalf("a pair over the context without truncate: %v", err)
	}
	cut := len(doc)
	for ; cut > 0; cut-- {
		if ids, _, _ := pe.EncodePair(q, doc[:cut], true); len(ids) <= limit {
			break
		}
	}
	want, wu, werr, _ := embedResult(t, e, Request{Prompt: q, Embed: &EmbedOptions{Pooling: PoolingRank, Pair: doc[:cut]}})
	got, gu, gerr, _ := embedResult(t, e, Request{Prompt: q, Embed: &EmbedOptions{Pooling: PoolingRank, Pair: doc, Truncate: true}})
	if werr != nil || gerr != nil || !slices.Equal(got, want) || gu.PromptTokens != wu.PromptTokens || gu.PromptTokens > limit || gu.PromptTokens < limit-4 {
		t.Fatalf("truncated pair: %v %v, score %v want %v, %d tokens want %d (limit %d)", gerr, werr, got, want, gu.PromptTokens, wu.PromptTokens, limit)
	}
	if _, _, err, _ := embedResult(t, e, Request{Prompt: doc, Embed: &EmbedOptions{Pooling: PoolingRank, Pair: "x", Truncate: true}}); err == nil || err.Code != CodeContextLengthExceeded {
		t.Fatalf("a query over the context with truncate: %v", err)
	}
}
