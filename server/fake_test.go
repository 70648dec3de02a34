package server

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"oengine/engine"
	"oengine/kvcache"
	"oengine/sampling"
)

// fakeBackend is a deterministic engine with no model. Output o of a
// request produces tokens 10+100*o, 11+100*o, ... with text "t<id> ",
// ending at MaxTokens (default fakeDefaultMax) or at a stop token id. Magic
// prompts trigger other paths:
//
//	"eos"          the first token is the EOS id (fakeEOS)
//	"fail"         one token, then an INTERNAL error after acceptance
//	"fail-early"   an INTERNAL error after acceptance, before any token
//	"too-long"     refused: CONTEXT_LENGTH_EXCEEDED
//	"overload"     refused: OVERLOADED
//	"big"          every token's text is 64 KiB (fills flow-control windows)
type fakeBackend struct {
	name  string
	lim   engine.Limits
	cache *kvcache.Cache

	// gate, when set, is received from before each token event, so a test
	// controls when a stream advances.
	gate chan struct{}

	mu       sync.Mutex // protects the fields below
	live     map[string]*fakeStream
	finished map[string]bool
	draining bool
	reqs     []engine.Request // every submitted request
	cancels  int              // streams that ended by cancellation
	seq      int
}

const (
	fakeEOS        = 2
	fakeDefaultMax = 3
	fakeVocab      = 1000
)

func newFake(t testing.TB, name string) *fakeBackend {
	t.Helper()
	c, err := kvcache.New(kvcache.Config{PageSize: 4, NumPages: 64, EventWindow: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &fakeBackend{
		name: name, cache: c,
		lim: engine.Limits{ContextLen: 512, MaxOutputTokens: 511, Vocab: fakeVocab, PageSize: 4,
			TotalPages: 64, MaxBatchedTokens: 256, MaxRunning: 8, MaxWaiting: 16, MaxLogprobs: 5},
		live: map[string]*fakeStream{}, finished: map[string]bool{},
	}
}

func (f *fakeBackend) ModelName() string     { return f.name }
func (f *fakeBackend) Limits() engine.Limits { return f.lim }
func (f *fakeBackend) Stats() engine.Stats {
	return engine.Stats{PromptTokens: 7, GenerationTokens: 5, PrefixQueries: 3, PrefixHits: 1, Preemptions: 2, Pauses: 4, ConsumerTimeouts: 3}
}
func (f *fakeBackend) TokenText(id int32) string { return fmt.Sprintf("t%d ", id) }
func (f *fakeBackend) SubscribeKV(from uint64, snap bool) (*kvcache.Subscription, error) {
	return f.cache.Subscribe(from, snap)
}

func (f *fakeBackend) Load() engine.LoadFigures {
	f.mu.Lock()
	defer f.mu.Unlock()
	return engine.LoadFigures{Running: len(f.live), Waiting: 1, TokensRunning: 40, TokensWaiting: 9, Pages: f.cache.Stats()}
}

func (f *fakeBackend) Drain() {
	f.mu.Lock()
	f.draining = true
	f.mu.Unlock()
}

func (f *fakeBackend) requests() []engine.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

func (f *fakeBackend) liveCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}

func (f *fakeBackend) cancelCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancels
}

func (f *fakeBackend) Abort(id string) error {
	f.mu.Lock()
	st, ok := f.live[id]
	fin := f.finished[id]
	f.mu.Unlock()
	switch {
	case ok:
		st.Cancel()
		return nil
	case fin:
		return &engine.Error{Code: engine.CodeAlreadyFinished, Message: "fake: already finished"}
	}
	return &engine.Error{Code: engine.CodeRequestNotFound, Message: "fake: not found"}
}

func (f *fakeBackend) AbortAll() int {
	f.mu.Lock()
	var all []*fakeStream
	for _, s := range f.live {
		all = append(all, s)
	}
	f.mu.Unlock()
	for _, s := range all {
		s.Cancel()
	}
	return len(all)
}

func (f *fakeBackend) Submit(ctx context.Context, r engine.Request) (Stream, error) {
	switch r.Prompt {
	case "too-long":
		return nil, &engine.Error{Code: engine.CodeContextLengthExceeded, Message: "fake: too long"}
	case "overload":
		return nil, &engine.Error{Code: engine.CodeOverloaded, Message: "fake: overloaded", Retryable: true}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r)
	if f.draining {
		return nil, &engine.Error{Code: engine.CodeDraining, Message: "fake: draining", Retryable: true}
	}
	if r.ID == "" {
		f.seq++
		r.ID = fmt.Sprintf("fake-%d", f.seq)
	}
	if _, dup := f.live[r.ID]; dup {
		return nil, &engine.Error{Code: engine.CodeDuplicateRequest, Message: "fake: duplicate"}
	}
	st := &fakeStream{f: f, r: r, ch: make(chan engine.Event, 256), cancel: make(chan struct{})}
	f.live[r.ID] = st
	go st.produce(ctx)
	return st, nil
}

type fakeStream struct {
	f      *fakeBackend
	r      engine.Request
	ch     chan engine.Event
	cancel chan struct{}
	once   sync.Once
	ended  bool // read side: terminal seen
}

func (s *fakeStream) ID() string { return s.r.ID }

func (s *fakeStream) Cancel() { s.once.Do(func() { close(s.cancel) }) }

func (s *fakeStream) Next(ctx context.Context) (engine.Event, error) {
	if s.ended {
		return engine.Event{}, io.EOF
	}
	select {
	case ev := <-s.ch:
		if ev.Terminal() {
			s.ended = true
		}
		return ev, nil
	case <-ctx.Done():
		return engine.Event{}, ctx.Err()
	}
}

func (s *fakeStream) end(ev engine.Event, cancelled bool) {
	s.ch <- ev
	s.f.mu.Lock()
	delete(s.f.live, s.r.ID)
	s.f.finished[s.r.ID] = true
	if cancelled {
		s.f.cancels++
	}
	s.f.mu.Unlock()
}

func (s *fakeStream) prompt() []int32 {
	if s.r.TokenIDs != nil {
		return s.r.TokenIDs
	}
	var out []int32
	for i := range strings.Fields(s.r.Prompt) {
		out = append(out, int32(500+i))
	}
	if len(out) == 0 {
		out = []int32{1}
	}
	return out
}

func fakeLogprobs(tok int32, c *sampling.Candidates) *sampling.Logprobs {
	lp := &sampling.Logprobs{Chosen: sampling.Logprob{Token: tok, Logprob: -0.5, Rank: 1}}
	switch c.Mode {
	case sampling.CandidatesTopN:
		for i := range c.TopN {
			lp.Candidates = append(lp.Candidates, sampling.Logprob{Token: tok + int32(i), Logprob: -0.5 - float64(i), Rank: i + 1})
		}
	case sampling.CandidatesTokenIDs:
		for _, id := range c.TokenIDs {
			lp.Candidates = append(lp.Candidates, sampling.Logprob{Token: id, Logprob: -3, Rank: 7})
		}
	}
	return lp
}

// produce emits the request's events; it stops early on cancellation.
func (s *fakeStream) produce(ctx context.Context) {
	r := s.r
	prompt := s.prompt()
	n := max(r.N, 1)
	maxTok := r.MaxTokens
	if maxTok == 0 {
		maxTok = fakeDefaultMax
	}
	usage := &engine.Usage{PromptTokens: len(prompt), CachedPromptTokens: len(prompt) / 2}
	if r.PromptLogprobs != nil {
		pi := &engine.PromptInfo{Tokens: prompt, CachedTokens: usage.CachedPromptTokens,
			Logprobs: make([]sampling.Logprobs, len(prompt))}
		for i := 1; i < len(prompt); i++ {
			pi.Logprobs[i] = *fakeLogprobs(prompt[i], r.PromptLogprobs)
		}
		s.ch <- engine.Event{Kind: engine.EventPrompt, Prompt: pi}
	}
	cancelled := func() bool {
		select {
		case <-s.cancel:
			return true
		case <-ctx.Done():
			return true
		default:
			return false
		}
	}
	produced := make([]int, n)
	done := make([]bool, n)
	abort := func() {
		for o := range n {
			if !done[o] && produced[o] > 0 {
				s.ch <- engine.Event{Kind: engine.EventFinished, Output: o,
					Finish: &engine.Finish{Reason: engine.FinishCancelled, Tokens: produced[o]}}
			}
		}
		s.end(engine.Event{Kind: engine.EventError, Usage: usage,
			Err: &engine.Error{Code: engine.CodeCancelled, Message: "fake: cancelled"}}, true)
	}
	if r.Prompt == "fail-early" {
		s.end(engine.Event{Kind: engine.EventError, Usage: usage,
			Err: &engine.Error{Code: engine.CodeInternal, Message: "fake: broken"}}, false)
		return
	}
	for step := 0; ; step++ {
		if s.f.gate != nil {
			select {
			case <-s.f.gate:
			case <-s.cancel:
			case <-ctx.Done():
			}
		}
		if cancelled() {
			abort()
			return
		}
		active := false
		for o := range n {
			if done[o] {
				continue
			}
			active = true
			tok := int32(10 + 100*o + step)
			if r.Prompt == "eos" {
				tok = fakeEOS
			}
			t := engine.Token{ID: tok}
			if r.Logprobs != nil {
				t.Logprobs = fakeLogprobs(tok, r.Logprobs)
			}
			produced[o]++
			usage.CompletionTokens++
			text := s.f.TokenText(tok)
			if r.Prompt == "big" {
				text = strings.Repeat("x", 64<<10)
			}
			s.ch <- engine.Event{Kind: engine.EventTokens, Output: o, Tokens: []engine.Token{t}, Text: text}
			var fin *engine.Finish
			switch {
			case tok == fakeEOS && !r.Stop.IgnoreEOS:
				fin = &engine.Finish{Reason: engine.FinishStop, Kind: engine.StopEOS, TokenID: tok}
			case slices.Contains(r.Stop.TokenIDs, tok):
				fin = &engine.Finish{Reason: engine.FinishStop, Kind: engine.StopTokenID, TokenID: tok}
			case len(r.Stop.Strings) > 0 && strings.Contains(s.f.TokenText(tok), r.Stop.Strings[0]):
				fin = &engine.Finish{Reason: engine.FinishStop, Kind: engine.StopString, Text: r.Stop.Strings[0]}
			case produced[o] >= maxTok:
				fin = &engine.Finish{Reason: engine.FinishLength, Kind: engine.StopMaxTokens}
			}
			if fin != nil {
				fin.Tokens = produced[o]
				done[o] = true
				s.ch <- engine.Event{Kind: engine.EventFinished, Output: o, Finish: fin}
			}
		}
		if r.Prompt == "fail" {
			s.ch <- engine.Event{Kind: engine.EventFinished, Output: 0, Finish: &engine.Finish{Reason: engine.FinishError}}
			s.end(engine.Event{Kind: engine.EventError, Usage: usage,
				Err: &engine.Error{Code: engine.CodeInternal, Message: "fake: broken"}}, false)
			return
		}
		if !active || !slices.Contains(done, false) {
			s.end(engine.Event{Kind: engine.EventDone, Usage: usage}, false)
			return
		}
	}
}

// blockedStreams counts live streams whose event queue is full: their
// consumer (the server's handler) stopped taking events.
func (f *fakeBackend) blockedStreams() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.live {
		if len(s.ch) == cap(s.ch) {
			n++
		}
	}
	return n
}
