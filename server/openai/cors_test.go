package openai

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestCORS: with --cors-origin, an allowed origin's preflight is answered
// (the methods of the path, the headers the browser asks for) and its
// requests carry Access-Control-Allow-Origin; another foreign origin's
// preflight and requests are refused with 403 before they reach the
// engine; the server's own origin and clients without Origin need nothing.
// (web's TestCORSInBrowser runs the same from a real browser.)
func TestCORS(t *testing.T) {
	const allowed, other = "https://app.example", "https://evil.example"
	h := startHarness(t, harnessOpts{corsOrigins: []string{allowed}})
	do := func(method, path, origin, body string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctxT(t), method, h.base+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	asks := map[string]string{"Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization, content-type, x-stainless-os"}
	resp, body := do(http.MethodOptions, "/v1/chat/completions", allowed, "", asks)
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != allowed ||
		resp.Header.Get("Access-Control-Allow-Methods") != "POST" ||
		resp.Header.Get("Access-Control-Allow-Headers") != "authorization, content-type, x-stainless-os" {
		t.Fatalf("allowed preflight: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, _ = do(http.MethodOptions, "/v1/sessions/gs-1", allowed, "", asks)
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Methods") != "GET, PATCH, DELETE" {
		t.Fatalf("a path of three methods: %d %v", resp.StatusCode, resp.Header)
	}
	resp, body = do(http.MethodOptions, "/v1/chat/completions", other, "", asks)
	var e errorBody
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" ||
		json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "origin_not_allowed" {
		t.Fatalf("foreign preflight: %d %v %s", resp.StatusCode, resp.Header, body)
	}

	chat := `{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
	before := h.e.Stats().Requests
	resp, body = do(http.MethodPost, "/v1/chat/completions", other, chat, nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "origin_not_allowed") || h.e.Stats().Requests != before {
		t.Fatalf("foreign POST: %d %s (%d requests reached the engine)", resp.StatusCode, body, h.e.Stats().Requests-before)
	}
	for _, origin := range []string{allowed, h.base, ""} {
		resp, body = do(http.MethodPost, "/v1/chat/completions", origin, chat, nil)
		want := ""
		if origin == allowed {
			want = allowed
		}
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != want {
			t.Fatalf("POST from %q: %d %v %s", origin, resp.StatusCode, resp.Header, body)
		}
	}
	h.idle(t, false)
}
