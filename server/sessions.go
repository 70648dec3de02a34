package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"oengine/engine"
	pb "oengine/proto/openengine/v1"
	"oengine/sessions"
	"oengine/streaming"
)

// ExtensionConfig configures the sessions and streaming-input extension
// (OpenEngineSessions, OpenEngineStreaming, Generate continuations).
type ExtensionConfig struct {
	// Sessions configures the session manager; InstanceID and Models are
	// filled by the server.
	Sessions sessions.Config
	// MaxSessionsPerKey caps the live sessions of one principal when API
	// keys are configured (--max-sessions-per-key); 0: a quarter of the
	// session manager's MaxSessions (at least 1); negative: no cap.
	MaxSessionsPerKey int
	// Streaming bounds GenerateStream input. Streamed text is assembled
	// with the model's Tokenizer; a model without one takes token-id
	// chunks only.
	Streaming streaming.Limits
}

// ext is the extension's state of one server.
type ext struct {
	s      *Server
	mgr    *sessions.Manager
	lim    streaming.Limits
	perKey int // live sessions per principal (0: no cap)

	mu      sync.Mutex     // protects opening
	opening map[string]int // principal -> opens in flight
}

// extension returns the sessions/streaming state set by EnableSessions,
// or nil.
func (s *Server) extension() *ext { return s.ext.Load() }

// EnableSessions starts the session manager over the server's engines and
// registers OpenEngineSessions and OpenEngineStreaming on the gRPC
// listener. Call it once, before Serve. The manager closes (pins released)
// when the server has shut down.
func (s *Server) EnableSessions(cfg ExtensionConfig) (*sessions.Manager, error) {
	if s.extension() != nil {
		return nil, errors.New("server: sessions already enabled")
	}
	sc := cfg.Sessions
	sc.InstanceID = s.instanceID
	sc.Models = func(name string) (sessions.Engine, bool) {
		m, ok := s.byName[name]
		if !ok || m.Engine == nil {
			return nil, false
		}
		return m.Engine, true
	}
	if sc.Logger == nil {
		sc.Logger = s.log
	}
	mgr, err := sessions.New(sc)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	x := &ext{s: s, mgr: mgr, lim: cfg.Streaming.WithDefaults(), perKey: cfg.MaxSessionsPerKey, opening: map[string]int{}}
	if x.perKey == 0 {
		total := sc.MaxSessions
		if total <= 0 {
			total = sessions.DefaultMaxSessions
		}
		x.perKey = max(1, total/4)
	}
	x.perKey = max(x.perKey, 0)
	s.ext.Store(x)
	s.RegisterService(&pb.OpenEngineSessions_ServiceDesc, &sessionsService{x: x})
	s.RegisterService(&pb.OpenEngineStreaming_ServiceDesc, &streamingService{x: x})
	go func() {
		<-s.shutdown
		mgr.Close()
		s.ext.Store(nil)
	}()
	return mgr, nil
}

// SessionsService is the OpenEngineSessions implementation registered on
// the gRPC listener (nil unless EnableSessions ran), for HTTP surfaces that
// map the same RPCs (server/openai): called with the context of a request
// that went through Authenticated, it applies the same rules, limits and
// error reasons as over gRPC.
func (s *Server) SessionsService() pb.OpenEngineSessionsServer {
	if x := s.extension(); x != nil {
		return &sessionsService{x: x}
	}
	return nil
}

// Sessions returns the session manager (nil unless EnableSessions ran).
func (s *Server) Sessions() *sessions.Manager {
	if x := s.extension(); x != nil {
		return x.mgr
	}
	return nil
}

// sessionReasons maps sessions codes to the error table (docs/design.md §1).
var sessionReasons = map[sessions.Code]struct {
	grpc   codes.Code
	engine pb.ErrorCode
}{
	sessions.CodeNotFound:      {codes.NotFound, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
	sessions.CodeExpired:       {codes.FailedPrecondition, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
	sessions.CodeClosed:        {codes.FailedPrecondition, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
	sessions.CodeOwnerMismatch: {codes.FailedPrecondition, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
	sessions.CodeBusy:          {codes.FailedPrecondition, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
	sessions.CodeDuplicate:     {codes.AlreadyExists, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
	sessions.CodeBudget:        {codes.ResourceExhausted, pb.ErrorCode_ERROR_CODE_OVERLOADED},
	sessions.CodeInvalid:       {codes.InvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT},
	sessions.CodeUnsupported:   {codes.Unimplemented, pb.ErrorCode_ERROR_CODE_UNSUPPORTED_FEATURE},
	sessions.CodeModelNotFound: {codes.NotFound, pb.ErrorCode_ERROR_CODE_MODEL_NOT_FOUND},
}

// extError classifies errors of the sessions and streaming packages, and
// anything else like fromEngine.
func extError(err error) *apiError {
	var se *sessions.Error
	if errors.As(err, &se) {
		r, ok := sessionReasons[se.Code]
		if !ok {
			return &apiError{grpc: codes.Internal, reason: reasonInternal, engine: pb.ErrorCode_ERROR_CODE_INTERNAL, msg: se.Error()}
		}
		return &apiError{grpc: r.grpc, reason: se.Code.String(), engine: r.engine, msg: se.Error(),
			retryable: r.grpc == codes.ResourceExhausted}
	}
	var fe *streaming.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case streaming.CodeIdle:
			return &apiError{grpc: codes.Canceled, reason: "CANCELLED", engine: pb.ErrorCode_ERROR_CODE_CANCELLED, msg: fe.Error()}
		case streaming.CodeUnsupported:
			return &apiError{grpc: codes.Unimplemented, reason: reasonUnsupportedFeature, engine: pb.ErrorCode_ERROR_CODE_UNSUPPORTED_FEATURE, msg: fe.Error()}
		}
		return &apiError{grpc: codes.InvalidArgument, reason: reasonInvalidArgument, engine: pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, msg: fe.Error()}
	}
	return fromEngine(err)
}

// toProtoRef and fromProtoRef convert session refs.
// fromProtoRef scopes the client's session id to its principal (auth.go).
func fromProtoRef(p Principal, r *pb.GenerationSessionRef) sessions.Ref {
	return sessions.Ref{SessionID: p.Scope(r.GetSessionId()), Owner: r.GetOwnerInstanceId()}
}

func toProtoRef(r sessions.Ref) *pb.GenerationSessionRef {
	return &pb.GenerationSessionRef{SessionId: r.SessionID, OwnerInstanceId: r.Owner}
}

func unixNanos(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

// toProtoSession describes a session of principal p with the client's id.
func toProtoSession(p Principal, in sessions.Info) *pb.GenerationSession {
	ref := in.Ref
	ref.SessionID = p.clientID(ref.SessionID)
	out := &pb.GenerationSession{
		Ref:                 toProtoRef(ref),
		Model:               in.Model,
		LoraName:            in.LoRA,
		State:               pb.GenerationSessionState(in.State),
		LeaseMs:             uint64(in.Lease / time.Millisecond),
		ExpiresAtUnixNanos:  unixNanos(in.ExpiresAt),
		CreatedAtUnixNanos:  unixNanos(in.CreatedAt),
		LastUsedAtUnixNanos: unixNanos(in.LastUsedAt),
		RetainedTokens:      clampU32(in.RetainedTokens),
		ResidentTokens:      clampU32(in.ResidentTokens),
		PinnedKvBlocks:      uint64(max(in.PinnedPages, 0)),
		Turns:               clampU32(in.Turns),
	}
	if in.Tokens != nil {
		out.TokenIds = make([]uint32, len(in.Tokens))
		for i, id := range in.Tokens {
			out.TokenIds[i] = uint32(id)
		}
		out.TurnOffsets = make([]uint32, len(in.TurnOffsets))
		for i, o := range in.TurnOffsets {
			out.TurnOffsets[i] = clampU32(o)
		}
	}
	return out
}

func leaseOf(ms *uint64) *time.Duration {
	if ms == nil {
		return nil
	}
	d := time.Duration(min(*ms, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
	return &d
}

// sessionsService implements openengine.v1.OpenEngineSessions.
type sessionsService struct {
	pb.UnimplementedOpenEngineSessionsServer
	x *ext
}

func (ss *sessionsService) OpenGenerationSession(ctx context.Context, req *pb.OpenGenerationSessionRequest) (*pb.GenerationSession, error) {
	s := ss.x.s
	if s.draining.Load() {
		return nil, draining().err()
	}
	if req.GetModel() == "" {
		return nil, invalidf("model is required").err()
	}
	m, ok := s.byName[req.GetModel()]
	if !ok {
		return nil, modelNotFound(req.GetModel()).err()
	}
	p := PrincipalFrom(ctx)
	sid, aerr := sessionID(req.GetSessionId(), p)
	if aerr != nil {
		return nil, aerr.err()
	}
	or := sessions.OpenRequest{ID: sid, Model: m.Name, LoRA: req.GetLoraName(), Lease: leaseOf(req.LeaseMs)}
	switch in := req.GetInitialInput().(type) {
	case *pb.OpenGenerationSessionRequest_Prompt:
		if s.cfg.MaxPromptBytes > 0 && len(in.Prompt) > s.cfg.MaxPromptBytes {
			return nil, newAPIError(codes.InvalidArgument, "PAYLOAD_TOO_LARGE", pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT,
				"prompt is %d bytes, the limit is %d", len(in.Prompt), s.cfg.MaxPromptBytes).err()
		}
		or.Prompt = in.Prompt
	case *pb.OpenGenerationSessionRequest_TokenIds:
		ids, aerr := tokenIDs("token_ids", in.TokenIds.GetIds(), m.Backend.Limits())
		if aerr != nil {
			return nil, aerr.err()
		}
		or.TokenIDs = ids
	}
	s.inflight.add()
	defer s.inflight.done()
	release, aerr := ss.x.reserve(p)
	if aerr != nil {
		s.metrics.rejected(aerr.reason)
		return nil, aerr.err()
	}
	defer release()
	in, err := ss.x.mgr.Open(ctx, or)
	if err != nil {
		return nil, extError(err).err()
	}
	return toProtoSession(PrincipalFrom(ctx), in), nil
}

func (ss *sessionsService) GetGenerationSession(ctx context.Context, req *pb.GetGenerationSessionRequest) (*pb.GenerationSession, error) {
	in, err := ss.x.mgr.Get(fromProtoRef(PrincipalFrom(ctx), req.GetRef()), req.GetIncludeTokens())
	if err != nil {
		return nil, extError(err).err()
	}
	return toProtoSession(PrincipalFrom(ctx), in), nil
}

func (ss *sessionsService) RenewGenerationSession(ctx context.Context, req *pb.RenewGenerationSessionRequest) (*pb.GenerationSession, error) {
	in, err := ss.x.mgr.Renew(fromProtoRef(PrincipalFrom(ctx), req.GetRef()), leaseOf(req.LeaseMs))
	if err != nil {
		return nil, extError(err).err()
	}
	return toProtoSession(PrincipalFrom(ctx), in), nil
}

func (ss *sessionsService) CloseGenerationSession(ctx context.Context, req *pb.CloseGenerationSessionRequest) (*pb.CloseGenerationSessionResponse, error) {
	st, in, err := ss.x.mgr.CloseSession(fromProtoRef(PrincipalFrom(ctx), req.GetRef()))
	if err != nil {
		return nil, extError(err).err()
	}
	return &pb.CloseGenerationSessionResponse{Status: pb.CloseStatus(st), Session: toProtoSession(PrincipalFrom(ctx), in)}, nil
}

// tokenIDs converts wire token ids, checking the vocabulary.
func tokenIDs(field string, ids []uint32, lim engine.Limits) ([]int32, *apiError) {
	out := make([]int32, len(ids))
	for i, id := range ids {
		if lim.Vocab > 0 && int64(id) >= int64(lim.Vocab) {
			return nil, invalidf("%s[%d] = %d is outside the vocabulary (%d)", field, i, id, lim.Vocab)
		}
		out[i] = int32(id)
	}
	return out, nil
}

// textTokenizer returns the streamed-text tokenizer of a model, or nil.
func (x *ext) textTokenizer(m *Model) streaming.TextTokenizer {
	if m.Tokenizer == nil {
		return nil
	}
	return m.Tokenizer
}

// reserve counts one session open of principal p against its quota
// (MaxSessionsPerKey): live sessions plus opens in flight. The anonymous
// principal (no keys) has only the manager's global cap.
func (x *ext) reserve(p Principal) (release func(), aerr *apiError) {
	if p.Name == "" || x.perKey <= 0 {
		return func() {}, nil
	}
	prefix := p.Name + scopeSep
	x.mu.Lock()
	defer x.mu.Unlock()
	live := 0
	for _, id := range x.mgr.List() {
		if strings.HasPrefix(id, prefix) {
			live++
		}
	}
	if live+x.opening[p.Name] >= x.perKey {
		return nil, newAPIError(codes.ResourceExhausted, "SESSION_BUDGET", pb.ErrorCode_ERROR_CODE_OVERLOADED,
			"key %q holds %d live sessions, the limit per key is %d", p.Name, live, x.perKey)
	}
	x.opening[p.Name]++
	return func() {
		x.mu.Lock()
		x.opening[p.Name]--
		if x.opening[p.Name] == 0 {
			delete(x.opening, p.Name)
		}
		x.mu.Unlock()
	}, nil
}
