package engine

import (
	"context"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"oengine/sampling"
)

func newFakeEngine(t testing.TB, cfg Config, m *fakeModel) *Engine {
	t.Helper()
	if m == nil {
		m = &fakeModel{vocab: 64, ctx: 512}
	}
	if cfg.KVPages == 0 {
		cfg.KVPages = 256
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 4
	}
	e, err := New(cfg, m, fakeTok{vocab: m.vocab})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		checkLedger(t, e)
		e.Close()
	})
	return e
}

// checkLedger asserts that no page is held by a sequence and the KV ledger
// is consistent (call when no request is live).
func checkLedger(t testing.TB, e *Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.WaitIdle(ctx); err != nil {
		t.Fatalf("engine not idle: %v", err)
	}
	if err := e.cache.CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
	if st := e.cache.Stats(); st.InUse != 0 || st.Free+st.Cached+st.Pinned != st.Total {
		t.Fatalf("pages still held: %+v", st)
	}
}

type result struct {
	tokens   [][]int32
	text     []string
	finish   []*Finish
	lps      [][]*sampling.Logprobs
	prompt   *PromptInfo
	usage    *Usage
	err      *Error
	events   []Event
	terminal int
}

func collect(t testing.TB, s *Stream, n int) result {
	t.Helper()
	r := result{tokens: make([][]int32, n), text: make([]string, n), finish: make([]*Finish, n), lps: make([][]*sampling.Logprobs, n)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for {
		ev, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Errorf("stream %s: %v", s.ID(), err) // collect runs in goroutines: no Fatal
			return r
		}
		r.events = append(r.events, ev)
		switch ev.Kind {
		case EventPrompt:
			r.prompt = ev.Prompt
		case EventTokens:
			for _, tk := range ev.Tokens {
				r.tokens[ev.Output] = append(r.tokens[ev.Output], tk.ID)
				r.lps[ev.Output] = append(r.lps[ev.Output], tk.Logprobs)
			}
			r.text[ev.Output] += ev.Text
		case EventFinished:
			if r.finish[ev.Output] != nil {
				t.Errorf("output %d finished twice", ev.Output)
			}
			r.finish[ev.Output] = ev.Finish
		case EventDone:
			r.usage = ev.Usage
			r.terminal++
		case EventError:
			r.usage, r.err = ev.Usage, ev.Err
			r.terminal++
		}
	}
	if r.terminal != 1 {
		t.Errorf("stream %s: %d terminal events", s.ID(), r.terminal)
	}
	return r
}

func run(t testing.TB, e *Engine, req Request) result {
	t.Helper()
	s, err := e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	n := max(req.N, 1)
	return collect(t, s, n)
}

func ptr[T any](v T) *T { return &v }

func greedy() sampling.Options { return sampling.Options{Temperature: ptr(0.0)} }

func waitGoroutines(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines: %d > baseline %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func equalTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func runtimeGosched() { time.Sleep(time.Millisecond) }
