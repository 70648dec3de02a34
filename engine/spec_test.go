package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"oengine/sampling"
)

// specRequests is a mix that exercises speculation against every stop
// rule: greedy and seeded sampling (filters, penalties), stop strings,
// max_tokens, min_tokens, logprobs, n > 1 and opted-out requests.
func specRequests() []Request {
	lp := &sampling.Candidates{Mode: sampling.CandidatesTopN, TopN: 2}
	prompts := []string{
		"the cat sat on the mat the cat sat on the",
		"abc abd abe abc abd abe abc",
		"one two three one two three one two",
		"repeat after me repeat after me repeat",
		"zz yy xx zz yy xx zz yy",
	}
	var reqs []Request
	for i, p := range prompts {
		reqs = append(reqs,
			Request{Prompt: p, MaxTokens: 40 + i, Sampling: greedy(), Logprobs: lp, Stop: StopParams{IgnoreEOS: true}},
			Request{Prompt: p, MaxTokens: 3 + i, Sampling: greedy()},
			Request{Prompt: p, MaxTokens: 30, Sampling: greedy(), Stop: StopParams{Strings: []string{p[4:6], "q"}}},
			Request{Prompt: p, MaxTokens: 25, MinTokens: 10, Sampling: sampling.Options{
				Temperature: ptr(0.9), TopK: ptr(int32(20)), TopP: ptr(0.9), Seed: ptr(uint64(i + 1))}, Logprobs: lp},
			Request{Prompt: p, MaxTokens: 25, Sampling: sampling.Options{
				Temperature: ptr(1.0), RepetitionPenalty: ptr(1.2), FrequencyPenalty: ptr(0.3), Seed: ptr(uint64(100 + i))}},
			Request{Prompt: p, N: 2, MaxTokens: 20, Sampling: sampling.Options{Temperature: ptr(0.7), Seed: ptr(uint64(7 + i))}},
			Request{Prompt: p, MaxTokens: 20, Sampling: greedy(), NoSpeculation: true},
		)
	}
	return reqs
}

func sameResult(t *testing.T, i int, got, want result) {
	t.Helper()
	if got.err != nil || want.err != nil {
		t.Fatalf("request %d: errors %v / %v", i, got.err, want.err)
	}
	for k := range want.tokens {
		if !equalTokens(got.tokens[k], want.tokens[k]) {
			t.Fatalf("request %d output %d: %v, without speculation %v", i, k, got.tokens[k], want.tokens[k])
		}
		if got.text[k] != want.text[k] {
			t.Fatalf("request %d output %d: text %q, without speculation %q", i, k, got.text[k], want.text[k])
		}
		if *got.finish[k] != *want.finish[k] {
			t.Fatalf("request %d output %d: finish %+v, without speculation %+v", i, k, *got.finish[k], *want.finish[k])
		}
		for j := range want.lps[k] {
			if fmt.Sprint(got.lps[k][j]) != fmt.Sprint(want.lps[k][j]) {
				t.Fatalf("request %d output %d token %d: logprobs %v, without speculation %v", i, k, j, got.lps[k][j], want.lps[k][j])
			}
		}
	}
	// Cached prompt tokens depend on arrival order under concurrency.
	if got.usage.PromptTokens != want.usage.PromptTokens || got.usage.CompletionTokens != want.usage.CompletionTokens {
		t.Fatalf("request %d: usage %+v, without speculation %+v", i, *got.usage, *want.usage)
	}
}

// TestSpecNGramEqualsPlain: with prompt-lookup speculation, every request
// of a concurrent mix (greedy, and seeded sampling, whose draws Verify
// makes exactly as Sample does) yields the same tokens, text, finish,
// logprobs and usage as without, also with chunked prefill, a pool small
// enough to preempt, and adaptive K; drafts were both accepted and
// rejected, stop strings ended outputs, and no page leaked (cleanup).
func TestSpecNGramEqualsPlain(t *testing.T) {
	reqs := specRequests()
	m := &fakeModel{vocab: 64, ctx: 512, echo: 7}
	want := concurrent(t, newFakeEngine(t, Config{}, m), reqs)
	cases := []struct {
		name string
		cfg  Config
	}{
		{"k4", Config{Speculation: Speculation{NGram: true}}},
		{"k8 adaptive", Config{Speculation: Speculation{NGram: true, Tokens: 8, Adaptive: true}}},
		{"chunked prefill", Config{MaxBatchedTokens: 12, Speculation: Speculation{NGram: true, Tokens: 3}}},
		{"tiny pool preempts", Config{KVPages: 60, MaxBatchedTokens: 24, MaxStepLatency: -1, Speculation: Speculation{NGram: true, Tokens: 5}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.CheckIntegrity = true
			e := newFakeEngine(t, tc.cfg, &fakeModel{vocab: 64, ctx: 512, echo: 7})
			got := concurrent(t, e, reqs)
			stops := 0
			for i := range reqs {
				sameResult(t, i, got[i], want[i])
				for _, f := range got[i].finish {
					if f.Kind == StopString {
						stops++
					}
				}
			}
			st := e.Stats()
			t.Logf("drafted %d accepted %d steps %d preemptions %d stop strings %d",
				st.SpecDraftTokens, st.SpecAcceptedTokens, st.Steps, st.Preemptions, stops)
			if st.SpecAcceptedTokens == 0 || st.SpecAcceptedTokens == st.SpecDraftTokens {
				t.Fatalf("drafted %d, accepted %d: want some accepted and some rejected", st.SpecDraftTokens, st.SpecAcceptedTokens)
			}
			if stops == 0 {
				t.Fatal("no output ended on a stop string")
			}
			if tc.name == "tiny pool preempts" && st.Preemptions == 0 {
				t.Fatal("no preemption")
			}
		})
	}
}

// TestSpecNGramSpeedsUpRepetition: on an output that repeats, most drafts
// are accepted and the target runs fewer steps than tokens.
func TestSpecNGramSpeedsUpRepetition(t *testing.T) {
	e := newFakeEngine(t, Config{Speculation: Speculation{NGram: true, Tokens: 6}}, &fakeModel{vocab: 64, ctx: 512, echo: 6, echoBonus: 20})
	r := run(t, e, Request{Prompt: "abcde abcde abcde", MaxTokens: 60, Sampling: greedy(), Stop: StopParams{IgnoreEOS: true}})
	st := e.Stats()
	if len(r.tokens[0]) != 60 || st.Steps > 30 {
		t.Fatalf("%d tokens in %d steps (drafted %d accepted %d)", len(r.tokens[0]), st.Steps, st.SpecDraftTokens, st.SpecAcceptedTokens)
	}
}

// TestSpecRetainAndPrefix: a session's retained tokens and K/V count are
// the same with speculation, and pages published to the prefix cache hold
// only verified tokens: a request reusing them computes what a request
// bypassing the cache computes (the fake model's logits read every slot).
func TestSpecRetainAndPrefix(t *testing.T) {
	prompt := strings.Repeat("go go gadget ", 5)
	retained := func(e *Engine) (Retained, result) {
		var kept Retained
		r := run(t, e, Request{Prompt: prompt, MaxTokens: 37, Sampling: greedy(), Stop: StopParams{IgnoreEOS: true},
			OnRetain: func(rt Retained) { kept = Retained{Tokens: rt.Tokens, Computed: rt.Computed} }})
		return kept, r
	}
	plain := newFakeEngine(t, Config{}, &fakeModel{vocab: 64, ctx: 512, echo: 6})
	spec := newFakeEngine(t, Config{Speculation: Speculation{NGram: true}}, &fakeModel{vocab: 64, ctx: 512, echo: 6})
	kp, rp := retained(plain)
	ks, rs := retained(spec)
	if !equalTokens(ks.Tokens, kp.Tokens) || ks.Computed != kp.Computed {
		t.Fatalf("retained %d tokens (%d computed), without speculation %d (%d)", len(ks.Tokens), ks.Computed, len(kp.Tokens), kp.Computed)
	}
	sameResult(t, 0, rs, rp)
	if spec.Stats().SpecDraftTokens == spec.Stats().SpecAcceptedTokens {
		t.Fatal("no draft was rejected")
	}
	// Continue from the whole retained sequence: the cached pages include
	// pages that held rejected drafts before rollback.
	next := append(ks.Tokens, 5, 6, 7)
	reuse := run(t, spec, Request{TokenIDs: next, MaxTokens: 8, Sampling: greedy(), NoSpeculation: true})
	fresh := run(t, spec, Request{TokenIDs: next, MaxTokens: 8, Sampling: greedy(), NoSpeculation: true, BypassPrefixCache: true})
	if reuse.usage.CachedPromptTokens < 40 {
		t.Fatalf("only %d tokens reused", reuse.usage.CachedPromptTokens)
	}
	if !equalTokens(reuse.tokens[0], fresh.tokens[0]) {
		t.Fatalf("prefix reuse %v, recomputed %v", reuse.tokens[0], fresh.tokens[0])
	}
}

// TestSpecCancelMidway: cancelling a request while its drafts are being
// verified ends it within a step and releases every page (cleanup).
func TestSpecCancelMidway(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 512, echo: 4, gate: make(chan struct{})}
	e := newFakeEngine(t, Config{Speculation: Speculation{NGram: true}}, m)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := e.Submit(ctx, Request{Prompt: "wxyz wxyz wxyz", MaxTokens: 200, Sampling: greedy(), Stop: StopParams{IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats().SpecDraftTokens < 8 {
		if time.Now().After(deadline) {
			t.Fatal("no speculation happened")
		}
		m.gate <- struct{}{}
		time.Sleep(time.Millisecond)
	}
	cancel()
	waitCancelSeen(e, s)
	close(m.gate)
	r := collect(t, s, 1)
	if r.err == nil || r.err.Code != CodeCancelled {
		t.Fatalf("terminal %+v", r.err)
	}
	if r.finish[0] == nil || r.finish[0].Reason != FinishCancelled || r.usage.CompletionTokens != len(r.tokens[0]) {
		t.Fatalf("finish %+v usage %+v", r.finish[0], r.usage)
	}
}

func TestNgramLookup(t *testing.T) {
	cases := []struct {
		toks []int32
		k    int
		want []int32
	}{
		{[]int32{1, 2, 3, 9, 1, 2, 3}, 3, []int32{9, 1, 2}},
		{[]int32{1, 2, 3, 4, 5, 7, 2, 3}, 2, []int32{4, 5}}, // bigram
		{[]int32{5, 8, 1, 9, 9, 1}, 4, []int32{9, 9, 1}},    // unigram, most recent earlier match
		{[]int32{1, 2, 3, 1, 2, 4, 1, 2}, 2, []int32{4, 1}}, // most recent
		{[]int32{1, 2, 3}, 2, nil},                          // no match
		{[]int32{7}, 2, nil},
	}
	for _, c := range cases {
		if got := ngramLookup(c.toks, c.k, nil); !equalTokens(got, c.want) {
			t.Errorf("ngramLookup(%v, %d) = %v, want %v", c.toks, c.k, got, c.want)
		}
	}
}

// TestSpecStopMidDraft: on a strongly repeating output (every draft
// accepted), stop strings, stop ids, EOS-free max_tokens and min_tokens
// that end the output in the middle of a step's accepted drafts give the
// plain result exactly: the rest of the step's tokens is discarded.
func TestSpecStopMidDraft(t *testing.T) {
	m := func() *fakeModel { return &fakeModel{vocab: 64, ctx: 512, echo: 6, echoBonus: 20} }
	prompt := "abcde abcde abcde"
	reqs := []Request{
		{Prompt: prompt, MaxTokens: 50, Sampling: greedy(), Stop: StopParams{Strings: []string{"e ab"}}},
		{Prompt: prompt, MaxTokens: 50, MinTokens: 9, Sampling: greedy(), Stop: StopParams{Strings: []string{"cd"}}},
		{Prompt: prompt, MaxTokens: 50, Sampling: greedy(), Stop: StopParams{TokenIDs: []int32{4}}},
		{Prompt: prompt, MaxTokens: 50, MinTokens: 2, Sampling: greedy(), Stop: StopParams{TokenIDs: []int32{3}, IncludeStopInOutput: true}},
		{Prompt: prompt, MaxTokens: 9, Sampling: greedy()},
		{Prompt: prompt, MaxTokens: 13, Sampling: greedy(), Stop: StopParams{Strings: []string{"zzz"}}},
	}
	for i, r := range reqs {
		want := run(t, newFakeEngine(t, Config{}, m()), r)
		e := newFakeEngine(t, Config{Speculation: Speculation{NGram: true, Tokens: 6}}, m())
		got := run(t, e, r)
		sameResult(t, i, got, want)
		if st := e.Stats(); st.SpecAcceptedTokens == 0 {
			t.Fatalf("request %d: no draft accepted", i)
		}
		if want.finish[0].Kind == StopMaxTokens && i < 4 {
			t.Fatalf("request %d did not stop early: %+v", i, want.finish[0])
		}
	}
}
