package sse

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"oengine/server"
	"oengine/sessions"
)

// TestSSEAuth is issue 17 points 1-2 on the SSE route: with keys the route
// needs one, and a session is reachable only by the principal that opened
// it (before the fix the session id alone authorized).
func TestSSEAuth(t *testing.T) {
	tok := sseVocab(t)
	e := newScriptEngine(t, scriptFor(tok, "fine"), sseEngineOpts{name: "main"})
	h := startSSE(t, sseHarnessOpts{}, e)
	keys, err := server.NewKeys([]server.Key{{Name: "alice", Secret: "sk-alice-1"}, {Name: "bob", Secret: "sk-bob-1"}})
	if err != nil {
		t.Fatal(err)
	}
	h.s.SetKeys(keys)
	alice := server.Principal{Name: "alice"}
	in, err := h.mgr.Open(context.Background(), sessions.OpenRequest{ID: alice.Scope("chat"), Model: "main", Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := alice.Unscope(in.Ref.SessionID); got != "chat" {
		t.Fatalf("scoped id %q", in.Ref.SessionID)
	}
	post := func(key string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, h.url("chat"), strings.NewReader(`{"prompt":"x"}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := post("")
	checkErrorResponse(t, resp, 401, "unauthenticated")
	if resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatal("401 without WWW-Authenticate")
	}
	checkErrorResponse(t, post("sk-wrong"), 401, "unauthenticated")
	checkErrorResponse(t, post("sk-bob-1"), 404, "session_not_found")
	if resp := post("sk-alice-1"); resp.StatusCode != 200 {
		t.Fatalf("alice: %d", resp.StatusCode)
	}
}
