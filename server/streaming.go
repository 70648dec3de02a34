package server

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"

	"oengine/engine"
	pb "oengine/proto/openengine/v1"
	"oengine/sessions"
	"oengine/streaming"
)

// streamingService implements openengine.v1.OpenEngineStreaming.
type streamingService struct {
	pb.UnimplementedOpenEngineStreamingServer
	x *ext
}

// openInput is an accepted request with open input: *engine.Stream or
// *sessions.Turn.
type openInput interface {
	Stream
	streaming.Input
}

// GenerateStream serves one logical generation whose input arrives in
// chunks. Before acceptance (the start frame) a failure is a non-OK
// status; after it every failure, protocol violations included, is one
// terminal EngineError and the RPC ends OK.
func (ss *streamingService) GenerateStream(stream grpc.BidiStreamingServer[pb.GenerateStreamRequest, pb.GenerateResponse]) error {
	x := ss.x
	s := x.s
	ctx := stream.Context()
	start := time.Now()
	if s.draining.Load() {
		s.metrics.rejected(reasonDraining)
		return draining().err()
	}
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return invalidf("the stream ended before its start frame").err()
	}
	if err != nil {
		return err
	}
	sf := first.GetStart()
	switch {
	case first.GetChunk() != nil:
		return invalidf("chunk %d before the start frame", first.GetChunk().GetSeq()).err()
	case first.GetEndOfInput() != nil:
		return invalidf("end_of_input before the start frame").err()
	case sf == nil:
		return invalidf("the first frame must be start").err()
	case sf.GetEarlyOutput():
		return unsupportedf("early output is not supported: output begins after end_of_input").err()
	case sf.GetRequest() == nil:
		return invalidf("start.request is required").err()
	}
	req := sf.GetRequest()
	meta := metaFrom(ctx)

	var (
		m    *Model
		er   engine.Request
		opt  genOptions
		c    sessions.Continuation
		aerr *apiError
	)
	withSession := req.GetSession() != nil
	if withSession {
		m, er, opt, c, aerr = x.buildContinuation(req, meta)
	} else {
		m, er, opt, aerr = s.buildPlain(req, meta, true)
	}
	if aerr != nil {
		s.metrics.rejected(aerr.reason)
		return aerr.err()
	}
	text := x.textTokenizer(m)
	startPrompt, startIDs := er.Prompt, er.TokenIDs
	if startPrompt != "" && text == nil {
		return unsupportedf("streamed text input is not supported for model %q", m.Name).err()
	}
	er.Prompt, er.TokenIDs, er.OpenInput = "", []int32{}, true

	s.inflight.add()
	defer s.inflight.done()
	var (
		in   openInput
		base int
		turn *sessions.Turn
	)
	if withSession {
		turn, err = x.mgr.Begin(ctx, c, er)
		if err != nil {
			ae := extError(err)
			s.metrics.rejected(ae.reason)
			return ae.err()
		}
		defer turn.Close()
		in, base = turn, turn.BaseLen()
	} else {
		if m.Engine == nil {
			return unsupportedf("streamed input is not supported for model %q", m.Name).err()
		}
		est, err := m.Engine.Submit(ctx, er)
		if err != nil {
			ae := fromEngine(err)
			s.metrics.rejected(ae.reason)
			return ae.err()
		}
		defer est.Cancel()
		in = est
	}
	// Accepted: from here on, failures are one terminal EngineError.
	id := meta.Principal.clientID(in.ID())
	var sendMu sync.Mutex // protects stream.Send (acks and outputs)
	send := func(r *pb.GenerateResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(r)
	}
	asm := streaming.NewAssembler(text, startPrompt != "" && base == 0)
	var initErr error
	var initial []int32
	if startPrompt != "" {
		initial = asm.Text(startPrompt)
	} else if len(startIDs) > 0 {
		initial = asm.Tokens(startIDs)
	}
	if len(initial) > 0 {
		if initErr = in.AppendInput(initial); initErr != nil {
			in.Cancel()
		}
	}
	pp := streaming.NewPump(streaming.PumpConfig{
		Limits: x.lim, Input: in, Assembler: asm,
		OnAck: func(a streaming.Ack) {
			_ = send(&pb.GenerateResponse{RequestId: id, Event: &pb.GenerateResponse_InputAck{
				InputAck: &pb.InputAck{ReceivedThroughSeq: a.ReceivedThrough, PrefilledTokens: uint64(max(a.Prefilled, 0))}}})
		},
	})
	pumpCtx, stopPump := context.WithCancel(ctx)
	defer stopPump()
	pumpDone := make(chan struct{})
	if initErr == nil {
		go func() {
			defer close(pumpDone)
			_ = pp.Run(pumpCtx, frameSource{stream: stream, text: text != nil})
		}()
	} else {
		close(pumpDone)
	}
	w := &inputStream{openInput: in, pumpErr: func() error {
		if initErr != nil {
			return initErr
		}
		return pp.Err()
	}}
	s.log.Debug("server: generate stream accepted", "request_id", id, "model", m.Name, "session", c.Ref.SessionID)
	p := &pump{
		s: s, m: m, st: w, opt: opt, send: send, id: id, start: start,
		finished: make([]bool, opt.n), lastToken: make([]time.Time, opt.n),
	}
	runErr := p.run(ctx)
	stopPump()
	<-pumpDone
	if turn != nil {
		turn.Close()
		if sf.GetCloseSessionOnCancel() && (ctx.Err() != nil || w.cancelled()) {
			if _, _, err := x.mgr.CloseSession(c.Ref); err != nil {
				s.log.Warn("server: close_session_on_cancel", "session", c.Ref.SessionID, "err", err)
			}
		}
	}
	return runErr
}

// inputStream relays an open-input request's events; when the request
// ends because the input side failed (a protocol violation, a limit, the
// idle timeout), the terminal error is that failure instead of the
// cancellation it caused. When that failure is not itself a cancellation
// (the idle timeout is), the GenerationFinished CANCELLED events the
// cancellation produced are dropped: the stream ends with exactly one
// terminal EngineError and nothing terminal before it (docs/design.md §1).
type inputStream struct {
	openInput
	pumpErr  func() error
	terminal *engine.Event
}

func (w *inputStream) Next(ctx context.Context) (engine.Event, error) {
	for {
		ev, err := w.openInput.Next(ctx)
		if err != nil {
			return ev, err
		}
		switch ev.Kind {
		case engine.EventFinished:
			// The pump records its error before it cancels the request,
			// so a cancellation it caused always sees it here.
			if ev.Finish != nil && ev.Finish.Reason == engine.FinishCancelled {
				if ee := asEngineError(w.pumpErr()); ee != nil && ee.Code != engine.CodeCancelled {
					continue
				}
			}
		case engine.EventError:
			if ee := asEngineError(w.pumpErr()); ee != nil {
				ev.Err = ee
			}
		}
		if ev.Terminal() {
			w.terminal = &ev
		}
		return ev, nil
	}
}

// cancelled reports whether the request ended cancelled (client cancel,
// deadline, Abort, idle timeout).
func (w *inputStream) cancelled() bool {
	return w.terminal != nil && w.terminal.Kind == engine.EventError && w.terminal.Err != nil &&
		w.terminal.Err.Code == engine.CodeCancelled
}

// asEngineError converts an input-side failure into the engine error the
// stream ends with; nil for none, or for transport errors (the engine's own
// cancellation stands).
func asEngineError(err error) *engine.Error {
	if err == nil {
		return nil
	}
	var ee *engine.Error
	if errors.As(err, &ee) {
		return ee
	}
	var fe *streaming.Error
	if errors.As(err, &fe) {
		code := engine.CodeInvalidArgument
		switch fe.Code {
		case streaming.CodeIdle:
			code = engine.CodeCancelled
		case streaming.CodeUnsupported:
			code = engine.CodeUnsupportedFeature
		}
		return &engine.Error{Code: code, Message: fe.Error(), Err: err}
	}
	var se *sessions.Error
	if errors.As(err, &se) {
		code := engine.CodeInvalidArgument
		if se.Code == sessions.CodeBudget {
			code = engine.CodeOverloaded
		}
		return &engine.Error{Code: code, Message: se.Error(), Err: err}
	}
	return nil
}

// frameSource adapts the gRPC stream to streaming.Source.
type frameSource struct {
	stream grpc.BidiStreamingServer[pb.GenerateStreamRequest, pb.GenerateResponse]
	text   bool // text chunks can be tokenized
}

func (f frameSource) Recv() (streaming.Frame, error) {
	r, err := f.stream.Recv()
	if err != nil {
		return streaming.Frame{}, err
	}
	switch fr := r.GetFrame().(type) {
	case *pb.GenerateStreamRequest_Start:
		return streaming.Frame{Kind: streaming.FrameStart}, nil
	case *pb.GenerateStreamRequest_EndOfInput:
		return streaming.Frame{Kind: streaming.FrameEnd, FinalSeq: fr.EndOfInput.FinalSeq}, nil
	case *pb.GenerateStreamRequest_Chunk:
		c := streaming.Chunk{Seq: fr.Chunk.GetSeq()}
		switch d := fr.Chunk.GetData().(type) {
		case *pb.InputChunk_Text:
			if !f.text {
				return streaming.Frame{}, &streaming.Error{Code: streaming.CodeUnsupported, Message: "text chunks are not supported for this model"}
			}
			c.Kind, c.Text = streaming.ChunkText, d.Text
		case *pb.InputChunk_TokenIds:
			c.Kind = streaming.ChunkTokens
			c.Tokens = make([]int32, len(d.TokenIds.GetIds()))
			for i, id := range d.TokenIds.GetIds() {
				c.Tokens[i] = int32(min(id, 1<<31-1))
			}
		}
		return streaming.Frame{Kind: streaming.FrameChunk, Chunk: c}, nil
	}
	return streaming.Frame{}, nil
}
