package engine

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestLeakCancelEverywhere submits 1000 requests and cancels them at random
// points (right after Submit, so before admission; after some events, so
// during prefill or mid-decode; or never, so they finish), by context,
// Stream.Cancel or Abort. Afterwards every page is free or cached, the KV
// ledger is consistent and the goroutines are back to the baseline.
func TestLeakCancelEverywhere(t *testing.T) {
	base := runtime.NumGoroutine()
	n := 1000
	if testing.Short() {
		n = 200
	}
	e := newFakeEngine(t, Config{KVPages: 40, MaxBatchedTokens: 12, MaxRunning: 8, EventQueue: 8}, nil)
	cancelStorm(t, e, n)
	e.Close()
	waitGoroutines(t, base)
}

// cancelStorm runs n requests cancelled at random points and checks the
// page ledger after them (see TestLeakCancelEverywhere).
func cancelStorm(t *testing.T, e *Engine, n int) {
	var mu sync.Mutex
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			r := rand.New(rand.NewPCG(uint64(i), 5))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			words := make([]string, 1+r.IntN(12))
			for j := range words {
				words[j] = string(rune('a'+r.IntN(26))) + string(rune('a'+r.IntN(26)))
			}
			req := Request{Prompt: strings.Join(words, " "), MaxTokens: 1 + r.IntN(20),
				N: 1 + r.IntN(2), Priority: int32(r.IntN(3)), Sampling: greedy()}
			s, err := e.Submit(ctx, req)
			if err != nil {
				t.Error(err)
				return
			}
			after := r.IntN(12) // events to read before cancelling; >= 10 means never
			how := r.IntN(3)
			read, terminal := 0, 0
			var last Event
			for {
				if read == after {
					switch how {
					case 0:
						cancel()
					case 1:
						s.Cancel()
					case 2:
						_ = e.Abort(s.ID()) // may already be finished
					}
				}
				ev, err := s.Next(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Error(err)
					return
				}
				read++
				if ev.Terminal() {
					terminal++
					last = ev
				}
			}
			if terminal != 1 {
				t.Errorf("request %d: %d terminal events", i, terminal)
			}
			mu.Lock()
			outcomes[last.Kind.String()+"/"+codeOrOK(last)]++
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	checkLedger(t, e)
	t.Logf("outcomes %v, preemptions %d", outcomes, e.Stats().Preemptions)
	if outcomes["done/OK"] == 0 || outcomes["error/CANCELLED"] == 0 {
		t.Fatalf("outcomes do not mix finished and cancelled: %v", outcomes)
	}
}

func codeOrOK(ev Event) string {
	if ev.Err != nil {
		return ev.Err.Code.String()
	}
	return "OK"
}
