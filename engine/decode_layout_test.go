package engine

import (
	"path/filepath"
	"testing"

	"oengine/model/gguf"
	"oengine/model/llama"
	"oengine/model/tokenizer"
	"oengine/sampling"
)

// TestRealDecodeLayout: tiny-llama-q4_0 and tiny-llama-q4_k_m read into
// owned memory (their Q4_0, Q4_K and Q6_K weights rewritten into the
// decode layouts where the CPU has the kernels) serve concurrent greedy
// requests with exactly the tokens the mapped, row-major model gives each
// request alone (up to a near-tie, as TestRealBatchInvariance).
func TestRealDecodeLayout(t *testing.T) {
	for _, file := range []string{"tiny-llama-q4_0.gguf", "tiny-llama-q4_k_m.gguf"} {
		t.Run(file, func(t *testing.T) { testRealDecodeLayout(t, file) })
	}
}

func testRealDecodeLayout(t *testing.T, file string) {
	path := filepath.Join(sharedTestdata(t), "models", file)
	load := func(open func(string) (*gguf.File, error)) (Model, Tokenizer, *llama.Model) {
		f, err := open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		tok, err := tokenizer.FromGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := llama.Load(f, llama.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return FromLlama(m, llama.KVF16), WrapTokenizer(tok), m
	}
	rowMajor, tok, _ := load(gguf.Open)
	packed, _, lm := load(gguf.OpenCopy)
	t.Logf("%d matrices in the decode layout", lm.DecodeLayout())
	n := 12
	if testing.Short() || raceEnabled {
		n = 6
	}
	reqs := mixedRequests(n, 5, false)
	for i := range reqs {
		reqs[i].MaxTokens = 3 + i%7
		reqs[i].Stop.IgnoreEOS = true
		reqs[i].Logprobs = &sampling.Candidates{Mode: sampling.CandidatesTopN, TopN: 2}
	}
	alone := newRealEngine(t, Config{}, rowMajor, tok)
	e := newRealEngine(t, Config{MaxBatchedTokens: 32}, packed, tok)
	got := concurrent(t, e, reqs)
	for i, r := range reqs {
		want := run(t, alone, r)
		if got[i].err != nil {
			t.Fatalf("request %d: %v", i, got[i].err)
		}
		compareTokens(t, i, got[i].tokens[0], want.tokens[0], margins(want))
	}
}
