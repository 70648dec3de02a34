package sse

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/valyala/bytebufferpool"

	"oengine/engine"
	"oengine/model/chat"
	"oengine/server"
)

// Event payloads (docs/design.md §5).
type (
	sseStarted struct {
		RequestID string `json:"request_id"`
		Model     string `json:"model"`
	}
	sseThinking struct{}
	sseDelta    struct {
		Text string `json:"text"`
	}
	sseDone struct {
		InputTokens  int    `json:"input_tokens"`
		OutputTokens int    `json:"output_tokens"`
		FinishReason string `json:"finish_reason"` // stop | length | cancelled
	}
	sseErrorEvent struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Retryable bool   `json:"retryable"`
	}
)

// sseStream writes one accepted generation as an event stream. The engine
// stream is its bounded queue: while a write blocks (a slow reader) the
// handler does not take events, the queue fills and the engine pauses the
// sequence; a write blocked beyond WriteTimeout cancels the generation.
type sseStream struct {
	rt    *sseRoute
	w     http.ResponseWriter
	rc    *http.ResponseController
	sel   *selection
	start time.Time

	id        int       // last event id
	lastWrite time.Time // for keep-alives
	written   int       // bytes
	filter    *chat.ReasoningFilter
	finish    string // finish reason of output 0
	delta     bool   // a delta was written
}

// stream runs the accepted generation to its end and records the outcome.
func (rt *sseRoute) stream(w http.ResponseWriter, r *http.Request, sel *selection, start time.Time) {
	defer sel.st.Cancel() // no-op after the terminal event
	ss := &sseStream{
		rt: rt, w: w, rc: http.NewResponseController(w), sel: sel, start: start,
		filter: chat.NewReasoningFilter(sel.prompt.InReasoning), finish: "stop",
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // reverse proxies: do not buffer
	w.WriteHeader(http.StatusOK)
	outcome := ss.run(r.Context())
	sel.st.Cancel() // a gone or stalled client: free the sequence now
	if outcome == "done" || outcome == "error" {
		// The connection may serve another request: drop our deadline.
		_ = ss.rc.SetWriteDeadline(time.Time{})
	}
	rt.metrics.outcome(outcome)
	rt.metrics.streamed(sel.m.Name, ss.written)
	rt.log.Debug("server: SSE generation ended", "request_id", sel.st.ID(), "model", sel.m.Name,
		"outcome", outcome, "events", ss.id, "bytes", ss.written, "elapsed", time.Since(start))
}

// run relays engine events until the terminal one and returns the outcome.
func (ss *sseStream) run(ctx context.Context) string {
	st := ss.sel.st
	if err := ss.event("started", sseStarted{RequestID: st.ID(), Model: ss.sel.m.Name}); err != nil {
		return ss.writeFailed(err)
	}
	for {
		ev, outcome, err := ss.next(ctx)
		if outcome != "" {
			return outcome
		}
		if err != nil {
			return ss.writeFailed(err)
		}
		outcome, err = ss.handle(ev)
		if err != nil {
			return ss.writeFailed(err)
		}
		if outcome != "" {
			return outcome
		}
	}
}

// next waits for the next engine event, writing a keep-alive comment each
// KeepAlive without output. A non-empty outcome ends the stream.
func (ss *sseStream) next(ctx context.Context) (engine.Event, string, error) {
	for {
		wait := time.Until(ss.lastWrite.Add(ss.rt.cfg.KeepAlive))
		if wait <= 0 {
			if err := ss.write([]byte(": keep-alive\n\n")); err != nil {
				return engine.Event{}, "", err
			}
			continue
		}
		nctx, cancel := context.WithTimeout(ctx, wait)
		ev, err := ss.sel.st.Next(nctx)
		cancel()
		switch {
		case err == nil:
			return ev, "", nil
		case ctx.Err() != nil:
			return engine.Event{}, "disconnected", nil // the deferred Cancel frees the sequence
		case errors.Is(err, context.DeadlineExceeded):
			continue
		case errors.Is(err, io.EOF):
			return engine.Event{}, "error", ss.errorEvent(&sseErrorEvent{Code: "internal",
				Message: "server: engine stream ended without a terminal event"})
		}
		return engine.Event{}, "error", ss.errorEvent(&sseErrorEvent{Code: "internal", Message: "server: " + err.Error()})
	}
}

// handle writes what one engine event means to the client; a non-empty
// outcome means the terminal event was written.
func (ss *sseStream) handle(ev engine.Event) (string, error) {
	switch ev.Kind {
	case engine.EventTokens:
		if ev.Output != 0 || ev.Text == "" {
			return "", nil
		}
		visible, opened := ss.filter.Push(ev.Text)
		for range opened {
			if err := ss.event("thinking", sseThinking{}); err != nil {
				return "", err
			}
		}
		return "", ss.deltaEvent(visible)
	case engine.EventFinished:
		if ev.Output == 0 && ev.Finish != nil {
			switch ev.Finish.Reason {
			case engine.FinishLength:
				ss.finish = "length"
			case engine.FinishCancelled:
				ss.finish = "cancelled"
			case engine.FinishStop:
				ss.finish = "stop"
			}
		}
	case engine.EventDone:
		return "done", ss.doneEvent(ev.Usage, ss.finish)
	case engine.EventError:
		ae := server.Classify(ev.Err)
		if ev.Err == nil {
			ae = server.Classify(errors.New("engine: error event without an error"))
		}
		if ae.Reason == "CANCELLED" {
			// Cancelled by the server (drain, consumer timeout): a normal end.
			return "done", ss.doneEvent(ev.Usage, "cancelled")
		}
		se := sseFrom(ae)
		return "error", ss.errorEvent(&sseErrorEvent{Code: se.code, Message: se.msg, Retryable: se.retryable})
	}
	return "", nil
}

func (ss *sseStream) deltaEvent(text string) error {
	if text == "" {
		return nil
	}
	if !ss.delta {
		ss.delta = true
		ss.rt.metrics.firstDelta(ss.sel.m.Name, time.Since(ss.start))
	}
	return ss.event("delta", sseDelta{Text: text})
}

func (ss *sseStream) doneEvent(u *engine.Usage, finish string) error {
	if err := ss.deltaEvent(ss.filter.Flush()); err != nil {
		return err
	}
	d := sseDone{FinishReason: finish}
	if u != nil {
		d.InputTokens, d.OutputTokens = u.PromptTokens, u.CompletionTokens
	}
	return ss.event("done", d)
}

func (ss *sseStream) errorEvent(e *sseErrorEvent) error { return ss.event("error", e) }

// event encodes and writes one event: "id: N", "event: NAME", "data: JSON"
// and a blank line, then flushes.
func (ss *sseStream) event(name string, payload any) error {
	buf := bytebufferpool.Get()
	defer bytebufferpool.Put(buf)
	ss.id++
	buf.B = append(buf.B, "id: "...)
	buf.B = strconv.AppendInt(buf.B, int64(ss.id), 10)
	buf.B = append(buf.B, "\nevent: "...)
	buf.B = append(buf.B, name...)
	buf.B = append(buf.B, "\ndata: "...)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(payload); err != nil { // ends with '\n'
		return err
	}
	buf.B = append(buf.B, '\n')
	return ss.write(buf.B)
}

// write writes and flushes under a write deadline.
func (ss *sseStream) write(b []byte) error {
	_ = ss.rc.SetWriteDeadline(time.Now().Add(ss.rt.cfg.WriteTimeout)) // ErrNotSupported: no deadline
	n, err := ss.w.Write(b)
	ss.written += n
	if err == nil {
		err = ss.rc.Flush()
	}
	ss.lastWrite = time.Now()
	return err
}

// writeFailed classifies a failed write: the client left, or a stalled
// reader hit the write deadline (net/http then also cancels the request
// context, so the error decides). Either way the generation is cancelled.
func (ss *sseStream) writeFailed(err error) string {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		ss.rt.log.Info("server: SSE reader stalled beyond the write timeout; generation cancelled",
			"request_id", ss.sel.st.ID(), "timeout", ss.rt.cfg.WriteTimeout)
		return "write_timeout"
	}
	return "disconnected"
}
