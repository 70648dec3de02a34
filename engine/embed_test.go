package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"oengine/model/llama"
	"oengine/model/tokenizer"
	"oengine/sampling"
)

var fakeOpts = tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true}

// fakeHidden is fakeModel with hidden states: position p's row is a hash of
// the tokens read back from positions 0..p of its sequence's pages, so a
// wrong page, a stale prefix or a row counted twice changes a pooled
// vector.
type fakeHidden struct {
	*fakeModel
	dim     int
	pooling Pooling
}

func (m *fakeHidden) Info() ModelInfo {
	i := m.fakeModel.Info()
	i.Dim, i.Pooling = m.dim, m.pooling
	return i
}

func (m *fakeHidden) ForwardHidden(k KV, b *Batch, logits, hidden []float32) error {
	if err := m.Forward(k, b, logits); err != nil { // writes the K/V
		return err
	}
	kv := k.(*fakeKV)
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for r, ti := range b.Hidden {
		pages := b.Seqs[b.Seq[ti]]
		h := uint64(0x1234567)
		for q := 0; q <= int(b.Pos[ti]); q++ {
			h = mix(h ^ uint64(kv.slots[pages[q/kv.ps]][q%kv.ps]>>32))
		}
		for j := range m.dim {
			hidden[r*m.dim+j] = float32(mix(h^uint64(j+1))>>40)/float32(1<<24) - 0.5
		}
	}
	return nil
}

// direct is the fake's pooled vector of prompt, computed without the
// engine.
func (m *fakeHidden) direct(prompt []int32, p Pooling) []float32 {
	rows := make([][]float32, len(prompt))
	h := uint64(0x1234567)
	for q, tok := range prompt {
		h = mix(h ^ uint64(tok))
		rows[q] = make([]float32, m.dim)
		for j := range m.dim {
			rows[q][j] = float32(mix(h^uint64(j+1))>>40)/float32(1<<24) - 0.5
		}
	}
	return poolRows(rows, p)
}

// poolRows pools per-position rows as the engine does (mean: a float64
// sum, divided once).
func poolRows(rows [][]float32, p Pooling) []float32 {
	switch p {
	case PoolingCLS:
		return rows[0]
	case PoolingLast:
		return rows[len(rows)-1]
	}
	out := make([]float32, len(rows[0]))
	for j := range out {
		s := 0.0
		for _, r := range rows {
			s += float64(r[j])
		}
		out[j] = float32(s / float64(len(rows)))
	}
	return out
}

func newEngineOn(t testing.TB, cfg Config, m Model, tok Tokenizer) *Engine {
	t.Helper()
	if cfg.PageSize == 0 {
		cfg.PageSize = 4
	}
	if cfg.KVPages == 0 {
		cfg.KVPages = 256
	}
	return newRealEngine(t, cfg, m, tok)
}

// embedResult runs an embedding request to its end.
func embedResult(t testing.TB, e *Engine, r Request) ([]float32, *Usage, *Error, []Event) {
	t.Helper()
	s, err := e.Submit(context.Background(), r)
	if err != nil {
		var ee *Error
		if errors.As(err, &ee) {
			return nil, nil, ee, nil
		}
		t.Fatal(err)
	}
	var evs []Event
	for {
		ev, err := s.Next(context.Background())
		if err != nil {
			break
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 || !evs[len(evs)-1].Terminal() {
		t.Fatalf("stream without a terminal event: %v", evs)
	}
	last := evs[len(evs)-1]
	return last.Embedding, last.Usage, last.Err, evs
}

// TestEmbedPooling: every pooling gives the fake's directly computed
// vector, alone, chunked, and in a pool so small that sequences (embedding
// ones included) are preempted and recomputed; an embedding request's
// stream is exactly one EventDone.
func TestEmbedPooling(t *testing.T) {
	m := &fakeHidden{fakeModel: &fakeModel{vocab: 64, ctx: 512}, dim: 4}
	tok := fakeTok{vocab: 64}
	rng := rand.New(rand.NewPCG(5, 5))
	var reqs []Request
	for i := range 24 {
		words := make([]string, 3+rng.IntN(40))
		for j := range words {
			words[j] = strings.Repeat(string(rune('a'+rng.IntN(26))), 1+rng.IntN(5))
		}
		r := Request{Prompt: strings.Join(words, " ")}
		if i%3 == 2 { // generating neighbours
			r.MaxTokens, r.Sampling = 1+rng.IntN(30), greedy()
		} else {
			r.Embed = &EmbedOptions{Pooling: []Pooling{PoolingMean, PoolingCLS, PoolingLast}[(i+i/3)%3]}
		}
		reqs = append(reqs, r)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"default", Config{}},
		{"chunked", Config{MaxBatchedTokens: 7}},
		{"tiny pool preempts", Config{KVPages: 40, MaxBatchedTokens: 24, MaxStepLatency: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hooks sync.WaitGroup // one Done per embedding request's hook
			var mu sync.Mutex
			preempted := 0
			cfg := tc.cfg
			cfg.Hooks.OnRequestDone = func(rs RequestStats) {
				if strings.HasPrefix(rs.ID, "emb-") {
					mu.Lock()
					preempted += rs.Preemptions
					mu.Unlock()
					hooks.Done()
				}
			}
			mm := m
			if tc.name == "tiny pool preempts" {
				// Slow steps (5 ms each): every request is in while the
				// first steps run, so the pool is short for all of them at
				// once however slowly the goroutines start on a loaded
				// machine.
				mm = &fakeHidden{fakeModel: &fakeModel{vocab: 64, ctx: 512,
					cost: func(int) time.Duration { return 5 * time.Millisecond }}, dim: 4}
			}
			e := newEngineOn(t, cfg, mm, tok)
			var wg sync.WaitGroup
			for i, r := range reqs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if r.Embed == nil {
						if res := run(t, e, r); res.err != nil {
							t.Errorf("request %d: %v", i, res.err)
						}
						return
					}
					r.ID = fmt.Sprintf("emb-%d", i)
					hooks.Add(1)
					vec, u, err, evs := embedResult(t, e, r)
					if err != nil {
						t.Errorf("request %d: %v", i, err)
						return
					}
					prompt := tok.Encode(r.Prompt, fakeOpts)
					if want := m.direct(prompt, r.Embed.Pooling); !slices.Equal(vec, want) {
						t.Errorf("request %d (%v, %d tokens): %v, want %v", i, r.Embed.Pooling, len(prompt), vec, want)
					}
					if len(evs) != 1 || evs[0].Kind != EventDone {
						t.Errorf("request %d: events %v, want one EventDone", i, evs)
					}
					if u == nil || u.PromptTokens != len(prompt) || u.CompletionTokens != 0 {
						t.Errorf("request %d: usage %+v for %d prompt tokens", i, u, len(prompt))
					}
				}()
			}
			wg.Wait()
			// A hook runs after its terminal event: the last ones may still be counting.
			hooksDone := make(chan struct{})
			go func() { hooks.Wait(); close(hooksDone) }()
			select {
			case <-hooksDone:
			case <-time.After(30 * time.Second):
				t.Fatal("OnRequestDone not called for every embedding request")
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.name == "tiny pool preempts" && preempted == 0 {
				t.Fatal("no embedding request was preempted")
			}
		})
	}
}

// TestEmbedDefaultPooling: the engine's pooling is Config.Pooling, else
// the model's, else last.
func TestEmbedDefaultPooling(t *testing.T) {
	tok := fakeTok{vocab: 64}
	for _, tc := range []struct {
		cfg, model, want Pooling
	}{
		{PoolingDefault, PoolingDefault, PoolingLast},
		{PoolingDefault, PoolingMean, PoolingMean},
		{PoolingCLS, PoolingMean, PoolingCLS},
		{PoolingDefault, PoolingRank, PoolingCLS}, // a reranker's file: its head's input
	} {
		m := &fakeHidden{fakeModel: &fakeModel{vocab: 64, ctx: 512}, dim: 3, pooling: tc.model}
		e := newEngineOn(t, Config{Pooling: tc.cfg}, m, tok)
		if got := e.Limits(); got.Pooling != tc.want || got.EmbeddingDim != 3 {
			t.Fatalf("config %v, model %v: limits pooling %v dim %d, want %v 3", tc.cfg, tc.model, got.Pooling, got.EmbeddingDim, tc.want)
		}
		vec, _, err, _ := embedResult(t, e, Request{Prompt: "hello world", Embed: &EmbedOptions{}})
		if err != nil {
			t.Fatal(err)
		}
		if want := m.direct(tok.Encode("hello world", fakeOpts), tc.want); !slices.Equal(vec, want) {
			t.Fatalf("default pooling %v: %v, want %v", tc.want, vec, want)
		}
	}
	if got := resolvePooling(PoolingDefault, ModelInfo{Encoder: true}); got != PoolingMean {
		t.Fatalf("an encoder without a file pooling: %v, want mean", got)
	}
	// A reranker's embeddings default to the state its head reads.
	for _, tc := range []struct {
		info ModelInfo
		want Pooling
	}{
		{ModelInfo{Pooling: PoolingRank, Encoder: true}, PoolingCLS},
		{ModelInfo{Pooling: PoolingRank, Encoder: true, RankPooling: PoolingMean}, PoolingMean},
		{ModelInfo{Pooling: PoolingRank, RankPooling: PoolingLast}, PoolingLast},
	} {
		if got := resolvePooling(PoolingDefault, tc.info); got != tc.want {
			t.Fatalf("%+v: %v, want %v", tc.info, got, tc.want)
		}
	}
	m := &fakeHidden{fakeModel: &fakeModel{vocab: 64, ctx: 512}, dim: 3}
	if _, err := New(Config{Pooling: PoolingRank}, m, tok); err == nil {
		t.Fatal("rank accepted as the default pooling")
	}
}

// TestEmbedRefused: requests an embedding cannot honour are refused before
// acceptance with a clear error, and nothing leaks.
func TestEmbedRefused(t *testing.T) {
	tok := fakeTok{vocab: 64}
	plain := newEngineOn(t, Config{}, &fakeModel{vocab: 64, ctx: 512}, tok)
	if _, _, err, _ := embedResult(t, plain, Request{Prompt: "abc", Embed: &EmbedOptions{}}); err == nil || err.Code != CodeUnsupportedFeature {
		t.Fatalf("model without hidden states: %v, want UNSUPPORTED_FEATURE", err)
	}
	if plain.Limits().EmbeddingDim != 0 {
		t.Fatal("a model without hidden states reports an embedding width")
	}
	m := &fakeHidden{fakeModel: &fakeModel{vocab: 64, ctx: 32}, dim: 4}
	e := newEngineOn(t, Config{}, m, tok)
	emb := &EmbedOptions{}
	for _, tc := range []struct {
		name string
		r    Request
		code Code
	}{
		{"n", Request{Prompt: "abc", Embed: emb, N: 2}, CodeInvalidArgument},
		{"max_tokens", Request{Prompt: "abc", Embed: emb, MaxTokens: 3}, CodeInvalidArgument},
		{"streamed input", Request{Prompt: "abc", Embed: emb, OpenInput: true}, CodeInvalidArgument},
		{"logprobs", Request{Prompt: "abc", Embed: emb, Logprobs: &sampling.Candidates{}}, CodeInvalidArgument},
		{"stop", Request{Prompt: "abc", Embed: emb, Stop: StopParams{Strings: []string{"x"}}}, CodeInvalidArgument},
		{"pooling", Request{Prompt: "abc", Embed: &EmbedOptions{Pooling: 9}}, CodeInvalidArgument},
		{"empty", Request{Embed: emb}, CodeInvalidArgument},
		{"too long", Request{Prompt: strings.Repeat("a", 33), Embed: emb}, CodeContextLengthExceeded},
	} {
		if _, _, err, _ := embedResult(t, e, tc.r); err == nil || err.Code != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}
	// The whole context is usable: nothing is generated.
	vec, _, err, _ := embedResult(t, e, Request{Prompt: strings.Repeat("a", 32), Embed: emb})
	if err != nil || len(vec) != 4 {
		t.Fatalf("a prompt of the context's length: %v, %v", vec, err)
	}
}

// TestEmbedRealModel: on tiny-llama-f16, the engine's pooled vectors equal
// the model's hidden states computed in one direct forward pass, bit for
// bit, whether the prompt runs alone, in chunks beside generating
// requests, or from the prefix cache (last pooling reuses it and says so).
func TestEmbedRealModel(t *testing.T) {
	m, tok := tinyModel(t)
	lm := m.(*llamaModel).m
	prompts := []string{"The capital of France is", strings.Repeat("Once upon a time there was a little fox. ", 12)}
	direct := func(ids []int32) [][]float32 {
		kv, err := lm.NewKV(64, 16, llama.KVF16)
		if err != nil {
			t.Fatal(err)
		}
		b := llama.Batch{Tokens: ids, Seqs: [][]int32{make([]int32, (len(ids)+15)/16)}}
		for i := range ids {
			b.Pos = append(b.Pos, int32(i))
			b.Seq = append(b.Seq, 0)
			b.Hidden = append(b.Hidden, int32(i))
		}
		for i := range b.Seqs[0] {
			b.Seqs[0][i] = int32(i)
		}
		D := lm.Config().Dim
		h := make([]float32, len(ids)*D)
		if err := lm.ForwardHidden(kv, &b, nil, h); err != nil {
			t.Fatal(err)
		}
		rows := make([][]float32, len(ids))
		for i := range rows {
			rows[i] = h[i*D : (i+1)*D]
		}
		return rows
	}
	for _, cfg := range []Config{{KVPages: 256}, {KVPages: 256, MaxBatchedTokens: 24}} {
		e := newRealEngine(t, cfg, m, tok)
		if e.Limits().EmbeddingDim != lm.Config().Dim {
			t.Fatalf("embedding width %d, model dim %d", e.Limits().EmbeddingDim, lm.Config().Dim)
		}
		gen := make(chan result, 1)
		go func() { gen <- run(t, e, Request{Prompt: "Hello", MaxTokens: 20, Sampling: greedy()}) }()
		for _, p := range prompts {
			ids := tok.Encode(p, fakeOpts)
			rows := direct(ids)
			for _, pl := range []Pooling{PoolingMean, PoolingCLS, PoolingLast, PoolingLast} {
				vec, u, err, _ := embedResult(t, e, Request{Prompt: p, Embed: &EmbedOptions{Pooling: pl}})
				if err != nil {
					t.Fatal(err)
				}
				if want := poolRows(rows, pl); !slices.Equal(vec, want) {
					t.Fatalf("%d tokens, %v pooling (batch %d): differs from the direct forward pass (first %v, want %v)",
						len(ids), pl, cfg.MaxBatchedTokens, vec[:4], want[:4])
				}
				if pl != PoolingLast && u.CachedPromptTokens != 0 {
					t.Fatalf("%v pooling reused %d cached tokens", pl, u.CachedPromptTokens)
				}
			}
			// The second last-pooled request found the first's pages.
			if _, u, _, _ := embedResult(t, e, Request{Prompt: p, Embed: &EmbedOptions{Pooling: PoolingLast}}); len(ids) > 32 && u.CachedPromptTokens == 0 {
				t.Fatalf("last pooling of %d tokens reused no cached page", len(ids))
			}
		}
		if r := <-gen; r.err != nil || len(r.tokens[0]) != 20 {
			t.Fatalf("generating neighbour: %v, %d tokens", r.err, len(r.tokens[0]))
		}
	}
}

// embedRef is a file of engine/testdata/embed (README.md there): llama.cpp's
// pooled embeddings of the prompts of shared/testdata/models.
type embedRef struct {
	Model   string `json:"model"`
	Pooling string `json:"pooling"`
	Dim     int    `json:"dim"`
	Prompts []struct {
		Prompt    string    `json:"prompt"`
		Tokens    []int32   `json:"tokens"`
		Embedding []float64 `json:"embedding"`
	} `json:"prompts"`
}

// TestEmbedLlamaCppReference: the engine's pooled vectors of the reference
// models match llama.cpp's (written by scripts/llamacpp-ref/embdump.cpp):
// the same tokens, a cosine similarity of at least 0.99999 and every value
// within 0.5% of the vector's largest magnitude for F16 weights; 0.9995 and
// 3% for quantized ones, whose activation rounding differs in near-ties
// (the reference build is llama.cpp's generic one). Another pooling, or
// states before the output norm, are far outside both.
func TestEmbedLlamaCppReference(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cos, diff float64
	}{{"tiny-llama-f16", 0.99999, 0.005}, {"tiny-qwen2-q8_0", 0.9995, 0.03}, {"tiny-qwen3-q4_k_m", 0.9995, 0.03}} {
		m, tok := loadRef(t, tc.name+".gguf")
		e := newRealEngine(t, Config{KVPages: 256}, m, tok)
		checkEmbedRefs(t, e, tok, tc.name, tc.cos, tc.diff)
	}
}

// TestEmbedGPUEmulated: the CUDA model (model/gpu on the emulated device)
// serves the same embeddings, within the F16 bounds of the llama.cpp
// references, in device steps of 32 tokens (the long prompt splits) and
// beside a generating request whose logits rows share the steps (split
// ones too): its
// greedy tokens equal the CPU engine's.
func TestEmbedGPUEmulated(t *testing.T) {
	const name = "tiny-llama-f16"
	m, _, tok := tinyGPUModel(t, name+".gguf", 32)
	e := newRealEngine(t, Config{KVPages: 256, MaxBatchedTokens: 96, MaxStepLatency: -1}, FromGPU(m), tok)
	cm, ctok := loadRef(t, name+".gguf")
	ce := newRealEngine(t, Config{KVPages: 256}, cm, ctok)
	gen := Request{Prompt: "Once upon a time", MaxTokens: 400, Sampling: greedy(), Stop: StopParams{IgnoreEOS: true}}
	want := run(t, ce, gen)
	got := make(chan result, 1)
	go func() { got <- run(t, e, gen) }()
	checkEmbedRefs(t, e, tok, name, 0.99999, 0.005)
	if g := <-got; g.err != nil || !equalTokens(g.tokens[0], want.tokens[0]) {
		t.Fatalf("generating beside embeddings on the device: %v %v, CPU %v", g.err, g.tokens[0], want.tokens[0])
	}
}

// checkEmbedRefs compares e's embeddings of the reference prompts with
// llama.cpp's for each pooling (see TestEmbedLlamaCppReference).
func checkEmbedRefs(t *testing.T, e *Engine, tok Tokenizer, name string, minCos, maxDiff float64) {
	t.Helper()
	for _, pl := range []Pooling{PoolingMean, PoolingCLS, PoolingLast} {
		raw, err := os.ReadFile(filepath.Join("testdata", "embed", name+"."+pl.String()+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var ref embedRef
		if err := json.Unmarshal(raw, &ref); err != nil {
			t.Fatal(err)
		}
		if ref.Dim != e.Limits().EmbeddingDim || ref.Pooling != pl.String() || len(ref.Prompts) != 7 {
			t.Fatalf("%s %v: reference of %d values, %q pooling, %d prompts", name, pl, ref.Dim, ref.Pooling, len(ref.Prompts))
		}
		worstCos, worstDiff := 1.0, 0.0
		for i, p := range ref.Prompts {
			if got := tok.Encode(p.Prompt, fakeOpts); !slices.Equal(got, p.Tokens) {
				t.Fatalf("%s prompt %d: tokens %v, llama.cpp %v", name, i, got, p.Tokens)
			}
			vec, _, eerr, _ := embedResult(t, e, Request{TokenIDs: p.Tokens, Embed: &EmbedOptions{Pooling: pl}})
			if eerr != nil {
				t.Fatal(eerr)
			}
			var dot, na, nb, peak, diff float64
			for j, w := range p.Embedding {
				g := float64(vec[j])
				dot, na, nb = dot+g*w, na+g*g, nb+w*w
				peak, diff = max(peak, math.Abs(w)), max(diff, math.Abs(g-w))
			}
			cos := dot / math.Sqrt(na*nb)
			worstCos, worstDiff = min(worstCos, cos), max(worstDiff, diff/peak)
			if cos < minCos || diff > maxDiff*peak {
				t.Errorf("%s %v prompt %d (%d tokens): cosine %.6f, largest difference %.4g of peak %.4g", name, pl, i, len(p.Tokens), cos, diff, peak)
			}
		}
		t.Logf("%s %v: worst cosine %.7f, worst difference %.2e of the peak", name, pl, worstCos, worstDiff)
	}
}

// TestEmbedTruncate: an input over the engine's limit is refused unless
// Truncate, which keeps its longest prefix that fits (a text's first
// runes, token ids' first ids): the vector is that prefix's, usage counts
// it, and an input that fits is untouched.
func TestEmbedTruncate(t *testing.T) {
	tok := fakeTok{vocab: 64}
	m := &fakeHidden{fakeModel: &fakeModel{vocab: 64, ctx: 512}, dim: 3}
	e := newEngineOn(t, Config{}, m, tok)
	limit := e.Limits().MaxOutputTokens + 1
	long := strings.Repeat("the quick brown fox ", 40) // 800 one-token runes
	if _, _, err, _ := embedResult(t, e, Request{Prompt: long, Embed: &EmbedOptions{Pooling: PoolingMean}}); err == nil || err.Code != CodeContextLengthExceeded {
		t.Fatalf("%d tokens over a limit of %d without truncate: %v", len(long), limit, err)
	}
	vec, usage, err, _ := embedResult(t, e, Request{Prompt: long, Embed: &EmbedOptions{Pooling: PoolingMean, Truncate: true}})
	if want := m.direct(tok.Encode(long[:limit], fakeOpts), PoolingMean); err != nil || usage.PromptTokens != limit || !slices.Equal(vec, want) {
		t.Fatalf("truncated text: %v, %d tokens (want %d), %v want %v", err, usage.PromptTokens, limit, vec, want)
	}
	ids := tok.Encode(long, fakeOpts)
	vec, usage, err, _ = embedResult(t, e, Request{TokenIDs: ids, Embed: &EmbedOptions{Pooling: PoolingLast, Truncate: true}})
	if want := m.direct(ids[:limit], PoolingLast); err != nil || usage.PromptTokens != limit || !slices.Equal(vec, want) {
		t.Fatalf("truncated ids: %v, %d tokens, %v want %v", err, usage.PromptTokens, vec, want)
	}
	short := "hello world"
	vec, usage, err, _ = embedResult(t, e, Request{Prompt: short, Embed: &EmbedOptions{Pooling: PoolingMean, Truncate: true}})
	if want := m.direct(tok.Encode(short, fakeOpts), PoolingMean); err != nil || usage.PromptTokens != len(short) || !slices.Equal(vec, want) {
		t.Fatalf("a short text with truncate: %v, %v want %v", err, vec, want)
	}
	checkLedger(t, e)
}

// TestFitPrefix: the longest rune prefix that fits, never a cut inside a
// rune, none when even the empty prefix is too long.
func TestFitPrefix(t *testing.T) {
	count := func(s string) (int, error) { return utf8.RuneCountInString(s) + 2, nil } // two specials
	for _, tc := range []struct {
		text  string
		limit int
		want  string
		ok    bool
	}{
		{"héllo wörld", 7, "héllo", true},
		{"héllo", 20, "héllo", true},
		{"héllo", 2, "", true},
		{"héllo", 1, "", false},
		{"日本語のテキスト", 5, "日本語", true},
	} {
		cut, ok, err := fitPrefix(tc.text, tc.limit, count)
		if err != nil || ok != tc.ok || ok && tc.text[:cut] != tc.want {
			t.Errorf("fitPrefix(%q, %d) = %d (%q), %v, %v; want %q, %v", tc.text, tc.limit, cut, tc.text[:cut], ok, err, tc.want, tc.ok)
		}
	}
	// A huge text is searched from a bounded prefix.
	calls := 0
	huge := strings.Repeat("é", 1<<20)
	cut, ok, _ := fitPrefix(huge, 10, func(s string) (int, error) {
		calls++
		if len(s) > 10*maxTokenBytes {
			t.Fatalf("encoded %d bytes for a limit of 10 tokens", len(s))
		}
		return utf8.RuneCountInString(s), nil
	})
	if !ok || cut != 20 || calls > 16 {
		t.Fatalf("huge text: cut %d, ok %v, %d encodings", cut, ok, calls)
	}
}
