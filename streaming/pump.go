package streaming

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// Input is the open engine request the pump feeds: *engine.Stream and
// *sessions.Turn implement it.
type Input interface {
	AppendInput(ids []int32) error
	CloseInput() error
	Prefilled() int // input tokens whose K/V is computed so far
	Cancel()
}

// FrameKind is the member of a GenerateStreamRequest's frame oneof.
type FrameKind int

const (
	FrameNone  FrameKind = iota // oneof unset: invalid
	FrameStart                  // a (second) start frame
	FrameChunk
	FrameEnd
)

// Frame is one decoded frame after the start frame.
type Frame struct {
	Kind     FrameKind
	Chunk    Chunk   // FrameChunk
	FinalSeq *uint64 // FrameEnd
}

// Source yields the client's frames; io.EOF means the client half-closed.
type Source interface {
	Recv() (Frame, error)
}

// Ack is an input acknowledgement (wire InputAck).
type Ack struct {
	ReceivedThrough uint64 // highest chunk seq accepted
	Prefilled       int    // new input tokens whose K/V is computed so far
}

// PumpConfig configures a Pump.
type PumpConfig struct {
	Limits    Limits
	Input     Input
	Assembler *Assembler
	// OnAck, when set, is called after every new chunk and at end of input
	// (before the input is closed: acks never follow output).
	OnAck func(Ack)
	// After returns a channel that fires after d (tests inject a fake);
	// nil: time.After.
	After func(d time.Duration) <-chan time.Time
}

// Pump feeds the frames that follow an accepted start frame into an open
// engine request: chunks are checked by a Framer, text is assembled into
// tokens and every token that is final is appended at once (early
// prefill); end_of_input flushes the held-back text and closes the input.
type Pump struct {
	cfg    PumpConfig
	framer *Framer
	total  int // new input tokens appended

	mu  sync.Mutex // protects err
	err error
}

// NewPump returns a pump whose framer has already accepted the start frame.
func NewPump(cfg PumpConfig) *Pump {
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.After == nil {
		cfg.After = time.After
	}
	f := NewFramer(cfg.Limits)
	_ = f.Start()
	return &Pump{cfg: cfg, framer: f}
}

// Err returns the error that stopped the pump (nil while running or after
// a clean end). When the engine stream ends with a cancellation and Err is
// set, the stream's terminal error is Err, not the cancellation.
func (p *Pump) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// AppendedTokens returns how many new input tokens were appended.
func (p *Pump) AppendedTokens() int { return p.total }

type recvResult struct {
	f   Frame
	err error
}

// Run reads frames until the client half-closes after end_of_input (nil),
// ctx ends (ctx.Err()), or an error: a protocol or limit violation
// (*Error CodeInvalid), the idle timeout (*Error CodeIdle), a transport
// error, or an error from the input (e.g. an engine or session error). On
// any error the input is cancelled first (the generation ends within one
// engine step) and Err reports the error. Run does not wait for a Recv in
// progress: its reader goroutine returns as soon as that Recv returns
// (a gRPC receive does when the handler returns).
func (p *Pump) Run(ctx context.Context, src Source) error {
	frames := make(chan recvResult)
	stop := make(chan struct{})
	go func() {
		for {
			f, err := src.Recv()
			select {
			case frames <- recvResult{f, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	err := p.loop(ctx, frames)
	close(stop)
	if err != nil {
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		p.cfg.Input.Cancel()
	}
	return err
}

func (p *Pump) loop(ctx context.Context, frames <-chan recvResult) error {
	for {
		var idle <-chan time.Time
		if !p.framer.Ended() {
			idle = p.cfg.After(p.cfg.Limits.IdleTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-idle:
			return &Error{Code: CodeIdle, Message: "no input frame within " + p.cfg.Limits.IdleTimeout.String()}
		case r := <-frames:
			if errors.Is(r.err, io.EOF) {
				return p.framer.HalfClose()
			}
			if r.err != nil {
				return r.err
			}
			if err := p.handle(r.f); err != nil {
				return err
			}
		}
	}
}

func (p *Pump) handle(f Frame) error {
	switch f.Kind {
	case FrameStart:
		return p.framer.Start()
	case FrameChunk:
		fresh, err := p.framer.Chunk(f.Chunk)
		if err != nil || !fresh {
			return err
		}
		var ids []int32
		if f.Chunk.Kind == ChunkText {
			ids = p.cfg.Assembler.Text(f.Chunk.Text)
		} else {
			ids = p.cfg.Assembler.Tokens(f.Chunk.Tokens)
		}
		if err := p.append(ids); err != nil {
			return err
		}
		p.ack()
		return nil
	case FrameEnd:
		if err := p.framer.End(f.FinalSeq); err != nil {
			return err
		}
		if err := p.append(p.cfg.Assembler.Flush()); err != nil {
			return err
		}
		// The last ack precedes CloseInput, so every ack precedes output.
		p.ack()
		return p.cfg.Input.CloseInput()
	}
	return protoErr("a frame with no member set")
}

func (p *Pump) append(ids []int32) error {
	if len(ids) == 0 {
		return nil
	}
	if max := p.cfg.Limits.MaxInputTokens; max > 0 && p.total+len(ids) > max {
		return protoErr("streamed input of %d tokens exceeds the limit of %d", p.total+len(ids), max)
	}
	if err := p.cfg.Input.AppendInput(ids); err != nil {
		return err
	}
	p.total += len(ids)
	return nil
}

func (p *Pump) ack() {
	if p.cfg.OnAck != nil {
		p.cfg.OnAck(Ack{ReceivedThrough: p.framer.Received(), Prefilled: p.cfg.Input.Prefilled()})
	}
}
