package server

import (
	"time"

	pb "oengine/proto/openengine/v1"
)

// sessionCaps is ModelInfo.sessions for m: every figure is what the
// session manager enforces for that model.
func (s *Server) sessionCaps(m *Model) *pb.SessionCapabilities {
	x := s.extension()
	if x == nil {
		return &pb.SessionCapabilities{Supported: ptr(false)}
	}
	c, ok := x.mgr.Capabilities(m.Name)
	if !ok {
		return &pb.SessionCapabilities{Supported: ptr(false)}
	}
	out := &pb.SessionCapabilities{
		Supported:             ptr(true),
		DefaultLeaseMs:        ptr(uint64(c.DefaultLease / time.Millisecond)),
		MaxLeaseMs:            ptr(uint64(c.MaxLease / time.Millisecond)),
		MaxSessions:           ptr(clampU32(c.MaxSessions)),
		MaxRetainedTokens:     ptr(clampU32(c.MaxRetainedTokens)),
		MaxPinnedKvBlocks:     ptr(uint64(max(c.MaxPinnedPages, 0))),
		OwnerAffinityRequired: ptr(c.OwnerAffinityRequired),
		MigrationSupported:    ptr(c.MigrationSupported),
	}
	for _, md := range c.Modes {
		out.Modes = append(out.Modes, pb.ContinuationMode(md))
	}
	return out
}

// streamingCaps is ModelInfo.streaming_input for m.
func (s *Server) streamingCaps(m *Model) *pb.StreamingInputCapabilities {
	x := s.extension()
	if x == nil {
		return &pb.StreamingInputCapabilities{Supported: ptr(false)}
	}
	if m.Engine == nil {
		return &pb.StreamingInputCapabilities{Supported: ptr(false)}
	}
	modalities := []string{"token_ids"}
	if x.textTokenizer(m) != nil {
		modalities = []string{"text", "token_ids"}
	}
	return &pb.StreamingInputCapabilities{
		Supported:          ptr(true),
		Modalities:         modalities,
		EarlyPrefill:       ptr(true),
		EarlyOutput:        ptr(false),
		MaxChunkTokens:     ptr(clampU32(x.lim.MaxChunkTokens)),
		MaxChunkBytes:      ptr(clampU32(x.lim.MaxChunkBytes)),
		MaxChunks:          ptr(clampU32(x.lim.MaxChunks)),
		InputIdleTimeoutMs: ptr(uint64(x.lim.IdleTimeout / time.Millisecond)),
	}
}

// liveSessions is the number of live generation sessions (GetLoad).
func (s *Server) liveSessions() int {
	if x := s.extension(); x != nil {
		return len(x.mgr.List())
	}
	return 0
}
