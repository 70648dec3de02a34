package engine

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"

	"oengine/sampling"
)

// TestSpecDraftModelGreedyEqualsPlain: with a draft model (the target
// itself: every draft accepted; or a different model: some rejected),
// greedy outputs of a concurrent mix equal plain decoding token for
// token, also with chunked prefill and preemption; no page leaks.
func TestSpecDraftModelGreedyEqualsPlain(t *testing.T) {
	var reqs []Request
	for _, r := range specRequests() {
		if r.Sampling.Temperature != nil && *r.Sampling.Temperature == 0 {
			reqs = append(reqs, r)
		}
	}
	want := concurrent(t, newFakeEngine(t, Config{}, &fakeModel{vocab: 64, ctx: 512, echo: 7}), reqs)
	cases := []struct {
		name  string
		draft *fakeModel
		cfg   Config
		all   bool // every draft accepted
	}{
		{"self draft", &fakeModel{vocab: 64, ctx: 512, echo: 7}, Config{}, true},
		{"other draft", &fakeModel{vocab: 64, ctx: 512, echo: 7, salt: 99}, Config{}, false},
		{"other draft adaptive chunked", &fakeModel{vocab: 64, ctx: 512, echo: 7, salt: 5}, Config{MaxBatchedTokens: 10}, false},
		{"tiny pool preempts", &fakeModel{vocab: 64, ctx: 512, echo: 7, salt: 99}, Config{KVPages: 30, MaxBatchedTokens: 24, MaxStepLatency: -1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Speculation = Speculation{Draft: tc.draft, Tokens: 4, Adaptive: strings.Contains(tc.name, "adaptive")}
			tc.cfg.CheckIntegrity = true
			e := newFakeEngine(t, tc.cfg, &fakeModel{vocab: 64, ctx: 512, echo: 7})
			got := concurrent(t, e, reqs)
			for i := range reqs {
				sameResult(t, i, got[i], want[i])
			}
			st := e.Stats()
			t.Logf("drafted %d accepted %d steps %d preemptions %d", st.SpecDraftTokens, st.SpecAcceptedTokens, st.Steps, st.Preemptions)
			if st.SpecDraftTokens == 0 || (st.SpecAcceptedTokens == st.SpecDraftTokens) != tc.all {
				t.Fatalf("drafted %d, accepted %d", st.SpecDraftTokens, st.SpecAcceptedTokens)
			}
			if tc.name == "tiny pool preempts" && st.Preemptions == 0 {
				t.Fatal("no preemption")
			}
		})
	}
}

// homogeneity is the chi-square statistic of two samples' counts over the
// same cells, with its degrees of freedom.
func homogeneity(a, b []int) (stat float64, df int) {
	var na, nb float64
	for i := range a {
		na += float64(a[i])
		nb += float64(b[i])
	}
	for i := range a {
		tot := float64(a[i] + b[i])
		if tot == 0 {
			continue
		}
		df++
		ea, eb := tot*na/(na+nb), tot*nb/(na+nb)
		stat += (float64(a[i])-ea)*(float64(a[i])-ea)/ea + (float64(b[i])-eb)*(float64(b[i])-eb)/eb
	}
	return stat, df - 1
}

// chiSquareCritical approximates the 0.999 quantile of the chi-square law
// with df degrees of freedom (Wilson-Hilferty).
func chiSquareCritical(df int) float64 {
	d := float64(df)
	x := 1 - 2/(9*d) + 3.09*math.Sqrt(2/(9*d))
	return d * x * x * x
}

// TestSpecDraftModelDistribution: on a small-vocabulary fake model, the
// tokens sampled with a draft model (rejection rule against its q) follow
// the same distribution as without speculation, at temperature 1 and with
// top-k / top-p (chi-square homogeneity per output position, fixed seeds).
func TestSpecDraftModelDistribution(t *testing.T) {
	const vocab, n, outLen = 8, 3000, 5
	configs := []struct {
		name string
		opts func(seed uint64) sampling.Options
	}{
		{"temperature 1", func(s uint64) sampling.Options { return sampling.Options{Temperature: ptr(1.0), Seed: ptr(s)} }},
		{"top_k 4 top_p 0.9", func(s uint64) sampling.Options {
			return sampling.Options{Temperature: ptr(1.0), TopK: ptr(int32(4)), TopP: ptr(0.9), Seed: ptr(s)}
		}},
	}
	sample := func(t *testing.T, cfg Config, opts func(uint64) sampling.Options, seedBase uint64) [][]int {
		e := newFakeEngine(t, cfg, &fakeModel{vocab: vocab, ctx: 64})
		counts := make([][]int, outLen)
		for i := range counts {
			counts[i] = make([]int, vocab)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				s, err := e.Submit(context.Background(), Request{TokenIDs: []int32{3, 1, 4}, MaxTokens: outLen,
					Sampling: opts(seedBase + uint64(i)), Stop: StopParams{IgnoreEOS: true}})
				if err != nil {
					t.Error(err)
					return
				}
				r := collect(t, s, 1)
				mu.Lock()
				for p, tok := range r.tokens[0] {
					counts[p][tok]++
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		if cfg.Speculation.Draft != nil {
			st := e.Stats()
			t.Logf("drafted %d accepted %d", st.SpecDraftTokens, st.SpecAcceptedTokens)
			if st.SpecAcceptedTokens == 0 || st.SpecAcceptedTokens == st.SpecDraftTokens {
				t.Fatalf("drafted %d accepted %d: want both outcomes", st.SpecDraftTokens, st.SpecAcceptedTokens)
			}
		}
		return counts
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			plain := sample(t, Config{}, c.opts, 1)
			spec := sample(t, Config{Speculation: Speculation{Draft: &fakeModel{vocab: vocab, ctx: 64, salt: 7, perturb: 3}, Tokens: 3}}, c.opts, 2_000_000)
			for p := range outLen {
				stat, df := homogeneity(plain[p], spec[p])
				if crit := chiSquareCritical(df); stat > crit {
					t.Errorf("position %d: chi-square %.1f > %.1f (df %d): plain %v, speculative %v", p, stat, crit, df, plain[p], spec[p])
				}
			}
		})
	}
}

func TestSpecDraftModelVocabMismatch(t *testing.T) {
	_, err := New(Config{KVPages: 16, Speculation: Speculation{Draft: &fakeModel{vocab: 32, ctx: 64}}},
		&fakeModel{vocab: 64, ctx: 64}, fakeTok{vocab: 64})
	if err == nil || !strings.Contains(err.Error(), "vocabulary") {
		t.Fatalf("error %v", err)
	}
}

// TestKVBudgetCountsDraft: a KV memory budget pays for the draft model's
// K/V store too, which has the same pages as the model's: each page costs
// both models' bytes (fakeModel: 64 bytes per position).
func TestKVBudgetCountsDraft(t *testing.T) {
	const budget = 64 << 10 // 64 pages of 16 positions for the model alone
	for _, tc := range []struct {
		draft Model
		pages int
	}{{nil, 64}, {&fakeModel{vocab: 64, ctx: 512}, 32}} {
		e, err := New(Config{KVMemory: budget, PageSize: 16, Speculation: Speculation{Draft: tc.draft}},
			&fakeModel{vocab: 64, ctx: 512}, fakeTok{vocab: 64})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Limits().TotalPages; got != tc.pages {
			t.Errorf("draft %v: %d pages, want %d", tc.draft != nil, got, tc.pages)
		}
		e.Close()
	}
}

// TestSpecAdaptiveBackoff: with a draft model that is never right,
// adaptive K drops to one draft and then backs off, so far fewer drafts
// are verified than with a fixed K; the output is still plain decoding's.
func TestSpecAdaptiveBackoff(t *testing.T) {
	req := Request{Prompt: "some prompt words", MaxTokens: 120, Sampling: greedy(), Stop: StopParams{IgnoreEOS: true}}
	want := run(t, newFakeEngine(t, Config{}, &fakeModel{vocab: 64, ctx: 512}), req)
	drafted := map[bool]uint64{}
	for _, adaptive := range []bool{false, true} {
		e := newFakeEngine(t, Config{Speculation: Speculation{Draft: &fakeModel{vocab: 64, ctx: 512, salt: 3}, Tokens: 4, Adaptive: adaptive}},
			&fakeModel{vocab: 64, ctx: 512})
		got := run(t, e, req)
		sameResult(t, 0, got, want)
		drafted[adaptive] = e.Stats().SpecDraftTokens
	}
	t.Logf("drafted: fixed K %d, adaptive %d", drafted[false], drafted[true])
	if drafted[false] < 300 || drafted[true] > 40 {
		t.Fatalf("drafted: fixed K %d, adaptive %d", drafted[false], drafted[true])
	}
}
