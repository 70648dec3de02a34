package engine

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"oengine/sampling"
)

// refPrompts are the prompts of shared/testdata/models/prompts.txt.
func refPrompts(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(sharedTestdata(t), "models", "prompts.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range strings.Split(string(b), "\n__prompt__\n") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// TestRealSpecGreedyEqualsPlain: on every reference model, greedy outputs
// of concurrent requests with speculative decoding (prompt lookup, the
// model as its own draft, and for the tiny llama its q4_0 file drafting
// for the q8_0 one) are the tokens plain decoding gives, token for token
// (a difference is allowed only at a near-tie of the plain run, as in
// TestRealBatchInvariance), and the target's logprobs are unchanged.
func TestRealSpecGreedyEqualsPlain(t *testing.T) {
	models := []string{"tiny-llama-f16.gguf", "tiny-llama-q4_0.gguf", "tiny-llama-q4_k_m.gguf", "tiny-llama-q8_0.gguf",
		"tiny-qwen2-q8_0.gguf", "tiny-qwen3-q4_k_m.gguf"}
	prompts := refPrompts(t)
	prompts = prompts[:min(len(prompts), 7)] // the long ones only cost prefill
	maxOut := 40
	if testing.Short() || raceEnabled {
		models, prompts, maxOut = models[3:4], prompts[:3], 12
	}
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m, tok := loadRef(t, name)
			vs := []specVariant{
				{"ngram", Speculation{NGram: true}},
				{"self draft", Speculation{Draft: m, Tokens: 5}},
			}
			if name == "tiny-llama-q8_0.gguf" {
				d, _ := loadRef(t, "tiny-llama-q4_0.gguf")
				vs = append(vs, specVariant{"q4_0 draft", Speculation{Draft: d, Tokens: 3, Adaptive: true}})
			}
			specEqualsPlain(t, m, tok, prompts, maxOut, 0, vs)
		})
	}
}

type specVariant struct {
	name string
	spec Speculation
}

// specEqualsPlain runs greedy requests (one per prompt) concurrently on m
// without speculation and with each variant and compares them.
// Logprobs must be equal within tol (0 on the CPU model: bitwise).
func specEqualsPlain(t *testing.T, m Model, tok Tokenizer, prompts []string, maxOut int, tol float64, vs []specVariant) {
	t.Helper()
	var reqs []Request
	for i, p := range prompts {
		reqs = append(reqs, Request{Prompt: p, MaxTokens: maxOut - i, Sampling: greedy(), Stop: StopParams{IgnoreEOS: true},
			Logprobs: &sampling.Candidates{Mode: sampling.CandidatesTopN, TopN: 2}})
	}
	want := concurrent(t, newRealEngine(t, Config{}, m, tok), reqs)
	for _, v := range vs {
		e := newRealEngine(t, Config{Speculation: v.spec, MaxBatchedTokens: 96}, m, tok)
		got := concurrent(t, e, reqs)
		exceptions := 0
		for i := range reqs {
			if got[i].err != nil {
				t.Fatalf("%s: request %d: %v", v.name, i, got[i].err)
			}
			if compareTokens(t, i, got[i].tokens[0], want[i].tokens[0], margins(want[i])) {
				exceptions++
				continue
			}
			for j := range want[i].lps[0] {
				if g, w := got[i].lps[0][j], want[i].lps[0][j]; g.Chosen.Token != w.Chosen.Token || g.Chosen.Rank != w.Chosen.Rank ||
					math.Abs(g.Chosen.Logprob-w.Chosen.Logprob) > tol {
					t.Fatalf("%s: request %d token %d: logprob %+v, plain %+v", v.name, i, j, g.Chosen, w.Chosen)
				}
			}
		}
		st := e.Stats()
		t.Logf("%s: drafted %d accepted %d, near-tie exceptions %d", v.name, st.SpecDraftTokens, st.SpecAcceptedTokens, exceptions)
		if st.SpecDraftTokens == 0 {
			t.Fatalf("%s: nothing drafted", v.name)
		}
	}
}
