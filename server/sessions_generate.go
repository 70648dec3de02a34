package server

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"oengine/engine"
	pb "oengine/proto/openengine/v1"
	"oengine/sessions"
)

// continueSession serves a Generate whose request carries a session
// continuation (GenerateRequest.session, field 1000). handled is false
// when the request has none (the caller serves it as a plain Generate).
// Without EnableSessions a continuation is UNIMPLEMENTED.
func (s *Server) continueSession(req *pb.GenerateRequest, stream grpc.ServerStreamingServer[pb.GenerateResponse]) (handled bool, err error) {
	if req.GetSession() == nil {
		return false, nil
	}
	x := s.extension()
	if x == nil {
		return true, unsupportedf("generation sessions are not enabled on this server").err()
	}
	ctx := stream.Context()
	start := time.Now()
	if s.draining.Load() {
		s.metrics.rejected(reasonDraining)
		return true, draining().err()
	}
	m, er, opt, c, aerr := x.buildContinuation(req, metaFrom(ctx))
	if aerr != nil {
		s.metrics.rejected(aerr.reason)
		return true, aerr.err()
	}
	s.inflight.add()
	defer s.inflight.done()
	turn, err := x.mgr.Begin(ctx, c, er)
	if err != nil {
		ae := extError(err)
		s.metrics.rejected(ae.reason)
		return true, ae.err()
	}
	defer turn.Close() // drains a turn whose client left, so it never stays busy
	s.log.Debug("server: session turn accepted", "request_id", turn.ID(), "session", c.Ref.SessionID, "mode", c.Mode)
	p := &pump{
		s: s, m: m, st: turn, opt: opt, send: stream.Send, id: metaFrom(ctx).Principal.clientID(turn.ID()), start: start,
		finished: make([]bool, opt.n), lastToken: make([]time.Time, opt.n),
	}
	return true, p.run(ctx)
}

// buildContinuation validates a request that continues a session. Its
// input may be empty (the turn then sees the retained tokens only).
func (x *ext) buildContinuation(req *pb.GenerateRequest, meta callMeta) (*Model, engine.Request, genOptions, sessions.Continuation, *apiError) {
	var c sessions.Continuation
	m, er, opt, aerr := x.s.buildPlain(req, meta, true)
	if aerr != nil {
		return nil, er, opt, c, aerr
	}
	sc := req.GetSession()
	if sc.GetRef() == nil {
		return nil, er, opt, c, invalidf("session.ref is required")
	}
	c = sessions.Continuation{
		Ref:   fromProtoRef(meta.Principal, sc.GetRef()),
		Mode:  sessions.Mode(sc.GetMode()),
		Model: m.Name,
		LoRA:  req.GetLoraName(),
	}
	if sc.FromToken != nil {
		n := int(sc.GetFromToken())
		c.FromToken = &n
	}
	return m, er, opt, c, nil
}

// buildPlain runs the server's request validation on a copy of req
// without its session part; an absent input is allowed when allowEmpty
// (the engine request then has no input of its own).
func (s *Server) buildPlain(req *pb.GenerateRequest, meta callMeta, allowEmpty bool) (*Model, engine.Request, genOptions, *apiError) {
	cp := proto.Clone(req).(*pb.GenerateRequest)
	cp.Session = nil
	empty := cp.GetInput() == nil
	if empty && allowEmpty {
		cp.Input = &pb.GenerateRequest_TokenIds{TokenIds: &pb.TokenIds{Ids: []uint32{0}}}
	}
	m, er, opt, aerr := s.buildRequest(cp, meta)
	if aerr != nil {
		return nil, er, opt, aerr
	}
	if empty && allowEmpty {
		er.TokenIDs, er.Prompt = nil, ""
	}
	return m, er, opt, nil
}
