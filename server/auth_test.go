package server

import (
	"context"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	pb "oengine/proto/openengine/v1"
)

// Keys of the auth tests: two users and an admin.
const (
	aliceKey = "sk-alice-0123456789"
	bobKey   = "sk-bob-9876543210"
	rootKey  = "sk-root-5555555555"
)

func testKeys(t *testing.T) *Keys {
	t.Helper()
	k, err := NewKeys([]Key{{Name: "alice", Secret: aliceKey}, {Name: "bob", Secret: bobKey}, {Name: "root", Secret: rootKey, Admin: true}})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func as(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}

// TestAuthRequired is issue 17 point 1: with keys configured every call but
// health needs a valid key, checked before anything else (before the fix
// every call was served).
func TestAuthRequired(t *testing.T) {
	h := startServer(t, testConfig(), Model{Backend: newFake(t, "m")})
	h.s.SetKeys(testKeys(t))
	ctx := ctxT(t)

	_, err := h.ctl.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
	wantStatus(t, err, codes.Unauthenticated, "UNAUTHENTICATED")
	_, err = h.ctl.GetServerInfo(as(ctx, "sk-wrong"), &pb.GetServerInfoRequest{})
	wantStatus(t, err, codes.Unauthenticated, "UNAUTHENTICATED")
	_, err = h.ctl.GetServerInfo(metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+aliceKey), &pb.GetServerInfoRequest{})
	wantStatus(t, err, codes.Unauthenticated, "UNAUTHENTICATED")
	// Before validation: a malformed request without a key is 401, not 400.
	_, err = h.generate(ctx, &pb.GenerateRequest{Model: "nope"})
	wantStatus(t, err, codes.Unauthenticated, "UNAUTHENTICATED")

	if _, err := h.ctl.GetServerInfo(as(ctx, aliceKey), &pb.GetServerInfoRequest{}); err != nil {
		t.Fatalf("alice: %v", err)
	}
	rs, err := h.generate(as(ctx, aliceKey), prompt("hello"))
	if err != nil || len(rs) == 0 {
		t.Fatalf("alice generate: %v", err)
	}
	// Health stays open.
	if _, err := h.ctl.Health(ctx, &pb.HealthRequest{}); err != nil {
		t.Fatalf("Control/Health without a key: %v", err)
	}
	if _, err := healthpb.NewHealthClient(h.conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("grpc.health without a key: %v", err)
	}
	for _, path := range []string{"/healthz", "/readyz", "/health", "/metrics"} {
		if code, _ := httpGet(t, h.http+path); code != 200 {
			t.Fatalf("%s without a key: %d", path, code)
		}
	}
	// Keys never appear in the metrics (or anywhere the server writes).
	if _, body := httpGet(t, h.http+"/metrics"); strings.Contains(body, aliceKey) || !strings.Contains(body, `reason="UNAUTHENTICATED"`) {
		t.Fatal("metrics leak a key or miss the UNAUTHENTICATED refusals")
	}
	// A reload without keys turns authentication off.
	h.s.SetKeys(nil)
	if _, err := h.ctl.GetServerInfo(ctx, &pb.GetServerInfoRequest{}); err != nil {
		t.Fatalf("after SetKeys(nil): %v", err)
	}
}

// TestAdminOnly is issue 17 point 2: KV events, event sources and
// Abort{all_requests} need an admin key (before the fix any client could
// read every prompt's token ids from the KV events).
func TestAdminOnly(t *testing.T) {
	h := startServer(t, testConfig(), Model{Backend: newFake(t, "m")})
	h.s.SetKeys(testKeys(t))
	ctx := as(ctxT(t), aliceKey)

	sub, err := h.ctl.SubscribeKvEvents(ctx, &pb.SubscribeKvEventsRequest{})
	if err == nil {
		_, err = sub.Recv()
	}
	wantStatus(t, err, codes.PermissionDenied, "ADMIN_REQUIRED")
	_, err = h.ctl.GetKvEventSources(ctx, &pb.GetKvEventSourcesRequest{})
	wantStatus(t, err, codes.PermissionDenied, "ADMIN_REQUIRED")
	_, err = h.ctl.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_AllRequests{AllRequests: &pb.AllRequests{}}})
	wantStatus(t, err, codes.PermissionDenied, "ADMIN_REQUIRED")
	// Load and model info stay readable by any principal.
	if _, err := h.ctl.GetLoad(ctx, &pb.GetLoadRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: "m"}); err != nil {
		t.Fatal(err)
	}

	root := as(ctxT(t), rootKey)
	if _, err := h.ctl.GetKvEventSources(root, &pb.GetKvEventSourcesRequest{}); err != nil {
		t.Fatalf("admin GetKvEventSources: %v", err)
	}
	if _, err := h.ctl.Abort(root, &pb.AbortRequest{Target: &pb.AbortRequest_AllRequests{AllRequests: &pb.AllRequests{}}}); err != nil {
		t.Fatalf("admin Abort all: %v", err)
	}
	sub, err = h.ctl.SubscribeKvEvents(root, &pb.SubscribeKvEventsRequest{IncludeSnapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Recv(); err != nil && err != io.EOF {
		t.Fatalf("admin SubscribeKvEvents: %v", err)
	}
}

// TestRequestOwnership is issue 17 point 2 for requests: another principal
// neither aborts nor learns of a request id (before the fix anyone could
// Abort anyone's request by id).
func TestRequestOwnership(t *testing.T) {
	h := startServer(t, testConfig(), Model{Backend: newFake(t, "m")})
	h.s.SetKeys(testKeys(t))
	alice, bob := as(ctxT(t), aliceKey), as(ctxT(t), bobKey)

	rs, err := h.generate(alice, with(prompt("hi"), func(r *pb.GenerateRequest) { r.RequestId = "r1" }))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.GetRequestId() != "r1" {
			t.Fatalf("response request_id %q, want the client's r1", r.GetRequestId())
		}
	}
	_, err = h.ctl.Abort(bob, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: "r1"}})
	wantStatus(t, err, codes.NotFound, "REQUEST_NOT_FOUND")
	ar, err := h.ctl.Abort(alice, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: "r1"}})
	if err != nil || ar.GetStatus() != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
		t.Fatalf("alice's abort of her finished request: %v %v", ar, err)
	}
	// The same id is free for bob.
	if _, err := h.generate(bob, with(prompt("hi"), func(r *pb.GenerateRequest) { r.RequestId = "r1" })); err != nil {
		t.Fatalf("bob reusing r1: %v", err)
	}
}

// TestClientIDLimits is issue 17 point 6: a 3 MB request id was echoed in
// every event and retained; ids are at most 256 bytes of printable ASCII.
func TestClientIDLimits(t *testing.T) {
	h := startServer(t, testConfig(), Model{Backend: newFake(t, "m")})
	ctx := ctxT(t)
	for name, id := range map[string]string{
		"257 bytes":  strings.Repeat("a", 257),
		"3 MB":       strings.Repeat("x", 3<<20-64),
		"newline":    "a\nb",
		"non-ASCII":  "caf\u00e9",
		"scope mark": "x\u00a7y",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.generate(ctx, with(prompt("hi"), func(r *pb.GenerateRequest) { r.RequestId = id }))
			wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
			_, err = h.ctl.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: id}})
			wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
		})
	}
	if _, err := h.generate(ctx, with(prompt("hi"), func(r *pb.GenerateRequest) { r.RequestId = strings.Repeat("a", 256) })); err != nil {
		t.Fatalf("256-byte id refused: %v", err)
	}
}

// TestSessionOwnership is issue 17 points 2 and 3 for sessions: ids are
// scoped per principal, another principal gets NOT_FOUND for everything,
// and each key has a session quota; GetLoad counts live sessions (before
// the fix any client read any session's tokens and active_kv_sessions
// stayed 0).
func TestSessionOwnership(t *testing.T) {
	h := startExt(t, func(c *ExtensionConfig) { c.MaxSessionsPerKey = 2 })
	h.s.SetKeys(testKeys(t))
	alice, bob := as(ctxT(t), aliceKey), as(ctxT(t), bobKey)

	gs := h.open(alice, "bob-chat", "my credit card is 4111")
	if gs.GetRef().GetSessionId() != "bob-chat" {
		t.Fatalf("alice's session id %q", gs.GetRef().GetSessionId())
	}
	_, err := h.sess.GetGenerationSession(bob, &pb.GetGenerationSessionRequest{Ref: h.ref("bob-chat"), IncludeTokens: true})
	wantStatus(t, err, codes.NotFound, "SESSION_NOT_FOUND")
	_, err = h.sess.RenewGenerationSession(bob, &pb.RenewGenerationSessionRequest{Ref: h.ref("bob-chat")})
	wantStatus(t, err, codes.NotFound, "SESSION_NOT_FOUND")
	_, err = h.sess.CloseGenerationSession(bob, &pb.CloseGenerationSessionRequest{Ref: h.ref("bob-chat")})
	wantStatus(t, err, codes.NotFound, "SESSION_NOT_FOUND")
	_, err = h.generate(bob, h.cont("bob-chat", pb.ContinuationMode_CONTINUATION_MODE_APPEND, " and", 2))
	wantStatus(t, err, codes.NotFound, "SESSION_NOT_FOUND")
	// Bob's own "bob-chat" is another session.
	h.open(bob, "bob-chat", "hello")
	if got := h.get(alice, "bob-chat"); len(got.GetTokenIds()) == 0 || got.GetRef().GetSessionId() != "bob-chat" {
		t.Fatalf("alice's session after bob opened his: %v", got)
	}
	// A refused open releases its place in the quota (one release path).
	_, err = h.sess.OpenGenerationSession(alice, &pb.OpenGenerationSessionRequest{SessionId: "bob-chat", Model: extModel})
	wantStatus(t, err, codes.AlreadyExists, "DUPLICATE_SESSION")
	// A minted id is the client's form, without the principal.
	minted := h.open(alice, "", "x")
	if id := minted.GetRef().GetSessionId(); !strings.HasPrefix(id, "gs-") || strings.Contains(id, "alice") {
		t.Fatalf("minted id %q", id)
	}
	// Quota: alice holds 2 = MaxSessionsPerKey.
	_, err = h.sess.OpenGenerationSession(alice, &pb.OpenGenerationSessionRequest{Model: extModel})
	wantStatus(t, err, codes.ResourceExhausted, "SESSION_BUDGET")
	li, err := h.ctl.GetLoad(bob, &pb.GetLoadRequest{})
	if err != nil || li.GetActiveKvSessions() != 3 {
		t.Fatalf("active_kv_sessions %d (%v), want 3", li.GetActiveKvSessions(), err)
	}
	if _, err := h.sess.CloseGenerationSession(alice, &pb.CloseGenerationSessionRequest{Ref: h.ref(minted.GetRef().GetSessionId())}); err != nil {
		t.Fatal(err)
	}
	h.open(alice, "again", "")
	x := h.s.extension()
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.opening) != 0 {
		t.Fatalf("opens still counted in flight: %v", x.opening)
	}
}
