package server

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Request metadata keys of the contract (lowercase ASCII).
const (
	mdRoutingKey   = "openengine-routing-key"
	mdTargetDPRank = "openengine-target-dp-rank"
	mdPriority     = "openengine-priority"
	mdTraceparent  = "traceparent"
	mdTracestate   = "tracestate"
	mdPrefix       = "openengine-"
)

// callMeta is the parsed request metadata of one call.
type callMeta struct {
	RoutingKey  string
	DPRank      uint32
	HasDPRank   bool
	Priority    int32
	Traceparent string
	Tracestate  string
	Principal   Principal // who called (auth.go)
}

type callMetaKey struct{}

// metaFrom returns the call's parsed metadata (zero when none).
func metaFrom(ctx context.Context) callMeta {
	m, _ := ctx.Value(callMetaKey{}).(callMeta)
	return m
}

// parseMeta validates the openengine- keys: each at most once, numbers in
// base 10 within their type, a routing key non-empty. Unknown openengine-
// keys are ignored (a later revision may add some).
func parseMeta(md metadata.MD) (callMeta, error) {
	var m callMeta
	for key, vals := range md {
		if strings.HasPrefix(key, mdPrefix) && len(vals) > 1 {
			return m, invalidf("metadata %s given %d times", key, len(vals))
		}
	}
	if v, ok := single(md, mdRoutingKey); ok {
		if v == "" {
			return m, invalidf("metadata %s is empty", mdRoutingKey)
		}
		m.RoutingKey = v
	}
	if v, ok := single(md, mdTargetDPRank); ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || !isDecimal(v) {
			return m, invalidf("metadata %s=%q is not a base-10 uint32", mdTargetDPRank, v)
		}
		m.DPRank, m.HasDPRank = uint32(n), true
	}
	if v, ok := single(md, mdPriority); ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || !isDecimal(strings.TrimPrefix(v, "-")) {
			return m, invalidf("metadata %s=%q is not a base-10 int32", mdPriority, v)
		}
		m.Priority = int32(n)
	}
	m.Traceparent, _ = single(md, mdTraceparent)
	m.Tracestate, _ = single(md, mdTracestate)
	return m, nil
}

func single(md metadata.MD, key string) (string, bool) {
	vs := md.Get(key)
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

// isDecimal rejects forms strconv accepts but the contract does not
// ("+1", "0x1", "1_000").
func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isContractMethod reports whether a full method name belongs to package
// openengine.v1 (health and reflection calls are left alone).
func isContractMethod(full string) bool {
	return strings.HasPrefix(full, "/openengine.v1.")
}

func (s *Server) unaryMeta(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if !isContractMethod(info.FullMethod) {
		return h(ctx, req)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	m, err := parseMeta(md)
	if err != nil {
		s.metrics.rejected(reasonOf(err))
		return nil, statusErr(err)
	}
	m.Principal = PrincipalFrom(ctx)
	return h(context.WithValue(ctx, callMetaKey{}, m), req)
}

func (s *Server) streamMeta(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if !isContractMethod(info.FullMethod) {
		return h(srv, ss)
	}
	md, _ := metadata.FromIncomingContext(ss.Context())
	m, err := parseMeta(md)
	if err != nil {
		s.metrics.rejected(reasonOf(err))
		return statusErr(err)
	}
	m.Principal = PrincipalFrom(ss.Context())
	return h(srv, &metaStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), callMetaKey{}, m)})
}

// metaStream carries the parsed metadata in its context.
type metaStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (m *metaStream) Context() context.Context { return m.ctx }

func reasonOf(err error) string {
	return fromEngine(err).reason
}
