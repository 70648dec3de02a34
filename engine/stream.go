package engine

import (
	"context"
	"io"
	"sync"
)

// Stream is an accepted request's event queue. The step loop pushes
// without ever blocking; when the queue holds Config.EventQueue events or
// Config.EventQueueBytes bytes (logprob candidates make events large) the
// request's sequences are paused (not scheduled) until the consumer drains
// it to half of both, so memory stays bounded. Exactly one terminal event (EventDone or
// EventError) ends every stream; Next returns io.EOF after it.
type Stream struct {
	id  string
	e   *Engine
	req *request

	mu       sync.Mutex // protects the fields below
	q        []Event    // pending events, oldest first
	head     int        // index of the next event in q
	bytes    int        // eventBytes of the pending events
	terminal bool       // the terminal event was pushed
	taken    bool       // the terminal event was taken by Next
	full     bool       // the loop saw the queue full and paused the request
	ready    chan struct{}
}

func newStream(e *Engine, req *request) *Stream {
	return &Stream{id: req.id, e: e, req: req, ready: make(chan struct{}, 1)}
}

// ID returns the request id.
func (s *Stream) ID() string { return s.id }

// Next returns the next event, blocking until one is available or ctx is
// done (then ctx.Err(); the request keeps running until cancelled). After
// the terminal event it returns io.EOF.
func (s *Stream) Next(ctx context.Context) (Event, error) {
	for {
		s.mu.Lock()
		if s.head < len(s.q) {
			ev := s.q[s.head]
			s.q[s.head] = Event{}
			s.head++
			s.bytes -= eventBytes(ev)
			if s.head == len(s.q) {
				s.q, s.head = s.q[:0], 0
			}
			if ev.Terminal() {
				s.taken = true
			}
			wake := s.full && s.drainedLocked()
			if wake {
				s.full = false
			}
			s.mu.Unlock()
			if wake {
				s.e.wake()
			}
			return ev, nil
		}
		done := s.taken
		s.mu.Unlock()
		if done {
			return Event{}, io.EOF
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Cancel aborts the request (consumer gone); it ends within one step with
// a CodeCancelled terminal event. Safe to call at any time, also twice.
func (s *Stream) Cancel() {
	s.e.cancel(s.req, newError(CodeCancelled, "request %s cancelled", s.id))
}

// AppendInput adds input tokens to a request submitted with OpenInput; they
// are prefilled as they arrive.
func (s *Stream) AppendInput(tokens []int32) error {
	return s.e.input(s.req, tokens, false)
}

// Prefilled returns how many input tokens have their K/V computed so far
// (for streamed-input acknowledgements).
func (s *Stream) Prefilled() int { return int(s.req.prefilled.Load()) }

// CloseInput ends the input of an OpenInput request; output starts.
func (s *Stream) CloseInput() error { return s.e.input(s.req, nil, true) }

// push appends an event; it never blocks. It reports whether the queue is
// now at or over its bound (the caller pauses the request).
func (s *Stream) push(ev Event) (full bool) {
	s.mu.Lock()
	if s.terminal {
		s.mu.Unlock()
		return false
	}
	s.q = append(s.q, ev)
	s.bytes += eventBytes(ev)
	if ev.Terminal() {
		s.terminal = true
	}
	full = len(s.q)-s.head >= s.e.cfg.EventQueue || s.bytes >= s.e.cfg.EventQueueBytes
	if full {
		s.full = true
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
	return full
}

// backlog returns the number of queued events.
func (s *Stream) backlog() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.q) - s.head
}

// drained reports whether the consumer has taken enough for a paused
// request to resume: at most half the event and byte bounds are queued.
func (s *Stream) drained() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drainedLocked()
}

func (s *Stream) drainedLocked() bool {
	return len(s.q)-s.head <= s.e.cfg.EventQueue/2 && s.bytes <= s.e.cfg.EventQueueBytes/2
}

// eventBytes estimates the memory (and wire size) of an event: a fixed
// part, its text, and 24 bytes per token and per logprob entry.
func eventBytes(ev Event) int {
	n := 64 + len(ev.Text)
	for _, t := range ev.Tokens {
		n += 24
		if t.Logprobs != nil {
			n += 24 * len(t.Logprobs.Candidates)
		}
	}
	if ev.Prompt != nil {
		n += 4 * len(ev.Prompt.Tokens)
		for _, lp := range ev.Prompt.Logprobs {
			n += 24 * (1 + len(lp.Candidates))
		}
	}
	return n
}
