package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"oengine/kvcache"
	"oengine/model/tokenizer"
	"oengine/sampling"
)

func TestGenerateBasic(t *testing.T) {
	e := newFakeEngine(t, Config{}, nil)
	r := run(t, e, Request{Prompt: "hello world", MaxTokens: 10, Sampling: greedy()})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.tokens[0]) != 10 || r.finish[0].Reason != FinishLength || r.finish[0].Kind != StopMaxTokens {
		t.Fatalf("tokens %v finish %+v", r.tokens[0], r.finish[0])
	}
	if want := (fakeTok{}).text(r.tokens[0]); r.text[0] != want {
		t.Fatalf("text %q, want %q", r.text[0], want)
	}
	if r.usage.PromptTokens != 11 || r.usage.CompletionTokens != 10 {
		t.Fatalf("usage %+v", r.usage)
	}
	if r.prompt == nil || len(r.prompt.Tokens) != 11 || r.events[0].Kind != EventPrompt {
		t.Fatal("prompt event missing or not first")
	}
	if last := r.events[len(r.events)-1]; last.Kind != EventDone {
		t.Fatalf("last event %v", last.Kind)
	}
}

// solo runs each request alone on a fresh engine.
func solo(t *testing.T, reqs []Request) []result {
	e := newFakeEngine(t, Config{}, nil)
	out := make([]result, len(reqs))
	for i, r := range reqs {
		out[i] = run(t, e, r)
	}
	return out
}

func concurrent(t *testing.T, e *Engine, reqs []Request) []result {
	out := make([]result, len(reqs))
	streams := make([]*Stream, len(reqs))
	for i, r := range reqs {
		s, err := e.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		streams[i] = s
	}
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = collect(t, s, max(reqs[i].N, 1))
		}()
	}
	wg.Wait()
	return out
}

func mixedRequests(n int, seed uint64, sampled bool) []Request {
	r := rand.New(rand.NewPCG(seed, 1))
	reqs := make([]Request, n)
	for i := range reqs {
		words := make([]string, 1+r.IntN(30))
		for j := range words {
			words[j] = strings.Repeat(string(rune('a'+r.IntN(26))), 1+r.IntN(6))
		}
		reqs[i] = Request{Prompt: strings.Join(words, " "), MaxTokens: 1 + r.IntN(40), Sampling: greedy()}
		if sampled {
			reqs[i].Sampling = sampling.Options{Temperature: ptr(0.8), TopP: ptr(0.9), Seed: ptr(uint64(i + 1))}
		}
	}
	return reqs
}

// TestBatchInvariance: 32 concurrent mixed-length requests produce what
// each produces alone, also with chunked prefill and a pool so small that
// sequences are preempted and recomputed. The fake model's logits depend on
// every K/V slot the sequence reads, so this proves page tables,
// copy-on-write, prefix reuse and recomputation.
func TestBatchInvariance(t *testing.T) {
	for _, sampled := range []bool{false, true} {
		reqs := mixedRequests(32, 3, sampled)
		want := solo(t, reqs)
		cases := []struct {
			name string
			cfg  Config
		}{
			{"default", Config{}},
			{"chunked prefill", Config{MaxBatchedTokens: 16}},
			// The step-latency bound sizes chunks from measured time; off,
			// the plans (and the preemption this case asserts) do not
			// depend on how busy the machine is.
			{"tiny pool preempts", Config{KVPages: 60, MaxBatchedTokens: 24, MaxStepLatency: -1}},
			{"few running", Config{MaxRunning: 3, MaxBatchedTokens: 8}},
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/sampled=%v", tc.name, sampled), func(t *testing.T) {
				e := newFakeEngine(t, tc.cfg, nil)
				got := concurrent(t, e, reqs)
				for i := range reqs {
					if got[i].err != nil {
						t.Fatalf("request %d: %v", i, got[i].err)
					}
					if !equalTokens(got[i].tokens[0], want[i].tokens[0]) {
						t.Fatalf("request %d: %v, alone %v", i, got[i].tokens[0], want[i].tokens[0])
					}
				}
				if tc.name == "tiny pool preempts" && e.Stats().Preemptions == 0 {
					t.Fatal("no preemption happened")
				}
				t.Logf("preemptions %d steps %d", e.Stats().Preemptions, e.Stats().Steps)
			})
		}
	}
}

func TestPrefixReuse(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 512}
	e := newFakeEngine(t, Config{}, m)
	prompt := strings.Repeat("abcdefg ", 8) // 64 tokens = 16 pages of 4
	lp := &sampling.Candidates{Mode: sampling.CandidatesTopN, TopN: 3}
	first := run(t, e, Request{Prompt: prompt, MaxTokens: 5, Sampling: greedy(), Logprobs: lp})
	before := m.forwarded.Load()
	second := run(t, e, Request{Prompt: prompt + "xyz", MaxTokens: 5, Sampling: greedy(), Logprobs: lp})
	computed := m.forwarded.Load() - before
	if second.usage.CachedPromptTokens != 64 {
		t.Fatalf("cached %d, want 64", second.usage.CachedPromptTokens)
	}
	if computed != 3+4 { // the 3 new prompt tokens, then 4 decode steps
		t.Fatalf("second request computed %d tokens", computed)
	}
	same := run(t, e, Request{Prompt: prompt, MaxTokens: 5, Sampling: greedy(), Logprobs: lp})
	if same.usage.CachedPromptTokens != 60 { // the last prompt token is always computed
		t.Fatalf("cached %d, want 60", same.usage.CachedPromptTokens)
	}
	for i := range first.lps[0] {
		if fmt.Sprint(first.lps[0][i]) != fmt.Sprint(same.lps[0][i]) {
			t.Fatalf("logprobs differ at %d: %+v vs %+v", i, first.lps[0][i], same.lps[0][i])
		}
	}
	salted := run(t, e, Request{Prompt: prompt, MaxTokens: 1, Sampling: greedy(), CacheSalt: "tenant"})
	bypass := run(t, e, Request{Prompt: prompt, MaxTokens: 1, Sampling: greedy(), BypassPrefixCache: true})
	if salted.usage.CachedPromptTokens != 0 || bypass.usage.CachedPromptTokens != 0 {
		t.Fatalf("salted %d bypass %d cached tokens", salted.usage.CachedPromptTokens, bypass.usage.CachedPromptTokens)
	}
	if st := e.Stats(); st.PrefixHits == 0 || st.PrefixQueries < st.PrefixHits {
		t.Fatalf("prefix stats %+v", st)
	}
}

func TestMultipleOutputs(t *testing.T) {
	e := newFakeEngine(t, Config{}, nil)
	g := run(t, e, Request{Prompt: "shared prompt here", N: 3, MaxTokens: 12, Sampling: greedy()})
	for i := 1; i < 3; i++ {
		if !equalTokens(g.tokens[i], g.tokens[0]) {
			t.Fatalf("greedy outputs differ: %v vs %v", g.tokens[i], g.tokens[0])
		}
	}
	if g.usage.CompletionTokens != 36 || g.usage.PromptTokens != 18 {
		t.Fatalf("usage %+v", g.usage)
	}
	s := run(t, e, Request{Prompt: "shared prompt here", N: 4, MaxTokens: 12,
		Sampling: sampling.Options{Temperature: ptr(1.5), Seed: ptr(uint64(9))}})
	distinct := map[string]bool{}
	for i := 0; i < 4; i++ {
		if s.finish[i] == nil || len(s.tokens[i]) != 12 {
			t.Fatalf("output %d: %v %+v", i, s.tokens[i], s.finish[i])
		}
		distinct[fmt.Sprint(s.tokens[i])] = true
	}
	if len(distinct) < 2 {
		t.Fatal("sampled outputs identical")
	}
	if e.cache.Stats().COWCopies == 0 {
		t.Fatal("outputs did not share the prompt's last page")
	}
}

func TestStopConditions(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 512}
	e := newFakeEngine(t, Config{}, m)
	base := run(t, e, Request{Prompt: "stop tests", MaxTokens: 30, Sampling: greedy()})
	full := base.text[0]
	toks := base.tokens[0]
	// A stop string that spans a token boundary: the last char of token 4
	// and the first of token 5.
	pre := fakeTok{}.text(toks[:5])
	stop := pre[len(pre)-1:] + fakeTok{}.piece(toks[5])[:1]
	cut := strings.Index(full, stop)

	cases := []struct {
		name      string
		req       Request
		wantText  string
		wantKind  StopKind
		wantToken int // tokens generated; -1: don't check
	}{
		{"stop token id", Request{Stop: StopParams{TokenIDs: []int32{toks[3]}}}, "", StopTokenID, -1},
		{"stop string across tokens", Request{Stop: StopParams{Strings: []string{stop}}}, full[:cut], StopString, -1},
		{"include stop string", Request{Stop: StopParams{Strings: []string{stop}, IncludeStopInOutput: true}}, full[:cut+len(stop)], StopString, -1},
		{"max tokens", Request{MaxTokens: 7}, fakeTok{}.text(toks[:7]), StopMaxTokens, 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Prompt, req.Sampling = "stop tests", greedy()
			if req.MaxTokens == 0 {
				req.MaxTokens = 30
			}
			r := run(t, e, req)
			f := r.finish[0]
			if f.Kind != tc.wantKind {
				t.Fatalf("finish %+v", f)
			}
			if tc.wantKind == StopTokenID {
				i := 0
				for toks[i] != toks[3] {
					i++
				}
				if f.TokenID != toks[3] || len(r.tokens[0]) != i+1 || r.text[0] != (fakeTok{}).text(toks[:i]) {
					t.Fatalf("stop id: tokens %v text %q", r.tokens[0], r.text[0])
				}
				return
			}
			if r.text[0] != tc.wantText {
				t.Fatalf("text %q, want %q", r.text[0], tc.wantText)
			}
			if tc.wantKind == StopString && (f.Text != stop || f.Index != 0) {
				t.Fatalf("match %+v", f)
			}
			if tc.wantToken >= 0 && len(r.tokens[0]) != tc.wantToken {
				t.Fatalf("%d tokens", len(r.tokens[0]))
			}
		})
	}
}

// TestHoldback: text that may still become a stop string is not emitted
// until it is known not to be one.
func TestHoldback(t *testing.T) {
	e := newFakeEngine(t, Config{}, nil)
	base := run(t, e, Request{Prompt: "hold", MaxTokens: 20, Sampling: greedy()})
	full := base.text[0]
	// A stop string whose first 2 chars occur at the end of token 2's
	// text but which never matches: it holds text back, then releases it.
	p := fakeTok{}.text(base.tokens[0][:3])
	stop := p[len(p)-2:] + "#"
	r := run(t, e, Request{Prompt: "hold", MaxTokens: 20, Sampling: greedy(), Stop: StopParams{Strings: []string{stop}}})
	if r.text[0] != full {
		t.Fatalf("text %q, want %q", r.text[0], full)
	}
	// Right after token 3, the emitted text must stop before the
	// held suffix.
	emitted := ""
	n := 0
	for _, ev := range r.events {
		if ev.Kind == EventTokens {
			emitted += ev.Text
			n++
			if n == 3 {
				break
			}
		}
	}
	if emitted != p[:len(p)-2] {
		t.Fatalf("after 3 tokens emitted %q, want %q (suffix held back)", emitted, p[:len(p)-2])
	}
}

func TestEOSMinTokensIgnoreEOS(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 512, eosAt: 8} // EOS is argmax from position 8 on
	e := newFakeEngine(t, Config{}, m)
	prompt := "abcd" // 4 tokens: the 6th generated token is sampled at position 8
	cases := []struct {
		name   string
		req    Request
		tokens int
		kind   StopKind
	}{
		{"eos stops", Request{}, 6, StopEOS},
		{"min tokens masks eos", Request{MinTokens: 9}, 10, StopEOS},
		{"ignore eos", Request{Stop: StopParams{IgnoreEOS: true}}, 20, StopMaxTokens},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Prompt, req.MaxTokens, req.Sampling = prompt, 20, greedy()
			r := run(t, e, req)
			if len(r.tokens[0]) != tc.tokens || r.finish[0].Kind != tc.kind {
				t.Fatalf("tokens %v finish %+v", r.tokens[0], r.finish[0])
			}
			for i, tk := range r.tokens[0] {
				if tk == 0 && tc.kind == StopEOS && i != len(r.tokens[0])-1 {
					t.Fatalf("EOS at %d before the end", i)
				}
			}
		})
	}
}

func TestContextLimit(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 32}
	e := newFakeEngine(t, Config{}, m)
	_, err := e.Submit(context.Background(), Request{Prompt: strings.Repeat("a", 30), MaxTokens: 5})
	if !errors.Is(err, ErrContextLength) {
		t.Fatalf("err %v", err)
	}
	r := run(t, e, Request{Prompt: strings.Repeat("a", 28), Sampling: greedy(), Stop: StopParams{IgnoreEOS: true}})
	if len(r.tokens[0]) != 4 || r.finish[0].Reason != FinishLength || r.finish[0].Kind != StopMaxTokens && r.finish[0].Kind != StopContext {
		t.Fatalf("tokens %d finish %+v", len(r.tokens[0]), r.finish[0])
	}
}

func TestValidation(t *testing.T) {
	e := newFakeEngine(t, Config{}, nil)
	cases := []struct {
		name string
		req  Request
		code Code
	}{
		{"empty prompt", Request{}, CodeInvalidArgument},
		{"negative n", Request{Prompt: "a", N: -1}, CodeInvalidArgument},
		{"negative max tokens", Request{Prompt: "a", MaxTokens: -1}, CodeInvalidArgument},
		{"min above max", Request{Prompt: "a", MaxTokens: 2, MinTokens: 3}, CodeInvalidArgument},
		{"token out of vocab", Request{TokenIDs: []int32{1, 999}}, CodeInvalidArgument},
		{"stop id out of vocab", Request{Prompt: "a", Stop: StopParams{TokenIDs: []int32{-2}}}, CodeInvalidArgument},
		{"empty stop string", Request{Prompt: "a", Stop: StopParams{Strings: []string{""}}}, CodeInvalidArgument},
		{"temperature negative", Request{Prompt: "a", Sampling: sampling.Options{Temperature: ptr(-1.0)}}, CodeInvalidArgument},
		{"top_p zero", Request{Prompt: "a", Sampling: sampling.Options{TopP: ptr(0.0)}}, CodeInvalidArgument},
		{"too many logprobs", Request{Prompt: "a", Logprobs: &sampling.Candidates{Mode: sampling.CandidatesTopN, TopN: 1000}}, CodeInvalidArgument},
		{"context exceeded", Request{Prompt: "a", MaxTokens: 100000}, CodeContextLengthExceeded},
		{"n beyond max running", Request{Prompt: "a", N: 1000}, CodeInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Submit(context.Background(), tc.req)
			if CodeOf(err) != tc.code || err == nil {
				t.Fatalf("err %v (code %v), want %v", err, CodeOf(err), tc.code)
			}
			// Each package names itself once: no "sampling: sampling:".
			parts := strings.Split(err.Error(), ": ")
			seen := map[string]bool{}
			for _, p := range parts[:len(parts)-1] {
				if seen[p] {
					t.Fatalf("message %q repeats the prefix %q", err, p)
				}
				seen[p] = true
			}
		})
	}
}

func TestAbortAndRetention(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 512, gate: make(chan struct{})}
	e := newFakeEngine(t, Config{}, m)
	s, err := e.Submit(context.Background(), Request{ID: "r1", Prompt: "abc", MaxTokens: 50})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(context.Background(), Request{ID: "r1", Prompt: "abc"}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate: %v", err)
	}
	m.gate <- struct{}{} // one step runs
	if err := e.Abort("r1"); err != nil {
		t.Fatal(err)
	}
	close(m.gate)
	r := collect(t, s, 1)
	if r.err == nil || r.err.Code != CodeCancelled {
		t.Fatalf("terminal %+v", r.err)
	}
	if err := e.Abort("r1"); !errors.Is(err, ErrAlreadyFinished) {
		t.Fatalf("abort finished: %v", err)
	}
	if err := e.Abort("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("abort unknown: %v", err)
	}
	e.Drain()
	if _, err := e.Submit(context.Background(), Request{Prompt: "abc"}); !errors.Is(err, ErrDraining) {
		t.Fatalf("draining: %v", err)
	}
}

func TestOverloaded(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 512, gate: make(chan struct{})}
	e := newFakeEngine(t, Config{MaxWaiting: 2, MaxRunning: 1}, m)
	submit := func() *Stream {
		s, err := e.Submit(context.Background(), Request{Prompt: "abc", MaxTokens: 2})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The first request is taken by the loop, which then blocks in the
	// gated Forward; the next two wait (pending), filling MaxWaiting.
	streams := []*Stream{submit()}
	waitUntil(t, func() bool { e.mu.Lock(); defer e.mu.Unlock(); return len(e.pending) == 0 })
	streams = append(streams, submit(), submit())
	if w := e.Load().Waiting; w != 2 {
		t.Fatalf("Load().Waiting %d with two requests in the inbox", w)
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: "abc"}); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("err %v", err)
	} else if !err.(*Error).Retryable {
		t.Fatal("overload not retryable")
	}
	close(m.gate)
	for _, s := range streams {
		collect(t, s, 1)
	}
}

// waitUntil polls cond until it holds (10 s at most).
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestContextCancel(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 512, gate: make(chan struct{})}
	e := newFakeEngine(t, Config{}, m)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := e.Submit(ctx, Request{Prompt: "abc", MaxTokens: 100, Stop: StopParams{IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	m.gate <- struct{}{}
	ev, err := s.Next(context.Background())
	if err != nil || ev.Kind != EventPrompt {
		t.Fatalf("%v %v", ev.Kind, err)
	}
	cancel()
	waitCancelSeen(e, s)
	close(m.gate)
	r := collect(t, s, 1)
	if r.err == nil || r.err.Code != CodeCancelled {
		t.Fatalf("terminal %+v", r.err)
	}
}

func TestBackpressureAndConsumerTimeout(t *testing.T) {
	e := newFakeEngine(t, Config{EventQueue: 4}, nil)
	s, err := e.Submit(context.Background(), Request{Prompt: "abc", MaxTokens: 40, Sampling: greedy(), Stop: StopParams{IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the engine pauses the sequence: queue full, not buffered.
	for e.Stats().Pauses == 0 {
		runtimeGosched()
	}
	if l := e.Load(); l.Paused != 1 {
		t.Fatalf("load %+v", l)
	}
	if n := s.backlog(); n > 4+1 {
		t.Fatalf("backlog %d beyond the bound", n)
	}
	r := collect(t, s, 1)
	if r.err != nil || len(r.tokens[0]) != 40 {
		t.Fatalf("after resume: %v, %d tokens", r.err, len(r.tokens[0]))
	}

	e2 := newFakeEngine(t, Config{EventQueue: 2, ConsumerTimeout: 1}, nil)
	s2, err := e2.Submit(context.Background(), Request{Prompt: "abc", MaxTokens: 40, Stop: StopParams{IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	r2 := collect(t, s2, 1)
	if r2.err == nil || r2.err.Code != CodeCancelled || e2.Stats().ConsumerTimeouts != 1 {
		t.Fatalf("consumer timeout: %+v", r2.err)
	}
}

// TestBackpressureBytes is issue 17 point 5: a consumer that stops reading
// holds at most about EventQueueBytes of events, however large each is
// (before the fix only events were counted: 64 events of all-candidate
// logprobs were queued).
func TestBackpressureBytes(t *testing.T) {
	e := newFakeEngine(t, Config{EventQueue: 64, EventQueueBytes: 3000}, &fakeModel{vocab: 300, ctx: 512})
	s, err := e.Submit(context.Background(), Request{Prompt: "abc", MaxTokens: 40, Sampling: greedy(),
		Stop: StopParams{IgnoreEOS: true}, Logprobs: &sampling.Candidates{Mode: sampling.CandidatesAll}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); e.Stats().Pauses == 0; runtimeGosched() {
		if time.Now().After(deadline) {
			t.Fatalf("never paused; %d events queued", s.backlog())
		}
	}
	if n := s.backlog(); n > 2 {
		t.Fatalf("backlog %d events of ~7 KiB each with a 3000-byte bound", n)
	}
	r := collect(t, s, 1)
	if r.err != nil || len(r.tokens[0]) != 40 {
		t.Fatalf("after resume: %v, %d tokens", r.err, len(r.tokens[0]))
	}
}

func TestOpenInput(t *testing.T) {
	e := newFakeEngine(t, Config{}, nil)
	want := run(t, e, Request{Prompt: "streamed input text", MaxTokens: 8, Sampling: greedy(), BypassPrefixCache: true})
	s, err := e.Submit(context.Background(), Request{OpenInput: true, MaxTokens: 8, Sampling: greedy(), BypassPrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	toks := fakeTok{}.Encode("streamed input text", tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	for i := 0; i < len(toks); i += 5 {
		if err := s.AppendInput(toks[i:min(i+5, len(toks))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CloseInput(); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendInput([]int32{1}); CodeOf(err) != CodeInvalidArgument {
		t.Fatalf("append after close: %v", err)
	}
	r := collect(t, s, 1)
	if !equalTokens(r.tokens[0], want.tokens[0]) || r.usage.PromptTokens != len(toks) {
		t.Fatalf("streamed %v, unary %v", r.tokens[0], want.tokens[0])
	}
}

func TestPromptLogprobs(t *testing.T) {
	e := newFakeEngine(t, Config{MaxBatchedTokens: 5}, nil)
	c := &sampling.Candidates{Mode: sampling.CandidatesTopN, TopN: 2}
	a := run(t, e, Request{Prompt: "prompt logprobs over chunks", MaxTokens: 2, Sampling: greedy(), PromptLogprobs: c})
	e2 := newFakeEngine(t, Config{}, nil)
	b := run(t, e2, Request{Prompt: "prompt logprobs over chunks", MaxTokens: 2, Sampling: greedy(), PromptLogprobs: c})
	if len(a.prompt.Logprobs) != 27 {
		t.Fatalf("%d prompt logprobs", len(a.prompt.Logprobs))
	}
	for i := 1; i < 27; i++ {
		x, y := a.prompt.Logprobs[i], b.prompt.Logprobs[i]
		if x.Chosen != y.Chosen || x.Chosen.Rank == 0 || len(x.Candidates) != 2 || x.Candidates[0] != y.Candidates[0] {
			t.Fatalf("position %d: %+v vs %+v", i, x, y)
		}
	}
}

// TestPromptLogprobsPreempted: prompt logprobs of requests that are
// preempted and recomputed equal those of a run without preemption, and
// each prompt position's logits row is computed once: a recomputing chunk
// that ends before the rows already taken does not move the sequence's
// LogitsFrom back.
func TestPromptLogprobsPreempted(t *testing.T) {
	c := &sampling.Candidates{Mode: sampling.CandidatesTopN, TopN: 2}
	reqs := mixedRequests(16, 9, false)
	for i := range reqs {
		reqs[i].PromptLogprobs = c
	}
	want := solo(t, reqs)
	m := &fakeModel{vocab: 64, ctx: 512}
	e := newFakeEngine(t, Config{KVPages: 60, MaxBatchedTokens: 24, MaxStepLatency: -1}, m)
	got := concurrent(t, e, reqs)
	if e.Stats().Preemptions == 0 {
		t.Fatal("no preemption happened")
	}
	rows := 0
	for i := range reqs {
		g, w := got[i], want[i]
		if g.err != nil || !equalTokens(g.tokens[0], w.tokens[0]) || len(g.prompt.Logprobs) != len(w.prompt.Logprobs) {
			t.Fatalf("request %d: %v %v, alone %v", i, g.err, g.tokens[0], w.tokens[0])
		}
		for p := 1; p < len(w.prompt.Logprobs); p++ {
			if g.prompt.Logprobs[p].Chosen != w.prompt.Logprobs[p].Chosen {
				t.Fatalf("request %d position %d: %+v, alone %+v", i, p, g.prompt.Logprobs[p].Chosen, w.prompt.Logprobs[p].Chosen)
			}
		}
		rows += len(g.prompt.Tokens) + len(g.tokens[0]) - 1 // every prompt position, then one row per later token
	}
	if n := m.rows.Load(); n != int64(rows) {
		t.Fatalf("%d logits rows computed, %d needed", n, rows)
	}
}

func TestRetainForSessions(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 512}
	e := newFakeEngine(t, Config{}, m)
	var kept []int32
	r := run(t, e, Request{Prompt: strings.Repeat("turn one ", 4), MaxTokens: 6, Sampling: greedy(),
		OnRetain: func(rt Retained) {
			kept = rt.Tokens
			if err := e.Cache().Repin("sess", rt.Table); err != nil {
				t.Error(err)
			}
		}})
	if len(kept) != 36+6 || !equalTokens(kept[36:], r.tokens[0]) {
		t.Fatalf("retained %d tokens", len(kept))
	}
	if e.Cache().PinnedPages("sess") == 0 {
		t.Fatal("nothing pinned")
	}
	next := append(append([]int32(nil), kept...), fakeTok{}.Encode(" turn two", tokenizer.EncodeOptions{ParseSpecial: true})...)
	r2 := run(t, e, Request{TokenIDs: next, MaxTokens: 3, Sampling: greedy()})
	if r2.usage.CachedPromptTokens != 40 { // full pages of the 41 computed tokens
		t.Fatalf("cached %d", r2.usage.CachedPromptTokens)
	}
	e.Cache().Unpin("sess")
}

func TestDeadline(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 512, gate: make(chan struct{})}
	e := newFakeEngine(t, Config{}, m)
	// The deadline must pass after admission, while the gated step holds
	// the request: a deadline that passes inside Submit (a loaded machine
	// under -race took more than a millisecond) is refused there, with the
	// deadline error, and is tried again with a longer one.
	var s *Stream
	var ctx context.Context
	for _, d := range []time.Duration{20 * time.Millisecond, 200 * time.Millisecond, 2 * time.Second} {
		c, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		var err error
		if s, err = e.Submit(c, Request{Prompt: "abc", MaxTokens: 10}); err == nil {
			ctx = c
			break
		}
		if !strings.Contains(err.Error(), "deadline") {
			t.Fatal(err)
		}
	}
	if s == nil {
		t.Fatal("every deadline passed inside Submit")
	}
	<-ctx.Done()
	waitCancelSeen(e, s)
	close(m.gate)
	r := collect(t, s, 1)
	if r.err == nil || r.err.Code != CodeCancelled || !strings.Contains(r.err.Message, "deadline") {
		t.Fatalf("terminal %+v", r.err)
	}
}

func TestHooksAndStats(t *testing.T) {
	var mu sync.Mutex
	var done []RequestStats
	steps, itl := 0, 0
	e := newFakeEngine(t, Config{Hooks: Hooks{
		OnStep:        func(StepStats) { mu.Lock(); steps++; mu.Unlock() },
		OnInterToken:  func(time.Duration) { mu.Lock(); itl++; mu.Unlock() },
		OnRequestDone: func(rs RequestStats) { mu.Lock(); done = append(done, rs); mu.Unlock() },
	}}, nil)
	run(t, e, Request{ID: "h1", Prompt: "hooks", MaxTokens: 6, Sampling: greedy(), Stop: StopParams{IgnoreEOS: true}})
	checkLedger(t, e)
	// The hooks may run just after the terminal event reached the stream.
	waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(done) > 0 && steps >= 6 && itl >= 5 })
	mu.Lock()
	defer mu.Unlock()
	if len(done) != 1 || done[0].ID != "h1" || done[0].CompletionTokens != 6 || done[0].TTFT <= 0 ||
		done[0].E2E < done[0].TTFT || done[0].Err != nil || done[0].Finishes[0].Kind != StopMaxTokens {
		t.Fatalf("request stats %+v", done)
	}
	if steps != 6 || itl != 5 {
		t.Fatalf("steps %d inter-token %d", steps, itl)
	}
	if st := e.Stats(); st.GenerationTokens != 6 || st.Requests != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// waitCancelSeen waits until a context cancellation, which reaches the
// engine asynchronously (context.AfterFunc), is recorded; tests hold the
// model gate until then so the request cannot finish first.
func waitCancelSeen(e *Engine, s *Stream) {
	for {
		e.mu.Lock()
		seen := s.req.cancelErr != nil
		e.mu.Unlock()
		if seen {
			return
		}
		runtimeGosched()
	}
}

// panicModel fails every forward pass by panicking.
type panicModel struct{ *fakeModel }

func (panicModel) Forward(KV, *Batch, []float32) error { panic("kernel bug") }

func TestModelPanicEndsRequestNotProcess(t *testing.T) {
	e, err := New(Config{KVPages: 16, PageSize: 4}, panicModel{&fakeModel{vocab: 64, ctx: 64}}, fakeTok{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := run(t, e, Request{Prompt: "abc", MaxTokens: 3})
	if r.err == nil || r.err.Code != CodeInternal {
		t.Fatalf("terminal %+v", r.err)
	}
	checkLedger(t, e)
}

// TestRequestPrefix: a request that brings a K/V prefix (a session's
// pinned pages, a partly filled last page included) reuses all of it and
// computes only the rest, with the output of a run from scratch; a cut
// inside the partial page copies it, so the owner's K/V stays intact; the
// engine releases the prefix on every path (refused, cancelled, done).
func TestRequestPrefix(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 512}
	e := newFakeEngine(t, Config{}, m) // page size 4
	c := e.Cache()
	prompt := fakeTok{}.Encode("abcdefghi", tokenizer.EncodeOptions{}) // 9 tokens
	var kept []int32
	var resident int
	run(t, e, Request{TokenIDs: prompt, MaxTokens: 3, Sampling: greedy(), OnRetain: func(rt Retained) {
		f, err := c.ForkPrefix(rt.Table, rt.Computed)
		if err == nil {
			err = c.Repin("sess", f)
		}
		if err != nil {
			t.Error(err)
		}
		c.Release(f)
		kept, resident = rt.Tokens, rt.Computed
	}})
	if len(kept) != 12 || resident != 11 {
		t.Fatalf("retained %d tokens, %d resident", len(kept), resident)
	}
	pinned := func(n int) *kvcache.Table {
		t.Helper()
		pt, err := c.PinnedTable("sess", kvcache.Namespace{}, n)
		if err != nil {
			t.Fatal(err)
		}
		return pt
	}
	// ownerIntact reads the session's pinned pages in the fake K/V: its
	// resident tokens, nothing written after them.
	ownerIntact := func() {
		t.Helper()
		pt := pinned(resident)
		defer c.Release(pt)
		kv := e.kv.(*fakeKV)
		kv.mu.Lock()
		defer kv.mu.Unlock()
		for p := 0; p < len(pt.Pages())*4; p++ {
			want := int64(-1)
			if p < resident {
				want = int64(kept[p])<<32 | int64(p)
			}
			if got := kv.slots[pt.Pages()[p/4]][p%4]; got != want {
				t.Fatalf("the session's position %d holds %x, want %x", p, got, want)
			}
		}
	}
	cases := []struct {
		name   string
		tokens []int32
		reuse  int
	}{
		{"append", append(slices.Clone(kept), 5, 6, 7), 11},
		{"branch inside the partial page", append(slices.Clone(kept[:10]), 20, 21), 10},
		{"nothing new: the last token is computed", slices.Clone(kept[:11]), 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := run(t, e, Request{TokenIDs: tc.tokens, MaxTokens: 4, Sampling: greedy(), BypassPrefixCache: true, CacheSalt: "scratch"})
			before := m.forwarded.Load()
			got := run(t, e, Request{TokenIDs: tc.tokens, MaxTokens: 4, Sampling: greedy(), Prefix: pinned(tc.reuse)})
			if got.err != nil || got.usage.CachedPromptTokens != min(tc.reuse, len(tc.tokens)-1) {
				t.Fatalf("cached %d of %d (%v), want %d", got.usage.CachedPromptTokens, len(tc.tokens), got.err, tc.reuse)
			}
			if n := m.forwarded.Load() - before; int(n) != len(tc.tokens)-got.usage.CachedPromptTokens+3 {
				t.Fatalf("computed %d tokens, want %d prompt + 3 decode", n, len(tc.tokens)-got.usage.CachedPromptTokens)
			}
			if !equalTokens(got.tokens[0], want.tokens[0]) {
				t.Fatalf("output %v, from scratch %v", got.tokens[0], want.tokens[0])
			}
			if err := c.CheckIntegrity(); err != nil {
				t.Fatal(err)
			}
			ownerIntact()
		})
	}

	t.Run("released on every path", func(t *testing.T) {
		refused := []Request{
			{TokenIDs: kept, MaxTokens: -1},    // invalid
			{Prompt: "abc", MaxTokens: 1},      // a prefix needs token ids
			{TokenIDs: kept[:5], MaxTokens: 1}, // prefix longer than the prompt
		}
		for i, r := range refused {
			r.Prefix = pinned(11)
			if _, err := e.Submit(context.Background(), r); err == nil {
				t.Fatalf("request %d accepted", i)
			}
			if !r.Prefix.Released() {
				t.Fatalf("refused request %d kept its prefix", i)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := Request{TokenIDs: kept, MaxTokens: 1, Prefix: pinned(11)}
		if _, err := e.Submit(ctx, r); err == nil || !r.Prefix.Released() {
			t.Fatalf("cancelled before admission: %v, released %v", err, r.Prefix.Released())
		}
		// EOS is ignored and the budget is long, so the request cannot end
		// on its own before the cancel below (it once sampled EOS first).
		st, err := e.Submit(context.Background(), Request{TokenIDs: kept, MaxTokens: 400, Prefix: pinned(11), Stop: StopParams{IgnoreEOS: true}})
		if err != nil {
			t.Fatal(err)
		}
		st.Cancel()
		if res := collect(t, st, 1); res.err == nil || res.err.Code != CodeCancelled {
			t.Fatalf("cancelled request ended with %v", res.err)
		}
	})
	checkLedger(t, e)
	if st := c.Stats(); st.Tables != 0 || st.Pinned != 3 {
		t.Fatalf("after the requests: %+v", st)
	}
	c.Unpin("sess")
}

// TestRequestPrefixPreempted: requests that reuse a session's pinned
// pages (partial last page included) under a pool so small that they are
// preempted: each readmission starts from the prefix again, outputs match
// runs alone, and the ledger holds only the session's pins afterwards.
func TestRequestPrefixPreempted(t *testing.T) {
	m := &fakeModel{vocab: 64, ctx: 512}
	// Page size 4; the step-latency bound is off so that the plans, and the
	// preemption asserted below, do not depend on measured step times.
	e := newFakeEngine(t, Config{KVPages: 24, MaxBatchedTokens: 8, MaxStepLatency: -1}, m)
	c := e.Cache()
	hist := fakeTok{}.Encode("abcdefghij", tokenizer.EncodeOptions{}) // 10 tokens: 2 pages and a half
	run(t, e, Request{TokenIDs: hist, MaxTokens: 1, Sampling: greedy(), OnRetain: func(rt Retained) {
		f, _ := c.ForkPrefix(rt.Table, len(hist))
		if err := c.Repin("sess", f); err != nil {
			t.Error(err)
		}
		c.Release(f)
	}})
	var reqs, alone []Request
	for i := range 6 {
		toks := append(slices.Clone(hist[:10-i%3]), int32(30+i), int32(31+i))
		alone = append(alone, Request{TokenIDs: toks, MaxTokens: 30, Sampling: greedy(), CacheSalt: "alone", BypassPrefixCache: true})
		pt, err := c.PinnedTable("sess", kvcache.Namespace{}, 10-i%3)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, Request{TokenIDs: toks, MaxTokens: 30, Sampling: greedy(), Prefix: pt})
	}
	var want []result
	for _, r := range alone {
		want = append(want, run(t, e, r))
	}
	got := concurrent(t, e, reqs)
	for i := range reqs {
		if got[i].err != nil || !equalTokens(got[i].tokens[0], want[i].tokens[0]) {
			t.Fatalf("request %d: %v %v, alone %v", i, got[i].err, got[i].tokens[0], want[i].tokens[0])
		}
	}
	if e.Stats().Preemptions == 0 {
		t.Fatal("no preemption happened")
	}
	checkLedger(t, e)
	if st := c.Stats(); st.Tables != 0 || st.Pinned != 3 {
		t.Fatalf("after the requests: %+v", st)
	}
	c.Unpin("sess")
}

// TestAbortAfterTerminal: once a consumer has seen the terminal event, an
// Abort of that id is ALREADY_FINISHED, never a fresh cancellation (the id
// used to leave the live set only after the terminal event was queued; seen
// as a flaky second ABORTED in the server's conformance test).
func TestAbortAfterTerminal(t *testing.T) {
	e := newFakeEngine(t, Config{}, nil)
	for i := range 300 {
		id := fmt.Sprintf("r%d", i)
		s, err := e.Submit(context.Background(), Request{ID: id, Prompt: "ab", MaxTokens: 1, Sampling: greedy()})
		if err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := s.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if ev.Terminal() {
				break
			}
		}
		var ee *Error
		if err := e.Abort(id); !errors.As(err, &ee) || ee.Code != CodeAlreadyFinished {
			t.Fatalf("request %d: Abort after its terminal event: %v", i, err)
		}
	}
}

// greedyPanicModel takes every logits step normally but panics when asked
// to choose greedy tokens itself (GreedyModel).
type greedyPanicModel struct{ *fakeModel }

func (greedyPanicModel) ForwardGreedy(KV, *Batch, []int32) error { panic("argmax kernel bug") }

// A failing device-greedy step ends its requests like a failing forward
// pass: one terminal INTERNAL error each, the process alive, no page kept;
// a request that needs its logits rows still completes on the same engine.
func TestGreedyModelPanicEndsRequests(t *testing.T) {
	e, err := New(Config{KVPages: 16, PageSize: 4}, greedyPanicModel{&fakeModel{vocab: 64, ctx: 64}}, fakeTok{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := run(t, e, Request{Prompt: "abc", MaxTokens: 3, Sampling: greedy()})
	if r.err == nil || r.err.Code != CodeInternal || r.terminal != 1 {
		t.Fatalf("terminal %+v (%d terminal events)", r.err, r.terminal)
	}
	checkLedger(t, e)
	r = run(t, e, Request{Prompt: "abc", MaxTokens: 3, Sampling: greedy(),
		Logprobs: &sampling.Candidates{Mode: sampling.CandidatesTopN, TopN: 1}})
	if r.err != nil || len(r.tokens[0]) != 3 {
		t.Fatalf("logprobs request: %+v, %v", r.err, r.tokens)
	}
	checkLedger(t, e)
}
