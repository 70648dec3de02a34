package server

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "oengine/proto/openengine/v1"
	"oengine/sessions"
)

const sysPrompt = "You are a helpful assistant. Answer briefly and precisely."

func ms(d time.Duration) *uint64 { v := uint64(d / time.Millisecond); return &v }

// TestSessionsConformance: one named case per rule of issue 5 about
// sessions, over TCP against the real engine.
func TestSessionsConformance(t *testing.T) {
	h := startExt(t, func(c *ExtensionConfig) {
		c.Sessions.DefaultLease = time.Minute
		c.Sessions.MaxLease = 10 * time.Minute
	})
	ctx := ctxT(t)

	t.Run("lease absent gets the default", func(t *testing.T) {
		gs := h.open(ctx, "lease-absent", "")
		if gs.GetLeaseMs() != 60_000 || gs.GetExpiresAtUnixNanos() != uint64(h.clock.Now().Add(time.Minute).UnixNano()) {
			t.Fatalf("lease %d expires %d", gs.GetLeaseMs(), gs.GetExpiresAtUnixNanos())
		}
		if gs.GetState() != pb.GenerationSessionState_GENERATION_SESSION_STATE_IDLE || gs.GetRef().GetOwnerInstanceId() != h.owner {
			t.Fatalf("session %v", gs)
		}
	})
	t.Run("lease zero is invalid", func(t *testing.T) {
		_, err := h.sess.OpenGenerationSession(ctx, &pb.OpenGenerationSessionRequest{Model: extModel, LeaseMs: ms(0)})
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("lease above max is clamped", func(t *testing.T) {
		gs, err := h.sess.OpenGenerationSession(ctx, &pb.OpenGenerationSessionRequest{Model: extModel, LeaseMs: ms(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if gs.GetLeaseMs() != 600_000 || gs.GetExpiresAtUnixNanos() != uint64(h.clock.Now().Add(10*time.Minute).UnixNano()) {
			t.Fatalf("granted %d ms", gs.GetLeaseMs())
		}
	})
	t.Run("minted id", func(t *testing.T) {
		a, b := h.open(ctx, "", ""), h.open(ctx, "", "")
		if len(a.GetRef().GetSessionId()) < 32 || a.GetRef().GetSessionId() == b.GetRef().GetSessionId() {
			t.Fatalf("minted %q %q", a.GetRef().GetSessionId(), b.GetRef().GetSessionId())
		}
	})
	t.Run("duplicate session id", func(t *testing.T) {
		h.open(ctx, "dup", "")
		_, err := h.sess.OpenGenerationSession(ctx, &pb.OpenGenerationSessionRequest{SessionId: "dup", Model: extModel})
		wantStatus(t, err, codes.AlreadyExists, "DUPLICATE_SESSION")
	})
	t.Run("unknown model", func(t *testing.T) {
		_, err := h.sess.OpenGenerationSession(ctx, &pb.OpenGenerationSessionRequest{Model: "nope"})
		wantStatus(t, err, codes.NotFound, "MODEL_NOT_FOUND")
	})
	t.Run("owner mismatch", func(t *testing.T) {
		h.open(ctx, "owned", "")
		bad := &pb.GenerationSessionRef{SessionId: "owned", OwnerInstanceId: "someone-else"}
		_, err := h.sess.GetGenerationSession(ctx, &pb.GetGenerationSessionRequest{Ref: bad})
		wantStatus(t, err, codes.FailedPrecondition, "OWNER_MISMATCH")
		_, err = h.sess.CloseGenerationSession(ctx, &pb.CloseGenerationSessionRequest{Ref: bad})
		wantStatus(t, err, codes.FailedPrecondition, "OWNER_MISMATCH")
		if gs := h.get(ctx, "owned"); gs.GetState() != pb.GenerationSessionState_GENERATION_SESSION_STATE_IDLE {
			t.Fatalf("foreign close changed the session: %v", gs.GetState())
		}
	})
	t.Run("unknown session", func(t *testing.T) {
		_, err := h.sess.GetGenerationSession(ctx, &pb.GetGenerationSessionRequest{Ref: h.ref("nobody")})
		wantStatus(t, err, codes.NotFound, "SESSION_NOT_FOUND")
	})
	t.Run("renew", func(t *testing.T) {
		h.open(ctx, "renew", "")
		h.clock.Advance(30 * time.Second)
		gs, err := h.sess.RenewGenerationSession(ctx, &pb.RenewGenerationSessionRequest{Ref: h.ref("renew"), LeaseMs: ms(5 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if gs.GetLeaseMs() != 300_000 || gs.GetExpiresAtUnixNanos() != uint64(h.clock.Now().Add(5*time.Minute).UnixNano()) {
			t.Fatalf("renewed to %d ms, expires %d", gs.GetLeaseMs(), gs.GetExpiresAtUnixNanos())
		}
		_, err = h.sess.RenewGenerationSession(ctx, &pb.RenewGenerationSessionRequest{Ref: h.ref("renew"), LeaseMs: ms(0)})
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("close twice", func(t *testing.T) {
		h.open(ctx, "close2", sysPrompt)
		r, err := h.sess.CloseGenerationSession(ctx, &pb.CloseGenerationSessionRequest{Ref: h.ref("close2")})
		if err != nil || r.GetStatus() != pb.CloseStatus_CLOSE_STATUS_CLOSED {
			t.Fatalf("first close %v %v", r.GetStatus(), err)
		}
		r, err = h.sess.CloseGenerationSession(ctx, &pb.CloseGenerationSessionRequest{Ref: h.ref("close2")})
		if err != nil || r.GetStatus() != pb.CloseStatus_CLOSE_STATUS_ALREADY_CLOSED {
			t.Fatalf("second close %v %v", r.GetStatus(), err)
		}
		if gs := h.get(ctx, "close2"); gs.GetState() != pb.GenerationSessionState_GENERATION_SESSION_STATE_CLOSED || gs.GetPinnedKvBlocks() != 0 {
			t.Fatalf("tombstone %v", gs)
		}
		_, err = h.sess.RenewGenerationSession(ctx, &pb.RenewGenerationSessionRequest{Ref: h.ref("close2")})
		wantStatus(t, err, codes.FailedPrecondition, "SESSION_CLOSED")
		if p := h.eng.Cache().PinnedPages("session:close2"); p != 0 {
			t.Fatalf("%d pages pinned after close", p)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		gs := h.open(ctx, "exp", sysPrompt)
		if gs.GetPinnedKvBlocks() == 0 || gs.GetRetainedTokens() == 0 || gs.GetResidentTokens() != gs.GetRetainedTokens() {
			t.Fatalf("initial input not pinned: %v", gs)
		}
		h.clock.Advance(time.Minute)
		h.s.Sessions().Reap()
		if p := h.eng.Cache().PinnedPages("session:exp"); p != 0 {
			t.Fatalf("expired session pins %d pages", p)
		}
		if gs := h.get(ctx, "exp"); gs.GetState() != pb.GenerationSessionState_GENERATION_SESSION_STATE_EXPIRED {
			t.Fatalf("state %v", gs.GetState())
		}
		_, err := h.sess.RenewGenerationSession(ctx, &pb.RenewGenerationSessionRequest{Ref: h.ref("exp")})
		wantStatus(t, err, codes.FailedPrecondition, "SESSION_EXPIRED")
		r, err := h.sess.CloseGenerationSession(ctx, &pb.CloseGenerationSessionRequest{Ref: h.ref("exp")})
		if err != nil || r.GetStatus() != pb.CloseStatus_CLOSE_STATUS_EXPIRED {
			t.Fatalf("close of expired: %v %v", r.GetStatus(), err)
		}
		if err := h.eng.Cache().CheckIntegrity(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("tombstone retention", func(t *testing.T) {
		h.open(ctx, "old", "")
		if _, err := h.sess.CloseGenerationSession(ctx, &pb.CloseGenerationSessionRequest{Ref: h.ref("old")}); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(sessions.DefaultRetention)
		_, err := h.sess.CloseGenerationSession(ctx, &pb.CloseGenerationSessionRequest{Ref: h.ref("old")})
		wantStatus(t, err, codes.NotFound, "SESSION_NOT_FOUND")
	})
}

// TestSessionTurns: continuation modes, busy, cancel and close while
// running, through unary Generate.
func TestSessionTurns(t *testing.T) {
	h := startExt(t, nil)
	ctx := ctxT(t)

	t.Run("expired continuation", func(t *testing.T) {
		h.open(ctx, "exp", "")
		h.clock.Advance(sessions.DefaultLease)
		_, err := h.generate(ctx, h.cont("exp", 0, "hi", 2))
		wantStatus(t, err, codes.FailedPrecondition, "SESSION_EXPIRED")
	})
	t.Run("closed continuation", func(t *testing.T) {
		h.open(ctx, "closed", "")
		if _, err := h.sess.CloseGenerationSession(ctx, &pb.CloseGenerationSessionRequest{Ref: h.ref("closed")}); err != nil {
			t.Fatal(err)
		}
		_, err := h.generate(ctx, h.cont("closed", 0, "hi", 2))
		wantStatus(t, err, codes.FailedPrecondition, "SESSION_CLOSED")
	})
	t.Run("owner mismatch continuation", func(t *testing.T) {
		h.open(ctx, "own", "")
		req := h.cont("own", 0, "hi", 2)
		req.Session.Ref.OwnerInstanceId = "elsewhere"
		_, err := h.generate(ctx, req)
		wantStatus(t, err, codes.FailedPrecondition, "OWNER_MISMATCH")
		if gs := h.get(ctx, "own"); gs.GetTurns() != 0 || gs.GetRetainedTokens() != 0 {
			t.Fatalf("a refused turn ran: %v", gs)
		}
	})
	t.Run("mode append", func(t *testing.T) {
		gs := h.open(ctx, "app", sysPrompt)
		sys := gs.GetRetainedTokens()
		rs, err := h.generate(ctx, h.cont("app", pb.ContinuationMode_CONTINUATION_MODE_APPEND, " What is two plus two?", 6))
		if err != nil || terminalError(rs) != nil {
			t.Fatalf("turn: %v %v", err, terminalError(rs))
		}
		out := outputIDs(rs)
		in := h.encode(" What is two plus two?", false)
		u := finalUsage(t, rs)
		if u.GetPromptTokens() != sys+uint32(len(in)) || u.GetCachedPromptTokens() < sys/16*16 {
			t.Fatalf("usage %v (system %d, input %d)", u, sys, len(in))
		}
		gs = h.get(ctx, "app")
		want := append(append(slices.Clone(gs.GetTokenIds()[:sys]), in...), out...)
		if !slices.Equal(gs.GetTokenIds(), want) || gs.GetTurns() != 1 || !slices.Equal(gs.GetTurnOffsets(), []uint32{sys}) {
			t.Fatalf("retained %v offsets %v, want %v", gs.GetTokenIds(), gs.GetTurnOffsets(), want)
		}
		// The same history resent as token ids gives the same output.
		ref := plainReq(6)
		ref.Input = &pb.GenerateRequest_TokenIds{TokenIds: &pb.TokenIds{Ids: want[:int(sys)+len(in)]}}
		ref.Kv = &pb.KvOptions{BypassPrefixCache: ptr(true)}
		rr, err := h.generate(ctx, ref)
		if err != nil || !slices.Equal(outputIDs(rr), out) {
			t.Fatalf("unary replay %v vs turn %v (%v)", outputIDs(rr), out, err)
		}
	})
	t.Run("mode drop output", func(t *testing.T) {
		gs := h.open(ctx, "drop", sysPrompt)
		rs, err := h.generate(ctx, h.cont("drop", pb.ContinuationMode_CONTINUATION_MODE_DROP_OUTPUT, " Hi.", 4))
		if err != nil || len(outputIDs(rs)) != 4 {
			t.Fatalf("turn: %v %d tokens", err, len(outputIDs(rs)))
		}
		after := h.get(ctx, "drop")
		want := append(slices.Clone(after.GetTokenIds()[:gs.GetRetainedTokens()]), h.encode(" Hi.", false)...)
		if !slices.Equal(after.GetTokenIds(), want) {
			t.Fatalf("retained %v, want %v", after.GetTokenIds(), want)
		}
	})
	t.Run("mode branch", func(t *testing.T) {
		h.open(ctx, "br", sysPrompt)
		if _, err := h.generate(ctx, h.cont("br", 0, " First.", 3)); err != nil {
			t.Fatal(err)
		}
		before := h.get(ctx, "br")
		req := h.cont("br", pb.ContinuationMode_CONTINUATION_MODE_BRANCH, " Other.", 3)
		req.Session.FromToken = ptr(before.GetTurnOffsets()[0])
		req.Sampling = &pb.SamplingParams{NumSequences: ptr[uint32](2)}
		rs, err := h.generate(ctx, req)
		if err != nil || terminalError(rs) != nil {
			t.Fatalf("branch: %v %v", err, terminalError(rs))
		}
		if u := finalUsage(t, rs); u.GetPromptTokens() != before.GetTurnOffsets()[0]+uint32(len(h.encode(" Other.", false))) {
			t.Fatalf("branch saw %d tokens", u.GetPromptTokens())
		}
		after := h.get(ctx, "br")
		if !slices.Equal(after.GetTokenIds(), before.GetTokenIds()) || after.GetTurns() != before.GetTurns() || after.GetPinnedKvBlocks() != before.GetPinnedKvBlocks() {
			t.Fatalf("branch changed the session:\n%v\n%v", before, after)
		}
	})
	t.Run("mode replace", func(t *testing.T) {
		h.open(ctx, "rep", sysPrompt)
		h.generate(ctx, h.cont("rep", 0, " One.", 2))
		h.generate(ctx, h.cont("rep", 0, " Two.", 2))
		before := h.get(ctx, "rep")
		from := before.GetTurnOffsets()[1]
		req := h.cont("rep", pb.ContinuationMode_CONTINUATION_MODE_REPLACE, " Three.", 2)
		req.Session.FromToken = ptr(from)
		rs, err := h.generate(ctx, req)
		if err != nil || terminalError(rs) != nil {
			t.Fatal(err, terminalError(rs))
		}
		after := h.get(ctx, "rep")
		want := append(append(slices.Clone(before.GetTokenIds()[:from]), h.encode(" Three.", false)...), outputIDs(rs)...)
		if !slices.Equal(after.GetTokenIds(), want) || !slices.Equal(after.GetTurnOffsets(), before.GetTurnOffsets()) {
			t.Fatalf("after replace %v %v, want %v", after.GetTokenIds(), after.GetTurnOffsets(), want)
		}
	})
	t.Run("n > 1 outside branch", func(t *testing.T) {
		h.open(ctx, "n2", "")
		req := h.cont("n2", 0, "hi", 2)
		req.Sampling = &pb.SamplingParams{NumSequences: ptr[uint32](2)}
		_, err := h.generate(ctx, req)
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("busy session", func(t *testing.T) {
		h.open(ctx, "busy", sysPrompt)
		run, stop := h.runLong(ctx, "busy")
		defer stop()
		_, err := h.generate(ctx, h.cont("busy", 0, "again", 2))
		wantStatus(t, err, codes.FailedPrecondition, "SESSION_BUSY")
		if gs := h.get(ctx, "busy"); gs.GetState() != pb.GenerationSessionState_GENERATION_SESSION_STATE_RUNNING {
			t.Fatalf("state %v", gs.GetState())
		}
		// A branch may run meanwhile.
		if rs, err := h.generate(ctx, h.cont("busy", pb.ContinuationMode_CONTINUATION_MODE_BRANCH, " b", 2)); err != nil || terminalError(rs) != nil {
			t.Fatalf("branch while busy: %v", err)
		}
		_ = run
	})
	t.Run("cancel mid-turn leaves the session unchanged", func(t *testing.T) {
		h.open(ctx, "cancel", sysPrompt)
		h.generate(ctx, h.cont("cancel", 0, " Q.", 3))
		before := h.get(ctx, "cancel")
		_, stop := h.runLong(ctx, "cancel")
		stop()
		eventually(t, "turn ended", func() bool {
			return h.get(ctx, "cancel").GetState() == pb.GenerationSessionState_GENERATION_SESSION_STATE_IDLE
		})
		after := h.get(ctx, "cancel")
		if !slices.Equal(after.GetTokenIds(), before.GetTokenIds()) || !slices.Equal(after.GetTurnOffsets(), before.GetTurnOffsets()) ||
			after.GetPinnedKvBlocks() != before.GetPinnedKvBlocks() || after.GetResidentTokens() != before.GetResidentTokens() {
			t.Fatalf("cancelled turn changed the session:\n%v\n%v", before, after)
		}
		rs, err := h.generate(ctx, h.cont("cancel", 0, " Next.", 2))
		if err != nil || terminalError(rs) != nil || h.get(ctx, "cancel").GetTurns() != 2 {
			t.Fatalf("session not usable after cancel: %v", err)
		}
	})
	t.Run("close while running", func(t *testing.T) {
		h.open(ctx, "closerun", sysPrompt)
		run, stop := h.runLong(ctx, "closerun")
		defer stop()
		r, err := h.sess.CloseGenerationSession(ctx, &pb.CloseGenerationSessionRequest{Ref: h.ref("closerun")})
		if err != nil || r.GetStatus() != pb.CloseStatus_CLOSE_STATUS_CLOSED {
			t.Fatalf("close: %v %v", r.GetStatus(), err)
		}
		rs := <-run
		last := rs[len(rs)-1]
		cancelled := last.GetError().GetCode() == pb.ErrorCode_ERROR_CODE_CANCELLED
		for _, r := range rs {
			if f := r.GetFinished(); f != nil && f.GetReason() == pb.FinishReason_FINISH_REASON_CANCELLED {
				cancelled = true
			}
		}
		if !cancelled {
			t.Fatalf("running turn not cancelled by close: %v", last)
		}
		eventually(t, "pins released", func() bool { return h.eng.Cache().PinnedPages("session:closerun") == 0 })
	})
}

// runLong starts a long APPEND turn on session id and returns once its
// first token arrived; the channel yields every response at the end, stop
// cancels the call.
func (h *extHarness) runLong(ctx context.Context, id string) (<-chan []*pb.GenerateResponse, func()) {
	h.t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	st, err := h.inf.Generate(cctx, h.cont(id, 0, " Tell a long story.", 1000))
	if err != nil {
		h.t.Fatal(err)
	}
	first := make(chan struct{})
	out := make(chan []*pb.GenerateResponse, 1)
	go func() {
		var rs []*pb.GenerateResponse
		once := false
		for {
			r, err := st.Recv()
			if err != nil {
				break
			}
			rs = append(rs, r)
			if !once && r.GetToken() != nil {
				once = true
				close(first)
			}
		}
		if !once {
			close(first)
		}
		out <- rs
	}()
	<-first
	return out, cancel
}

// TestExtensionCleanup: after sessions, turns and streams (some cancelled)
// and closing everything, the page ledger holds no pins and no pages in
// use, CheckIntegrity passes, and goroutines return to the baseline.
func TestExtensionCleanup(t *testing.T) {
	base := runtime.NumGoroutine()
	h := startExt(t, nil)
	ctx := ctxT(t)
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("c%d", i)
		h.open(ctx, id, sysPrompt)
		if _, err := h.generate(ctx, h.cont(id, 0, " Hello.", 3)); err != nil {
			t.Fatal(err)
		}
		rs, err := h.stream(ctx, []*pb.GenerateStreamRequest{startFrame(h.cont(id, 0, "", 2)), textFrame(1, " More"), endFrame()}, 0, true)
		wantStreamOK(t, rs, err)
	}
	_, stop := h.runLong(ctx, "c0")
	stop()
	cctx, cancel := context.WithCancel(ctx)
	st, err := h.strm.GenerateStream(cctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(startFrame(h.cont("c1", 0, "", 5)))
	st.Send(textFrame(1, "abandoned "))
	st.Recv()
	cancel()
	for i := 0; i < 3; i++ {
		eventually(t, "idle", func() bool {
			return h.get(ctx, fmt.Sprintf("c%d", i)).GetState() != pb.GenerationSessionState_GENERATION_SESSION_STATE_RUNNING
		})
		if _, err := h.sess.CloseGenerationSession(ctx, &pb.CloseGenerationSessionRequest{Ref: h.ref(fmt.Sprintf("c%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "engine idle", func() bool { return h.eng.Load().Running == 0 && h.eng.Load().Waiting == 0 })
	if st := h.eng.Cache().Stats(); st.Pinned != 0 || st.PinOwners != 0 || st.InUse != 0 {
		t.Fatalf("ledger after closing everything: %+v", st)
	}
	if err := h.eng.Cache().CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.closeEngine()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, baseline %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSessionCapabilitiesEnforced reads ModelInfo.sessions and checks each
// advertised figure against the server's behaviour.
func TestSessionCapabilitiesEnforced(t *testing.T) {
	h := startExt(t, func(c *ExtensionConfig) {
		c.Sessions.MaxSessions = 3
		c.Sessions.MaxPinnedPages = 8
		c.Sessions.MaxPinnedPagesPerSession = 4
		c.Sessions.DefaultLease = 2 * time.Minute
		c.Sessions.MaxLease = 20 * time.Minute
	})
	ctx := ctxT(t)
	mi, err := h.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: extModel})
	if err != nil {
		t.Fatal(err)
	}
	c := mi.GetSessions()
	wantModes := []pb.ContinuationMode{pb.ContinuationMode_CONTINUATION_MODE_APPEND, pb.ContinuationMode_CONTINUATION_MODE_DROP_OUTPUT,
		pb.ContinuationMode_CONTINUATION_MODE_BRANCH, pb.ContinuationMode_CONTINUATION_MODE_REPLACE}
	if !c.GetSupported() || !slices.Equal(c.GetModes(), wantModes) || !c.GetOwnerAffinityRequired() || c.GetMigrationSupported() {
		t.Fatalf("capabilities %v", c)
	}
	if c.GetMaxRetainedTokens() != 64 || c.GetMaxPinnedKvBlocks() != 8 || c.GetMaxSessions() != 3 {
		t.Fatalf("limits %v", c)
	}
	ids := func(n int) *pb.OpenGenerationSessionRequest_TokenIds {
		v := make([]uint32, n)
		for i := range v {
			v[i] = uint32(100 + i)
		}
		return &pb.OpenGenerationSessionRequest_TokenIds{TokenIds: &pb.TokenIds{Ids: v}}
	}
	t.Run("default lease", func(t *testing.T) {
		gs := h.open(ctx, "l1", "")
		if gs.GetLeaseMs() != c.GetDefaultLeaseMs() {
			t.Fatalf("lease %d, advertised default %d", gs.GetLeaseMs(), c.GetDefaultLeaseMs())
		}
	})
	t.Run("max lease", func(t *testing.T) {
		gs, err := h.sess.RenewGenerationSession(ctx, &pb.RenewGenerationSessionRequest{Ref: h.ref("l1"), LeaseMs: ptr(c.GetMaxLeaseMs() + 1)})
		if err != nil || gs.GetLeaseMs() != c.GetMaxLeaseMs() {
			t.Fatalf("lease %d, advertised max %d (%v)", gs.GetLeaseMs(), c.GetMaxLeaseMs(), err)
		}
	})
	t.Run("max retained tokens", func(t *testing.T) {
		_, err := h.sess.OpenGenerationSession(ctx, &pb.OpenGenerationSessionRequest{SessionId: "big", Model: extModel,
			InitialInput: ids(int(c.GetMaxRetainedTokens()) + 1)})
		wantStatus(t, err, codes.ResourceExhausted, "SESSION_BUDGET")
		h.open(ctx, "l2", "")
		_, err = h.generate(ctx, h.cont("l2", 0, "", 1))
		wantStatus(t, err, codes.InvalidArgument, "") // nothing to continue from: empty prompt
		req := h.cont("l2", 0, "", c.GetMaxRetainedTokens())
		req.Input = &pb.GenerateRequest_TokenIds{TokenIds: &pb.TokenIds{Ids: []uint32{100}}}
		_, err = h.generate(ctx, req)
		wantStatus(t, err, codes.ResourceExhausted, "SESSION_BUDGET")
		req.Stopping.MaxTokens = ptr(c.GetMaxRetainedTokens() - 1)
		if rs, err := h.generate(ctx, req); err != nil || terminalError(rs) != nil {
			t.Fatalf("a turn at the limit: %v %v", err, terminalError(rs))
		}
		if gs := h.get(ctx, "l2"); gs.GetRetainedTokens() != c.GetMaxRetainedTokens() {
			t.Fatalf("retained %d", gs.GetRetainedTokens())
		}
	})
	t.Run("max pinned blocks", func(t *testing.T) {
		// l2 pins 4 pages (64 tokens), l3 three more; two pages more would
		// pass the global 8 (each session stays within its own 4).
		if _, err := h.sess.CloseGenerationSession(ctx, &pb.CloseGenerationSessionRequest{Ref: h.ref("l1")}); err != nil {
			t.Fatal(err)
		}
		gs, err := h.sess.OpenGenerationSession(ctx, &pb.OpenGenerationSessionRequest{SessionId: "l3", Model: extModel, InitialInput: ids(48)})
		if err != nil {
			t.Fatal(err)
		}
		if gs.GetPinnedKvBlocks() != 3 {
			t.Fatalf("48 tokens pin %d pages", gs.GetPinnedKvBlocks())
		}
		_, err = h.sess.OpenGenerationSession(ctx, &pb.OpenGenerationSessionRequest{SessionId: "l4", Model: extModel, InitialInput: ids(32)})
		wantStatus(t, err, codes.ResourceExhausted, "SESSION_BUDGET")
		if !strings.Contains(err.Error(), "all sessions may pin") {
			t.Fatalf("not the global budget: %v", err)
		}
	})
	t.Run("max sessions", func(t *testing.T) {
		h.open(ctx, "l5", "")
		_, err := h.sess.OpenGenerationSession(ctx, &pb.OpenGenerationSessionRequest{Model: extModel})
		wantStatus(t, err, codes.ResourceExhausted, "SESSION_BUDGET")
		if !strings.Contains(err.Error(), "sessions are open") {
			t.Fatalf("not the session count: %v", err)
		}
	})
}
