package sse

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sort"
	"testing"
	"time"

	"oengine/engine"
)

// smallBufferClient dials with a small socket receive buffer, so a reader
// that stops reading stalls the server's writes quickly.
func smallBufferClient(size int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		ReadBufferSize:    1024,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(size)
			}
			return c, nil
		},
	}}
}

// A client that disconnects mid-stream gets its sequence cancelled within
// one engine step and its pages freed (ledger check).
func TestSSEDisconnectFreesPages(t *testing.T) {
	tok := sseVocab(t)
	m := fillerModel(tok)
	m.delay = time.Millisecond
	e := newScriptEngine(t, m, sseEngineOpts{name: "main"})
	h := startSSE(t, sseHarnessOpts{cfg: Config{MaxTokens: 2000}}, e)
	id := h.open("main", "some context for the session").Ref.SessionID
	base := e.Cache().Stats()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := h.post(ctx, nil, id, promptBody("go on"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := &sseReader{br: bufio.NewReader(resp.Body)}
	for deltas := 0; deltas < 5; {
		ev, err := rd.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Name == "delta" {
			deltas++
		}
	}
	m.gated.Store(true) // the engine now waits for the test before each forward pass
	defer func() {
		m.gated.Store(false)
		for { // unblock a forward pass that is waiting
			select {
			case m.gate <- struct{}{}:
				continue
			case <-time.After(20 * time.Millisecond):
			}
			return
		}
	}()
	if e.Cache().Stats().InUse == 0 {
		t.Fatal("the running request holds no pages")
	}
	cancel() // the client goes away: the connection closes
	waitFor(t, "the handler to see the disconnect", func() bool { return h.outcomeCount("disconnected") == 1 })
	grants := 0
	deadline := time.Now().Add(5 * time.Second)
	for e.Cache().Stats().InUse != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pages still in use after %d steps", grants)
		}
		select {
		case m.gate <- struct{}{}:
			grants++
		case <-time.After(10 * time.Millisecond):
		}
	}
	if grants > 1 {
		t.Fatalf("cancellation took %d forward passes, want at most the one in flight", grants)
	}
	st := e.Cache().Stats()
	if st.Pinned != base.Pinned || st.InUse != 0 {
		t.Fatalf("pages after disconnect %+v, before %+v", st, base)
	}
	if err := e.Cache().CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}

// stall starts a request whose client reads the started event and then
// nothing, and waits until its sequence is paused and generates no more.
func stall(t *testing.T, h *sseHarness, e interface {
	Stats() engine.Stats
	Load() engine.LoadFigures
}, id string) (close func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := h.post(ctx, smallBufferClient(4096), id, promptBody("stall"))
	if err != nil {
		t.Fatal(err)
	}
	rd := &sseReader{br: bufio.NewReaderSize(resp.Body, 64)}
	if ev, err := rd.next(); err != nil || ev.Name != "started" {
		t.Fatalf("first event %v %v", ev, err)
	}
	waitFor(t, "the stalled sequence to pause", func() bool { return e.Stats().Pauses > 0 && e.Load().Paused > 0 })
	// A slow writer pauses the sequence now and then before the socket
	// buffers are full; wait until generation really stops.
	gen := e.Stats().GenerationTokens
	waitFor(t, "generation to stop", func() bool {
		time.Sleep(50 * time.Millisecond)
		g := e.Stats().GenerationTokens
		stopped := g == gen && e.Load().Paused > 0
		gen = g
		return stopped
	})
	return func() { cancel(); resp.Body.Close() }
}

// A reader that stops reading pauses its sequence (engine backpressure):
// its output stays bounded while other streams keep producing; when it
// leaves, its pages are freed.
func TestSSEStalledReaderPauses(t *testing.T) {
	tok := sseVocab(t)
	m := fillerModel(tok)
	const queue, maxTokens = 16, 1000
	e := newScriptEngine(t, m, sseEngineOpts{name: "main", eventQueue: queue})
	h := startSSE(t, sseHarnessOpts{cfg: Config{MaxTokens: maxTokens, WriteTimeout: time.Minute}, writeBuffer: 4096},
		e)
	id := h.open("main", "context").Ref.SessionID
	leave := stall(t, h, e, id)
	defer leave()
	gen0 := e.Stats().GenerationTokens
	if gen0 >= maxTokens+1 { // + the session's prefill sample
		t.Fatalf("the stalled request generated all its tokens (%d) before pausing", gen0)
	}
	start := time.Now()
	r := h.generate(context.Background(), id, "other")
	checkSSEStream(t, r)
	var d sseDone
	r.events[len(r.events)-1].decode(t, &d)
	if d.OutputTokens != maxTokens || d.FinishReason != "length" {
		t.Fatalf("other stream done %+v", d)
	}
	t.Logf("the other stream generated %d tokens in %v while the stalled one was paused", maxTokens, time.Since(start))
	// Only the other stream generated meanwhile. The engine's counters are
	// updated on its step loop, possibly just after the done event left:
	// wait until they account for the other stream's tokens.
	waitFor(t, "generation counters to settle", func() bool {
		return int(e.Stats().GenerationTokens-gen0) >= maxTokens
	})
	if extra := int(e.Stats().GenerationTokens-gen0) - maxTokens; extra != 0 {
		t.Fatalf("the stalled sequence generated %d tokens while its reader was stalled", extra)
	}
	if e.Load().Paused == 0 {
		t.Fatal("the stalled sequence is no longer paused")
	}
	leave()
	waitFor(t, "pages released", func() bool { return e.Cache().Stats().InUse == 0 })
	if err := e.Cache().CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}

// A reader stalled beyond the write timeout is cancelled.
func TestSSEStalledReaderTimeout(t *testing.T) {
	tok := sseVocab(t)
	e := newScriptEngine(t, fillerModel(tok), sseEngineOpts{name: "main", eventQueue: 16})
	h := startSSE(t, sseHarnessOpts{cfg: Config{MaxTokens: 1000, WriteTimeout: 300 * time.Millisecond}, writeBuffer: 4096},
		e)
	id := h.open("main", "context").Ref.SessionID
	leave := stall(t, h, e, id)
	defer leave()
	waitFor(t, "the write timeout to cancel the stalled stream", func() bool { return h.outcomeCount("write_timeout") == 1 })
	waitFor(t, "pages released", func() bool { return e.Cache().Stats().InUse == 0 && e.Load().Paused == 0 })
	if err := e.Cache().CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSSEInterTokenLatency measures the gaps between deltas of one
// reading client, alone and next to a client that stopped reading (its
// sequence paused by backpressure). One op is one inter-delta gap.
func BenchmarkSSEInterTokenLatency(b *testing.B) {
	for _, stalled := range []bool{false, true} {
		name := "alone"
		if stalled {
			name = "with-stalled-reader"
		}
		b.Run(name, func(b *testing.B) {
			tok := sseVocab(b)
			m := fillerModel(tok)
			e := newScriptEngine(b, m, sseEngineOpts{name: "main", eventQueue: 16})
			h := startSSE(b, sseHarnessOpts{cfg: Config{MaxTokens: 2000, WriteTimeout: time.Minute}, writeBuffer: 4096},
				e)
			id := h.open("main", "context").Ref.SessionID
			if stalled {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				resp, err := h.post(ctx, smallBufferClient(4096), id, promptBody("stall"))
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				waitFor(b, "pause", func() bool { return e.Load().Paused > 0 })
			}
			gaps := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for len(gaps) < b.N {
				resp, err := h.post(context.Background(), nil, id, promptBody("measure"))
				if err != nil {
					b.Fatal(err)
				}
				rd := &sseReader{br: bufio.NewReader(resp.Body)}
				var last time.Time
				for len(gaps) < b.N {
					ev, err := rd.next()
					if err != nil {
						break
					}
					if ev.Name != "delta" {
						continue
					}
					now := time.Now()
					if !last.IsZero() {
						gaps = append(gaps, now.Sub(last))
					}
					last = now
				}
				resp.Body.Close()
			}
			b.StopTimer()
			sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
			if len(gaps) > 0 {
				b.ReportMetric(float64(gaps[len(gaps)/2].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(gaps[len(gaps)*99/100].Nanoseconds()), "p99-ns")
			}
			if stalled && e.Load().Paused == 0 {
				b.Fatal("the stalled reader's sequence is not paused")
			}
		})
	}
}

// A shutdown past its grace cancels running side generations: each ends
// with done{finish_reason: cancelled}, the one terminal event.
func TestSSEShutdownCancels(t *testing.T) {
	tok := sseVocab(t)
	m := fillerModel(tok)
	m.delay = 2 * time.Millisecond
	e := newScriptEngine(t, m, sseEngineOpts{name: "main"})
	h := startSSE(t, sseHarnessOpts{cfg: Config{MaxTokens: 3000}}, e)
	id := h.open("main", "context").Ref.SessionID
	resp, err := h.post(context.Background(), nil, id, promptBody("long"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := &sseReader{br: bufio.NewReader(resp.Body)}
	var res sseResult
	res.status, res.header = resp.StatusCode, resp.Header
	for {
		ev, err := rd.next()
		if err != nil {
			res.err = err
			if err == io.EOF {
				res.err = nil
			}
			break
		}
		res.events = append(res.events, ev)
		if len(res.events) == 4 {
			go func() { _ = h.s.Shutdown(0) }()
		}
	}
	checkSSEStream(t, res)
	var d sseDone
	last := res.events[len(res.events)-1]
	last.decode(t, &d)
	if last.Name != "done" || d.FinishReason != "cancelled" || d.OutputTokens == 0 || d.OutputTokens >= 3000 {
		t.Fatalf("last event %s %+v", last.Name, d)
	}
}
