package server

import (
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"oengine/engine"
	pb "oengine/proto/openengine/v1"
	"oengine/sampling"
)

// inferenceService implements openengine.v1.Inference.
type inferenceService struct {
	pb.UnimplementedInferenceServer
	s *Server
}

// Generate validates and submits one request, then relays its events.
// Before acceptance a failure is a non-OK status; after it, an application
// failure is one EngineError event and the RPC ends OK.
func (is *inferenceService) Generate(req *pb.GenerateRequest, stream grpc.ServerStreamingServer[pb.GenerateResponse]) error {
	s := is.s
	if handled, err := s.continueSession(req, stream); handled {
		return err // a session turn (sessions_generate.go)
	}
	ctx := stream.Context()
	start := time.Now()
	if s.draining.Load() {
		s.metrics.rejected(reasonDraining)
		return draining().err()
	}
	meta := metaFrom(ctx)
	m, er, opt, aerr := s.buildRequest(req, meta)
	if aerr != nil {
		s.metrics.rejected(aerr.reason)
		return aerr.err()
	}
	s.inflight.add()
	defer s.inflight.done()
	st, err := m.Backend.Submit(ctx, er)
	if err != nil {
		ae := fromEngine(err)
		s.metrics.rejected(ae.reason)
		return ae.err()
	}
	defer st.Cancel() // no-op after the terminal event
	s.log.Debug("server: generate accepted", "request_id", st.ID(), "model", m.Name,
		"priority", meta.Priority, "routing_key", meta.RoutingKey,
		"traceparent", meta.Traceparent, "tracestate", meta.Tracestate)
	p := &pump{
		s: s, m: m, st: st, opt: opt, send: stream.Send, id: meta.Principal.clientID(st.ID()), start: start,
		finished: make([]bool, opt.n), lastToken: make([]time.Time, opt.n),
	}
	return p.run(ctx)
}

// pump turns one engine stream into GenerateResponses. It holds back the
// latest GenerationFinished so that Usage rides on the final response.
type pump struct {
	s     *Server
	m     *Model
	st    Stream
	opt   genOptions
	send  func(*pb.GenerateResponse) error
	id    string
	start time.Time

	pending   *pb.GenerateResponse // a GenerationFinished not yet sent
	finished  []bool               // per output index
	anyTokens bool
	firstTok  bool
	lastToken []time.Time // per output: when its last tokens were sent
}

func (p *pump) run(ctx context.Context) error {
	for {
		ev, err := p.st.Next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return status.Error(codes.Internal, "server: engine stream ended without a terminal event")
			}
			// The client went away or its deadline passed: the deferred
			// Cancel stops the sequence; the transport reports the rest.
			p.s.metrics.failed(p.m.Name, "CANCELLED")
			return status.FromContextError(err).Err()
		}
		done, err := p.handle(ev)
		if err != nil || done {
			if err == nil {
				p.s.metrics.e2e.WithLabelValues(p.m.Name, RouteGRPC).Observe(time.Since(p.start).Seconds())
			}
			return err
		}
	}
}

// handle relays one event; done reports the end of the stream.
func (p *pump) handle(ev engine.Event) (done bool, err error) {
	switch ev.Kind {
	case engine.EventPrompt:
		if !p.opt.promptLogprobs || ev.Prompt == nil {
			return false, nil
		}
		for _, part := range p.promptOutputs(ev.Prompt) {
			if err := p.emit(&pb.GenerateResponse{RequestId: p.id, Event: &pb.GenerateResponse_Prompt{Prompt: part}}); err != nil {
				return false, err
			}
		}
		return false, nil
	case engine.EventTokens:
		if len(ev.Tokens) == 0 && ev.Text == "" {
			return false, nil
		}
		return false, p.tokens(ev)
	case engine.EventFinished:
		if ev.Finish == nil || ev.Finish.Reason == engine.FinishError || !p.validIndex(ev.Output) {
			return false, nil // an application failure follows as EventError
		}
		return false, p.finish(ev.Output, finishReason(ev.Finish.Reason), stopMatch(ev.Finish), "")
	case engine.EventDone:
		return true, p.end(ev.Usage)
	case engine.EventError:
		ae := fromEngine(ev.Err)
		if ev.Err == nil {
			ae = fromEngine(errors.New("engine: error event without an error"))
		}
		if ae.engine == pb.ErrorCode_ERROR_CODE_CANCELLED && p.anyTokens {
			// Outputs exist: cancellation is a FinishReason, not an error.
			for i, f := range p.finished {
				if !f {
					if err := p.finish(i, pb.FinishReason_FINISH_REASON_CANCELLED, nil, ae.msg); err != nil {
						return true, err
					}
				}
			}
			return true, p.end(ev.Usage)
		}
		if err := p.flush(); err != nil {
			return true, err
		}
		p.s.metrics.failed(p.m.Name, ae.reason)
		resp := &pb.GenerateResponse{RequestId: p.id, Event: &pb.GenerateResponse_Error{Error: ae.event()},
			Usage: usage(ev.Usage)}
		return true, p.send(resp)
	}
	return false, nil
}

func (p *pump) validIndex(i int) bool { return i >= 0 && i < len(p.finished) }

func (p *pump) tokens(ev engine.Event) error {
	out := &pb.TokenOutput{OutputIndex: ptr(uint32(max(ev.Output, 0))), Text: validUTF8(ev.Text)}
	for _, t := range ev.Tokens {
		out.Tokens = append(out.Tokens, p.tokenInfo(t.ID, t.Logprobs, p.opt.outputLogprobs))
	}
	now := time.Now()
	if !p.firstTok {
		p.firstTok = true
		p.s.metrics.ttft.WithLabelValues(p.m.Name, RouteGRPC).Observe(now.Sub(p.start).Seconds())
	} else if p.validIndex(ev.Output) && !p.lastToken[ev.Output].IsZero() {
		p.s.metrics.itl.WithLabelValues(p.m.Name, RouteGRPC).Observe(now.Sub(p.lastToken[ev.Output]).Seconds())
	}
	if p.validIndex(ev.Output) {
		p.lastToken[ev.Output] = now
	}
	p.anyTokens = true
	return p.emit(&pb.GenerateResponse{RequestId: p.id, Event: &pb.GenerateResponse_Token{Token: out}})
}

func (p *pump) finish(i int, reason pb.FinishReason, sm *pb.StopMatch, msg string) error {
	if p.finished[i] {
		return nil
	}
	p.finished[i] = true
	p.s.metrics.finished(p.m.Name, reason)
	return p.emit(&pb.GenerateResponse{RequestId: p.id, Event: &pb.GenerateResponse_Finished{
		Finished: &pb.GenerationFinished{OutputIndex: ptr(uint32(i)), Reason: reason, StopMatch: sm, Message: msg}}})
}

// emit sends the held GenerationFinished, then holds r if it is one, else
// sends it.
func (p *pump) emit(r *pb.GenerateResponse) error {
	if err := p.flush(); err != nil {
		return err
	}
	if _, ok := r.Event.(*pb.GenerateResponse_Finished); ok {
		p.pending = r
		return nil
	}
	return p.send(r)
}

func (p *pump) flush() error {
	if p.pending == nil {
		return nil
	}
	r := p.pending
	p.pending = nil
	return p.send(r)
}

// end sends the final response with the cumulative usage.
func (p *pump) end(u *engine.Usage) error {
	if p.pending == nil {
		return p.send(&pb.GenerateResponse{RequestId: p.id, Usage: usage(u)})
	}
	p.pending.Usage = usage(u)
	return p.flush()
}

// MaxPromptOutputBytes bounds one PromptOutput message: prompt logprobs
// larger than this arrive as several consecutive PromptOutput responses
// (positions in order, all before any token; docs/api.md), so no message
// exceeds a client's default 4 MiB receive limit.
const MaxPromptOutputBytes = 2 << 20

// promptOutputs describes the prompt positions from promptStart, split so
// that each part stays under MaxPromptOutputBytes.
func (p *pump) promptOutputs(pi *engine.PromptInfo) []*pb.PromptOutput {
	var parts []*pb.PromptOutput
	out, size := &pb.PromptOutput{}, 0
	for i := p.opt.promptStart; i < len(pi.Tokens); i++ {
		var lp *sampling.Logprobs
		if i > 0 && i < len(pi.Logprobs) {
			lp = &pi.Logprobs[i]
		}
		ti := p.tokenInfo(pi.Tokens[i], lp, i > 0)
		n := proto.Size(ti) + 4
		if size+n > MaxPromptOutputBytes && len(out.Tokens) > 0 {
			parts = append(parts, out)
			out, size = &pb.PromptOutput{}, 0
		}
		out.Tokens = append(out.Tokens, ti)
		size += n
	}
	return append(parts, out)
}

// tokenInfo describes one token; with logprobs, its logprob, rank and
// candidates (the first prompt token has none).
func (p *pump) tokenInfo(id int32, lp *sampling.Logprobs, withLogprobs bool) *pb.TokenInfo {
	ti := &pb.TokenInfo{TokenId: uint32(id), Token: p.m.TokenText(id)}
	if !withLogprobs || lp == nil {
		return ti
	}
	ti.Logprob = ptr(lp.Chosen.Logprob)
	if lp.Chosen.Rank > 0 {
		ti.Rank = ptr(uint32(lp.Chosen.Rank))
	}
	for _, c := range lp.Candidates {
		l := &pb.LogProb{TokenId: uint32(c.Token), Logprob: c.Logprob, Token: p.m.TokenText(c.Token)}
		if c.Rank > 0 {
			l.Rank = ptr(uint32(c.Rank))
		}
		ti.Candidates = append(ti.Candidates, l)
	}
	return ti
}

func finishReason(r engine.FinishReason) pb.FinishReason {
	switch r {
	case engine.FinishStop:
		return pb.FinishReason_FINISH_REASON_STOP
	case engine.FinishLength:
		return pb.FinishReason_FINISH_REASON_LENGTH
	case engine.FinishCancelled:
		return pb.FinishReason_FINISH_REASON_CANCELLED
	}
	return pb.FinishReason_FINISH_REASON_UNSPECIFIED
}

func stopMatch(f *engine.Finish) *pb.StopMatch {
	if f.Reason != engine.FinishStop {
		return nil
	}
	switch f.Kind {
	case engine.StopEOS:
		return &pb.StopMatch{Match: &pb.StopMatch_EosTokenId{EosTokenId: uint32(f.TokenID)}}
	case engine.StopTokenID:
		return &pb.StopMatch{Match: &pb.StopMatch_StopTokenId{StopTokenId: uint32(f.TokenID)}}
	case engine.StopString:
		return &pb.StopMatch{Match: &pb.StopMatch_StopText{StopText: validUTF8(f.Text)}}
	}
	return nil
}

func usage(u *engine.Usage) *pb.Usage {
	if u == nil {
		return nil
	}
	return &pb.Usage{
		PromptTokens:       clampU32(u.PromptTokens),
		CompletionTokens:   clampU32(u.CompletionTokens),
		TotalTokens:        clampU32(u.PromptTokens + u.CompletionTokens),
		CachedPromptTokens: ptr(clampU32(u.CachedPromptTokens)),
	}
}

func clampU32(n int) uint32 {
	switch {
	case n < 0:
		return 0
	case int64(n) > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(n)
}

func ptr[T any](v T) *T { return &v }

// validUTF8 makes text safe for a proto3 string field: model output may
// contain byte-fallback tokens that are not UTF-8 on their own (or a
// generation that ended inside a character); invalid bytes become U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
