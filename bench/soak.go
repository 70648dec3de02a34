package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "oengine/proto/openengine/v1"
)

// ScenarioSoak is the long-running mixed load with end-of-run leak checks
// (docs/bench.md: soak).
const ScenarioSoak = "soak"

// SoakConfig is one soak run: continuous load at Concurrency for Duration,
// a fraction of requests cancelled by the client at a random point and a
// fraction of stalled readers, then checks of the server's state.
type SoakConfig struct {
	Duration       time.Duration `json:"duration_ns"`
	Concurrency    int           `json:"concurrency"`
	CancelFraction float64       `json:"cancel_fraction"`
	StallFraction  float64       `json:"stall_fraction"`
	// StallFor is how long a stalled reader stops reading after its first
	// token event; it must exceed the server's consumer timeout (serve
	// --consumer-timeout) so that the server pauses and then cancels it.
	StallFor time.Duration `json:"stall_for_ns"`
	// StallOutput is the max_tokens of a stalled request (0: 512, less
	// when the context is shorter): enough output, with logprobs over all
	// candidates, to fill the transport's flow-control window and the
	// engine's event queue.
	StallOutput int      `json:"stall_output_tokens"`
	Workload    Workload `json:"workload"`
	InputMode   string   `json:"input_mode,omitempty"`
	// MetricsURL is the server's /metrics (required: the checks read it).
	MetricsURL string `json:"metrics_url"`
	// SampleEvery is the period of the RSS / goroutine / pages samples.
	SampleEvery time.Duration `json:"sample_every_ns"`
	// RSSAt is the time of the RSS reference sample (5 min; half the
	// duration when the run is shorter than twice that).
	RSSAt time.Duration `json:"rss_reference_at_ns"`
	// RSSTolerance: the RSS after the run may exceed the reference by at
	// most this fraction (0.10).
	RSSTolerance float64 `json:"rss_tolerance"`
	// GoroutineSlack is how many goroutines above the baseline the server
	// may have after the run (timers, idle HTTP/2 connection helpers).
	GoroutineSlack int `json:"goroutine_slack"`
	// Settle bounds the wait after the load for the server to become idle
	// and its goroutines to return to the baseline.
	Settle time.Duration `json:"settle_timeout_ns"`
	// RequestTimeout bounds each request (a request still open after it is
	// a violation); 0: 2 min + StallFor.
	RequestTimeout time.Duration `json:"request_timeout_ns"`
	Seed           uint64        `json:"seed"`
}

// Fill checks c and sets the defaults of the fields left zero.
func (c *SoakConfig) Fill() error {
	if c.Duration <= 0 {
		return errors.New("bench: soak needs a duration")
	}
	if c.CancelFraction < 0 || c.StallFraction < 0 || c.CancelFraction+c.StallFraction > 1 {
		return fmt.Errorf("bench: soak: cancel fraction %g and stall fraction %g must be >= 0 and sum to at most 1", c.CancelFraction, c.StallFraction)
	}
	if c.MetricsURL == "" {
		return errors.New("bench: soak needs the server's /metrics URL (its checks read it)")
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.StallFor <= 0 {
		c.StallFor = 10 * time.Second
	}
	if c.StallOutput <= 0 {
		c.StallOutput = 512
	}
	if c.SampleEvery <= 0 {
		c.SampleEvery = 10 * time.Second
	}
	if c.RSSAt <= 0 {
		c.RSSAt = 5 * time.Minute
	}
	if c.RSSAt > c.Duration/2 {
		c.RSSAt = c.Duration / 2
	}
	if c.RSSTolerance <= 0 {
		c.RSSTolerance = 0.10
	}
	if c.GoroutineSlack < 0 {
		c.GoroutineSlack = 0
	}
	if c.Settle <= 0 {
		c.Settle = time.Minute
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 2*time.Minute + c.StallFor
	}
	return nil
}

// Request kinds of a soak.
const (
	soakNormal = "normal" // read to the end
	soakCancel = "cancel" // the client cancels after a random number of tokens
	soakStall  = "stall"  // the client stops reading for StallFor
)

// soakEnd is how one soak request ended.
type soakEnd struct {
	kind      string
	rejected  string // refused before acceptance: its code ("" accepted)
	end       string // label for the report, e.g. "normal:length"
	violation string // "" when the request ended as the rules say
	enforced  bool   // stall: the server cancelled it (finish reason or error CANCELLED)
	tokens    int
}

// soakCall runs one Generate and classifies its end. The rules (docs/bench.md:
// soak): an accepted request's stream carries exactly one terminal event —
// the response with Usage (after GenerationFinished) or an EngineError —
// and nothing after it, then ends with OK. A request the client cancelled
// may instead end with the client's own CANCELLED status and no terminal
// event (the transport end); never two terminal events, never an OK end
// without one. A request refused before acceptance (a non-OK status with
// no event, RESOURCE_EXHAUSTED or UNAVAILABLE) is counted as rejected.
func soakCall(ctx context.Context, inf pb.InferenceClient, gr *pb.GenerateRequest, kind string, cancelAfter int, stallFor time.Duration, rng *rand.Rand) soakEnd {
	e := soakEnd{kind: kind}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cancelled atomic.Bool
	fire := func() { cancelled.Store(true); cancel() }
	if kind == soakCancel && cancelAfter == 0 {
		t := time.AfterFunc(time.Duration(rng.Int64N(int64(20*time.Millisecond))), fire)
		defer t.Stop()
	}
	var (
		events, terminals, after int
		reason                   pb.FinishReason
		errCode                  string
		stalled                  bool
		endErr                   error
	)
	st, err := inf.Generate(ctx, gr)
	if err != nil {
		endErr = err
	} else {
		for {
			ev, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				endErr = err
				break
			}
			events++
			if terminals > 0 {
				after++
			}
			if f := ev.GetFinished(); f != nil {
				reason = f.GetReason()
			}
			if ee := ev.GetError(); ee != nil {
				errCode = ee.GetCode().String()
			}
			if ev.Usage != nil || ev.GetError() != nil {
				terminals++
			}
			if tok := ev.GetToken(); tok != nil {
				e.tokens += len(tok.GetTokens())
				if kind == soakCancel && cancelAfter > 0 && e.tokens >= cancelAfter && !cancelled.Load() {
					fire()
				}
				if kind == soakStall && !stalled {
					stalled = true
					select {
					case <-time.After(stallFor):
					case <-ctx.Done():
					}
				}
			}
		}
	}
	outcome := reason.String()
	if errCode != "" {
		outcome = "error:" + errCode
	}
	e.enforced = reason == pb.FinishReason_FINISH_REASON_CANCELLED || errCode == pb.ErrorCode_ERROR_CODE_CANCELLED.String()
	switch {
	case endErr != nil:
		code := status.Code(endErr)
		switch {
		case cancelled.Load() && (code == codes.Canceled || errors.Is(endErr, context.Canceled)):
			e.end = kind + ":client-cancel"
			if terminals > 1 || after > 0 {
				e.violation = fmt.Sprintf("%d terminal events and %d events after the first before the client's cancel", terminals, after)
			}
		case events == 0 && (code == codes.ResourceExhausted || code == codes.Unavailable) && !cancelled.Load():
			e.rejected = code.String()
			e.end = kind + ":rejected"
		default:
			e.end = kind + ":status-" + code.String()
			e.violation = fmt.Sprintf("stream ended with status %s after %d events (%d terminal): %v", code, events, terminals, endErr)
		}
	case terminals == 1 && after == 0:
		e.end = kind + ":" + outcome
	case terminals == 0:
		e.end = kind + ":no-terminal"
		e.violation = fmt.Sprintf("stream ended OK after %d events without a terminal event", events)
	default:
		e.end = kind + ":" + outcome
		e.violation = fmt.Sprintf("%d terminal events, %d events after the first", terminals, after)
	}
	return e
}

// soakLedger collects the ends of a soak's requests.
type soakLedger struct {
	mu       sync.Mutex // protects everything below
	rep      *SoakReport
	inflight int
}

func (l *soakLedger) start() {
	l.mu.Lock()
	l.inflight++
	l.mu.Unlock()
}

func (l *soakLedger) record(e soakEnd) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	r := l.rep
	r.Requests++
	switch e.kind {
	case soakCancel:
		r.Cancels++
	case soakStall:
		r.Stalls++
		if e.enforced {
			r.StallsEnforced++
		}
	default:
		r.Normal++
	}
	r.Ends[e.end]++
	r.OutputTokens += e.tokens
	if e.rejected != "" {
		r.Rejected++
		return
	}
	r.Accepted++
	if e.violation != "" {
		r.Violations++
		if len(r.ViolationExamples) < 10 {
			r.ViolationExamples = append(r.ViolationExamples, e.end+": "+e.violation)
		}
	}
}

func (l *soakLedger) inFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight
}

// soakLoad runs the load: Concurrency workers each sending one request
// after another until the duration has passed (requests in flight then
// finish).
func soakLoad(ctx context.Context, cfg SoakConfig, g, stallConn *GRPC, maxContext int, led *soakLedger) {
	sg := &safeGen{g: NewGenerator(cfg.Workload), rng: rand.New(rand.NewPCG(cfg.Seed, 0x736f616b))}
	draw := func() (Request, string, int64) {
		sg.mu.Lock()
		defer sg.mu.Unlock()
		r := sg.g.Next()
		kind := soakNormal
		switch u := sg.rng.Float64(); {
		case u < cfg.CancelFraction:
			kind = soakCancel
			r.CancelAfter = sg.rng.IntN(max(r.MaxTokens, 1))
		case u < cfg.CancelFraction+cfg.StallFraction:
			kind = soakStall
		}
		return r, kind, sg.rng.Int64()
	}
	deadline := time.Now().Add(cfg.Duration)
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				r, kind, seed := draw()
				client := g
				gr := g.request(r)
				if kind == soakStall {
					client = stallConn
					gr.Stopping.MaxTokens = proto.Uint32(uint32(stallTokens(cfg.StallOutput, max(len(r.TokenIDs), r.InputTokens), maxContext)))
					gr.Stopping.IgnoreEos = proto.Bool(true)
					gr.Response = &pb.ResponseOptions{ReturnOutputLogprobs: proto.Bool(true),
						OutputCandidates: &pb.CandidateTokenSelection{Selection: &pb.CandidateTokenSelection_All{All: &pb.AllCandidates{}}}}
				}
				rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
				led.start()
				led.record(soakCall(rctx, client.inf, gr, kind, r.CancelAfter, cfg.StallFor, rand.New(rand.NewPCG(uint64(seed), 1))))
				cancel()
			}
		}()
	}
	wg.Wait()
}

// stallTokens is the output of a stalled request: want, less when the
// prompt and output would not fit the context (maxContext 0: unknown).
func stallTokens(want, prompt, maxContext int) int {
	if maxContext > 0 && prompt+want > maxContext {
		return max(1, maxContext-prompt-1)
	}
	return want
}

// dialStalled opens the connection of the stalled readers: a fixed 64 KiB
// stream window (no dynamic window growth), so that a reader that stops
// reading blocks the server's sends after a known amount of output.
func dialStalled(addr, model string) (*GRPC, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(1<<20))
	if err != nil {
		return nil, fmt.Errorf("bench: dial %s: %w", addr, err)
	}
	return &GRPC{Model: model, conn: conn, inf: pb.NewInferenceClient(conn), ctl: pb.NewControlClient(conn),
		ses: pb.NewOpenEngineSessionsClient(conn), str: pb.NewOpenEngineStreamingClient(conn)}, nil
}
