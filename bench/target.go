package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

// Target sends one request to a server and measures it. Implementations
// must be safe for concurrent use.
type Target interface {
	// Name labels reports and chart lines ("grpc", "openai", "sse"...).
	Name() string
	// Generate sends req and returns what it measured; it never panics on
	// a server's answer and returns when ctx ends.
	Generate(ctx context.Context, req Request) Result
	Close() error
}

// meter measures one request from the moment it is sent: time to the
// first output token, gaps between tokens, end-to-end time. It also cancels
// the request on purpose after a set number of tokens (cancellation
// storms).
type meter struct {
	mu          sync.Mutex // protects start and last (restart and tokens may run on two goroutines)
	start, last time.Time
	res         Result
	cancelAt    int // cancel after this many output tokens; < 0: never
	cancel      context.CancelFunc
	cancelled   atomic.Bool // set by fire, possibly from a timer goroutine
	timer       *time.Timer
}

// startMeter starts measuring now. When req.Cancel is set the returned
// context is cancelled after that many output tokens (0: after a short
// random delay, usually before the first token).
func startMeter(ctx context.Context, req Request) (context.Context, *meter) {
	m := &meter{start: time.Now(), cancelAt: -1}
	if req.Cancel {
		m.cancelAt = max(req.CancelAfter, 0)
	}
	m.res.Start = m.start
	m.res.AskedInput, m.res.History, m.res.InputTolerance = req.InputTokens, req.History, req.InputTolerance
	m.res.AskedOutput, m.res.ExactOutput = req.MaxTokens, req.IgnoreEOS && req.GuidedJSONSchema == ""
	m.res.Guided = req.GuidedJSONSchema != ""
	m.last = m.start
	ctx, m.cancel = context.WithCancel(ctx)
	if m.cancelAt == 0 {
		d := time.Duration(rand.Int64N(int64(20 * time.Millisecond)))
		m.timer = time.AfterFunc(d, m.fire)
	}
	return ctx, m
}

func (m *meter) fire() {
	m.cancelled.Store(true)
	m.cancel()
}

// restart moves the reference point of TTFT and E2E to now (streamed
// input: TTFT counts from the end of input).
func (m *meter) restart() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start = time.Now()
	m.last = m.start
}

// tokens records n output tokens arriving now. An event carrying several
// tokens counts as n gaps of equal size.
func (m *meter) tokens(n int) {
	if n <= 0 {
		return
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.res.OutputTokens == 0 {
		m.res.TTFT = now.Sub(m.start)
	} else {
		gap := now.Sub(m.last) / time.Duration(n)
		for range n {
			m.res.ITLs = append(m.res.ITLs, gap)
		}
	}
	m.last = now
	m.res.OutputTokens += n
	if m.cancelAt > 0 && m.res.OutputTokens >= m.cancelAt && !m.cancelled.Load() {
		m.fire()
	}
}

// usage records the server's counts from a request's final usage; they
// replace the counts made from the stream.
func (m *meter) usage(prompt, completion, cached int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.res.PromptTokens, m.res.OutputTokens, m.res.CachedTokens = prompt, completion, cached
}

// fail records err (ignored when the request was cancelled on purpose).
func (m *meter) fail(err error) {
	if err == nil || m.res.Err != "" {
		return
	}
	m.res.Err = err.Error()
	m.res.ErrKind = ErrorKind(err)
}

// done finishes the measurement.
func (m *meter) done() Result {
	if m.timer != nil {
		m.timer.Stop()
	}
	m.cancel()
	m.mu.Lock()
	m.res.E2E = time.Since(m.start)
	m.mu.Unlock()
	if m.cancelled.Load() {
		m.res.Cancelled = true
		m.res.Err, m.res.ErrKind = "", ""
	}
	return m.res
}

// KindError is an error with a short kind for the report's error counts.
type KindError struct {
	Kind string
	Msg  string
}

func (e *KindError) Error() string { return e.Msg }

// ErrorKind names an error for the report: the ErrorInfo reason or gRPC
// code of a status, a KindError's kind, "timeout" or "cancelled" for
// context errors, else "transport".
func ErrorKind(err error) string {
	var ke *KindError
	if errors.As(err, &ke) {
		return ke.Kind
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	if errors.Is(err, context.Canceled) {
		return "cancelled"
	}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason != "" {
				return info.Reason
			}
		}
		return strings.ToUpper(strings.ReplaceAll(st.Code().String(), " ", "_"))
	}
	return "transport"
}
