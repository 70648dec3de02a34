package streaming

import (
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"oengine/model/tokenizer"
)

// fakeInput records what the pump appends.
type fakeInput struct {
	mu        sync.Mutex
	ids       []int32
	closed    bool
	cancelled bool
	failAfter int // AppendInput fails once this many tokens are in (0: never)
}

func (f *fakeInput) AppendInput(ids []int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("closed")
	}
	if f.failAfter > 0 && len(f.ids)+len(ids) > f.failAfter {
		return errors.New("engine: context length exceeded")
	}
	f.ids = append(f.ids, ids...)
	return nil
}
func (f *fakeInput) CloseInput() error { f.mu.Lock(); f.closed = true; f.mu.Unlock(); return nil }
func (f *fakeInput) Prefilled() int    { f.mu.Lock(); defer f.mu.Unlock(); return len(f.ids) }
func (f *fakeInput) Cancel()           { f.mu.Lock(); f.cancelled = true; f.mu.Unlock() }
func (f *fakeInput) state() ([]int32, bool, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ids), f.closed, f.cancelled
}

// chanSource delivers frames from a channel; closing it is a half-close.
type chanSource struct{ ch chan Frame }

func (s chanSource) Recv() (Frame, error) {
	f, ok := <-s.ch
	if !ok {
		return Frame{}, io.EOF
	}
	return f, nil
}

// spaceTok is a toy TextTokenizer: one token per byte, and a word is final
// once whitespace follows it.
type spaceTok struct{}

func (spaceTok) Encode(text string, o tokenizer.EncodeOptions) []int32 {
	var out []int32
	if o.AddSpecial {
		out = append(out, 1000)
	}
	for i := 0; i < len(text); i++ {
		out = append(out, int32(text[i]))
	}
	return out
}

func (spaceTok) StablePrefixOpts(text string, _ tokenizer.EncodeOptions) int {
	return max(0, strings.LastIndexByte(text, ' '))
}

type pumpRig struct {
	in    *fakeInput
	src   chanSource
	p     *Pump
	acks  chan Ack
	idle  chan time.Time
	done  chan error
	after int // idle timers armed
}

func newRig(t *testing.T, lim Limits, bos bool) *pumpRig {
	t.Helper()
	r := &pumpRig{in: &fakeInput{}, src: chanSource{ch: make(chan Frame)}, acks: make(chan Ack, 100),
		idle: make(chan time.Time), done: make(chan error, 1)}
	r.p = NewPump(PumpConfig{
		Limits: lim, Input: r.in, Assembler: NewAssembler(spaceTok{}, bos),
		OnAck: func(a Ack) { r.acks <- a },
		After: func(time.Duration) <-chan time.Time { return r.idle },
	})
	go func() { r.done <- r.p.Run(context.Background(), r.src) }()
	return r
}

func (r *pumpRig) send(f Frame) { r.src.ch <- f }

func (r *pumpRig) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("pump did not return")
	}
	return nil
}

func TestPumpEarlyPrefill(t *testing.T) {
	r := newRig(t, Limits{}, true)
	r.send(text(1, "hello wor"))
	if a := <-r.acks; a.ReceivedThrough != 1 || a.Prefilled != 6 {
		t.Fatalf("ack %+v: want seq 1 and BOS+hello prefilled", a)
	}
	if ids, closed, _ := r.in.state(); len(ids) != 6 || closed {
		t.Fatalf("after chunk 1: %v closed %v", ids, closed)
	}
	r.send(toks(2, 7, 8))
	<-r.acks
	r.send(toks(2, 7, 8)) // retransmit: ignored, no ack
	r.send(text(3, "ld again"))
	<-r.acks
	r.send(end(3))
	if a := <-r.acks; a.ReceivedThrough != 3 {
		t.Fatalf("end ack %+v", a)
	}
	close(r.src.ch)
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	ids, closed, cancelled := r.in.state()
	want := append(append(spaceTok{}.Encode("hello wor", tokenizer.EncodeOptions{AddSpecial: true}), 7, 8),
		spaceTok{}.Encode("ld again", tokenizer.EncodeOptions{})...)
	if !slices.Equal(ids, want) || !closed || cancelled {
		t.Fatalf("input %v closed %v cancelled %v\nwant %v", ids, closed, cancelled, want)
	}
}

func TestPumpErrors(t *testing.T) {
	cases := []struct {
		name   string
		lim    Limits
		frames []Frame
		half   bool // half-close after the frames
		idle   bool // fire the idle timer after the frames
		code   Code
	}{
		{"gap", Limits{}, []Frame{text(1, "a"), text(3, "b")}, false, false, CodeInvalid},
		{"different payload", Limits{}, []Frame{text(1, "a"), text(1, "b")}, false, false, CodeInvalid},
		{"second start", Limits{}, []Frame{{Kind: FrameStart}}, false, false, CodeInvalid},
		{"input after end", Limits{}, []Frame{text(1, "a "), end(), text(2, "b")}, false, false, CodeInvalid},
		{"wrong final_seq", Limits{}, []Frame{text(1, "a"), end(5)}, false, false, CodeInvalid},
		{"half-close without end", Limits{}, []Frame{text(1, "a")}, true, false, CodeInvalid},
		{"empty frame", Limits{}, []Frame{{}}, false, false, CodeInvalid},
		{"max input tokens", Limits{MaxInputTokens: 4}, []Frame{toks(1, 1, 2, 3), toks(2, 4, 5)}, false, false, CodeInvalid},
		{"idle timeout", Limits{}, []Frame{text(1, "a")}, false, true, CodeIdle},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.lim, false)
			for _, f := range c.frames {
				r.send(f)
			}
			switch {
			case c.half:
				close(r.src.ch)
			case c.idle:
				r.idle <- time.Now()
			}
			err := r.wait(t)
			if CodeOf(err) != c.code || !errors.Is(r.p.Err(), err) {
				t.Fatalf("err %v (Err %v), want code %v", err, r.p.Err(), c.code)
			}
			if _, _, cancelled := r.in.state(); !cancelled {
				t.Fatal("input not cancelled")
			}
		})
	}
}

func TestPumpInputError(t *testing.T) {
	r := newRig(t, Limits{}, false)
	r.in.failAfter = 2
	r.send(toks(1, 1, 2, 3))
	if err := r.wait(t); err == nil || CodeOf(err) != 0 {
		t.Fatalf("input error passed as %v", err)
	}
	if _, _, cancelled := r.in.state(); !cancelled {
		t.Fatal("input not cancelled")
	}
}

func TestPumpContextCancelAndGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	in := &fakeInput{}
	src := chanSource{ch: make(chan Frame)}
	p := NewPump(PumpConfig{Input: in, Assembler: NewAssembler(spaceTok{}, false)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx, src) }()
	src.ch <- text(1, "x")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("run after cancel: %v", err)
	}
	if _, _, c := in.state(); !c {
		t.Fatal("input not cancelled")
	}
	close(src.ch) // the transport ends: the reader goroutine returns
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, baseline %d", runtime.NumGoroutine(), base)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestIdleTimerRealClock(t *testing.T) {
	in := &fakeInput{}
	src := chanSource{ch: make(chan Frame)}
	p := NewPump(PumpConfig{Limits: Limits{IdleTimeout: 20 * time.Millisecond}, Input: in, Assembler: NewAssembler(spaceTok{}, false)})
	err := p.Run(context.Background(), src)
	if CodeOf(err) != CodeIdle {
		t.Fatalf("idle stream: %v", err)
	}
	close(src.ch)
}
