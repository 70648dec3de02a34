package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"oengine/bench"
	pb "oengine/proto/openengine/v1"
	"oengine/server"
)

// do sends one JSON request and decodes the JSON answer.
func (h *harness) do(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctxT(t), method, h.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d, body %q is not JSON", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func num(m map[string]any, k string) float64 {
	switch v := m[k].(type) {
	case float64:
		return v
	case string: // protojson writes 64-bit integers as strings
		var f float64
		_ = json.Unmarshal([]byte(v), &f)
		return f
	}
	return -1
}

// TestSessionsOverHTTP checks every rule and error of the session routes
// and chat completions that continue a session.
func TestSessionsOverHTTP(t *testing.T) {
	h := startHarness(t, harnessOpts{template: llama2Template})
	c := h.client()

	code, s := h.do(t, "POST", "/v1/sessions", `{"model":"tiny","prompt":"You are a helpful assistant.","lease_ms":"60000"}`)
	if code != http.StatusCreated {
		t.Fatalf("open: %d %v", code, s)
	}
	ref, _ := s["ref"].(map[string]any)
	id, _ := ref["session_id"].(string)
	if len(id) < 32 || ref["owner_instance_id"] != h.s.InstanceID() || s["state"] != "GENERATION_SESSION_STATE_IDLE" || num(s, "retained_tokens") <= 0 {
		t.Fatalf("opened %v", s)
	}

	t.Run("get with tokens", func(t *testing.T) {
		code, g := h.do(t, "GET", "/v1/sessions/"+id+"?include_tokens=true", "")
		toks, _ := g["token_ids"].([]any)
		if code != 200 || float64(len(toks)) != num(g, "retained_tokens") || toks[0].(float64) != float64(h.tok.BOS()) {
			t.Fatalf("get: %d %v", code, g)
		}
		code, g = h.do(t, "GET", "/v1/sessions/"+id+"?include_tokens=maybe", "")
		if code != 400 || errCode(g) != "invalid_request" {
			t.Fatalf("bad include_tokens: %d %v", code, g)
		}
	})
	t.Run("renew", func(t *testing.T) {
		code, g := h.do(t, "PATCH", "/v1/sessions/"+id, `{"lease_ms":"120000"}`)
		if code != 200 || num(g, "lease_ms") != 120000 {
			t.Fatalf("renew: %d %v", code, g)
		}
		code, g = h.do(t, "PATCH", "/v1/sessions/"+id, `{"lease_ms":"0"}`)
		if code != 400 || errCode(g) != "invalid_request" {
			t.Fatalf("lease 0: %d %v", code, g)
		}
	})

	t.Run("chat completions continue the session", func(t *testing.T) {
		code, e := h.do(t, "POST", "/v1/sessions", `{"model":"tiny"}`)
		if code != http.StatusCreated || num(e, "retained_tokens") != 0 {
			t.Fatalf("open empty: %d %v", code, e)
		}
		cid := e["ref"].(map[string]any)["session_id"].(string)
		p := oa.ChatCompletionNewParams{Model: "tiny", MaxCompletionTokens: oa.Int(6), Temperature: oa.Float(0),
			Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage(strings.Repeat("Tell me about the sea and the sky. ", 6))}}
		sess := option.WithJSONSet("session", map[string]any{"id": cid})
		r1, err := c.Chat.Completions.New(ctxT(t), p, sess, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		_, g := h.do(t, "GET", "/v1/sessions/"+cid, "")
		after1 := num(g, "retained_tokens")
		if after1 != float64(r1.Usage.PromptTokens+r1.Usage.CompletionTokens) || num(g, "turns") != 1 {
			t.Fatalf("after a turn of %d+%d tokens: %v", r1.Usage.PromptTokens, r1.Usage.CompletionTokens, g)
		}
		// The next request carries the whole conversation; what the session
		// holds is reused, the rest is new input.
		p.Messages = append(p.Messages, oa.AssistantMessage(r1.Choices[0].Message.Content), oa.UserMessage("And then?"))
		r2, err := c.Chat.Completions.New(ctxT(t), p, sess, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		// KV is reused by whole pages (16 tokens).
		if cached := r2.Usage.PromptTokensDetails.CachedTokens; cached < r1.Usage.PromptTokens/16*16 || cached == 0 {
			t.Fatalf("second turn reused %d tokens, the first prompt alone had %d", cached, r1.Usage.PromptTokens)
		}
		_, g = h.do(t, "GET", "/v1/sessions/"+cid, "")
		if num(g, "retained_tokens") != float64(r2.Usage.PromptTokens+r2.Usage.CompletionTokens) {
			t.Fatalf("retained %v after the second turn of %d+%d", num(g, "retained_tokens"), r2.Usage.PromptTokens, r2.Usage.CompletionTokens)
		}
		code, _ = h.do(t, "DELETE", "/v1/sessions/"+cid, "")
		if code != 200 {
			t.Fatalf("close: %d", code)
		}
	})

	t.Run("errors", func(t *testing.T) {
		cases := []struct {
			name, method, path, body string
			status                   int
			code                     string
		}{
			{"unknown session", "GET", "/v1/sessions/nope", "", 404, "session_not_found"},
			{"renew unknown", "PATCH", "/v1/sessions/nope", "", 404, "session_not_found"},
			{"unknown model", "POST", "/v1/sessions", `{"model":"nope"}`, 404, "model_not_found"},
			{"malformed", "POST", "/v1/sessions", `{"model":`, 400, "invalid_request"},
			{"unknown field", "POST", "/v1/sessions", `{"model":"tiny","colour":"red"}`, 400, "invalid_request"},
			{"zero lease", "POST", "/v1/sessions", `{"model":"tiny","lease_ms":"0"}`, 400, "invalid_request"},
			{"duplicate id", "POST", "/v1/sessions", `{"model":"tiny","session_id":"` + id + `"}`, 409, "duplicate_session"},
			{"chat on unknown session", "POST", "/v1/chat/completions", `{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"x"}],"session":{"id":"nope"}}`, 404, "session_not_found"},
			{"chat on a session, bad mode", "POST", "/v1/chat/completions", `{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"x"}],"session":{"id":"` + id + `","mode":"sideways"}}`, 400, "invalid_request"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				code, g := h.do(t, tc.method, tc.path, tc.body)
				if code != tc.status || errCode(g) != tc.code {
					t.Fatalf("%d %v, want %d %s", code, g, tc.status, tc.code)
				}
			})
		}
	})

	t.Run("close, tombstone, closed errors", func(t *testing.T) {
		code, g := h.do(t, "DELETE", "/v1/sessions/"+id, "")
		if code != 200 || g["status"] != "CLOSE_STATUS_CLOSED" {
			t.Fatalf("close: %d %v", code, g)
		}
		code, g = h.do(t, "DELETE", "/v1/sessions/"+id, "")
		if code != 200 || g["status"] != "CLOSE_STATUS_ALREADY_CLOSED" {
			t.Fatalf("close again: %d %v", code, g)
		}
		code, g = h.do(t, "GET", "/v1/sessions/"+id, "")
		if code != 200 || g["state"] != "GENERATION_SESSION_STATE_CLOSED" {
			t.Fatalf("tombstone: %d %v", code, g)
		}
		code, g = h.do(t, "PATCH", "/v1/sessions/"+id, "")
		if code != 410 || errCode(g) != "session_closed" {
			t.Fatalf("renew closed: %d %v", code, g)
		}
		code, g = h.do(t, "POST", "/v1/chat/completions", `{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"x"}],"session":{"id":"`+id+`"}}`)
		if code != 410 || errCode(g) != "session_closed" {
			t.Fatalf("chat on closed: %d %v", code, g)
		}
		h.idle(t, false)
	})
}

// TestAbortByRequestID: the X-Request-Id of a chat request is the id the
// gRPC Control/Abort takes; the aborted stream ends normally with
// finish_reason "abort".
func TestAbortByRequestID(t *testing.T) {
	h := startHarness(t, harnessOpts{template: llama2Template})
	conn, err := grpc.NewClient(h.s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	release := h.model.hold()
	defer release()
	c := h.client(option.WithHeader("X-Request-Id", "my-request-1"))
	before := h.e.Stats().Requests
	type result struct {
		finish string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		st := c.Chat.Completions.NewStreaming(context.Background(), oa.ChatCompletionNewParams{Model: "tiny", MaxCompletionTokens: oa.Int(500),
			Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("go on")}}, option.WithJSONSet("ignore_eos", true))
		var acc oa.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		r := result{err: st.Err()}
		if len(acc.Choices) == 1 {
			r.finish = string(acc.Choices[0].FinishReason)
		}
		done <- r
	}()
	eventually(t, "request admitted", func() bool { return h.e.Stats().Requests > before })
	resp, err := pb.NewControlClient(conn).Abort(ctxT(t), &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: "my-request-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != pb.AbortStatus_ABORT_STATUS_ABORTED {
		t.Fatalf("abort status %v", resp.GetStatus())
	}
	release()
	r := <-done
	if r.err != nil || r.finish != "abort" {
		t.Fatalf("stream ended with %q, %v", r.finish, r.err)
	}
	h.idle(t, false)
}

// TestReasoningSplit: with a template whose generation prompt opens a
// <think> block, generated text goes to reasoning_content (message and
// delta); split_reasoning: false keeps it in content.
func TestReasoningSplit(t *testing.T) {
	tmpl := `{% for m in messages %}{{ m.role }}: {{ m.content }}
{% endfor %}{% if add_generation_prompt %}assistant: <think>
{% endif %}`
	h := startHarness(t, harnessOpts{template: tmpl})
	body := func(split string, stream bool) string {
		s := `{"model":"tiny","max_tokens":6,"temperature":0,"ignore_eos":true,"stream":` + map[bool]string{true: "true", false: "false"}[stream] +
			`,"messages":[{"role":"user","content":"think first"}]`
		if split != "" {
			s += `,"split_reasoning":` + split
		}
		return s + "}"
	}
	code, plain := h.do(t, "POST", "/v1/chat/completions", body("false", false))
	if code != 200 {
		t.Fatalf("%d %v", code, plain)
	}
	text := plain["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	if text == "" || strings.Contains(text, "</think>") {
		t.Skipf("generated %q: cannot tell the sides apart", text)
	}
	code, split := h.do(t, "POST", "/v1/chat/completions", body("", false))
	msg := split["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if code != 200 || msg["content"] != "" || msg["reasoning_content"] != text {
		t.Fatalf("split: %d %v, want all of %q in reasoning_content", code, msg, text)
	}
	// Streamed: the deltas carry reasoning_content, never content text.
	req, _ := http.NewRequest("POST", h.base+"/v1/chat/completions", bytes.NewReader([]byte(body("", true))))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var reasoning strings.Builder
	for _, d := range chatDeltas(t, raw) {
		if d.content != "" {
			t.Fatalf("content delta %q inside a reasoning block", d.content)
		}
		reasoning.WriteString(d.reasoning)
	}
	if reasoning.String() != text || !strings.HasSuffix(string(raw), "data: [DONE]\n\n") {
		t.Fatalf("streamed reasoning %q, want %q; body ends %q", reasoning.String(), text, string(raw)[max(0, len(raw)-40):])
	}
}

// TestOpenAINodeSDK runs testdata/smoke.mjs, the same smoke run with the
// official `openai` npm package, against a live server. It needs node and
// testdata/node_modules (npm ci in server/openai/testdata); without them
// it skips, unless OENGINE_REQUIRE_NODE=1 (CI) makes it fail.
func TestOpenAINodeSDK(t *testing.T) {
	requireNode(t, "openai")
	h := startHarness(t, harnessOpts{template: llama2Template})
	if out := runNode(t, "smoke.mjs", h.base+"/v1", h.name); !strings.Contains(out, "ok") {
		t.Fatalf("smoke.mjs:\n%s", out)
	}
	h.idle(t, false)
}

// requireNode skips t without node or the npm package pkg in
// testdata/node_modules (npm ci in server/openai/testdata), unless
// OENGINE_REQUIRE_NODE=1 (CI) makes it fail.
func requireNode(t *testing.T, pkg string) {
	t.Helper()
	_, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join("testdata", "node_modules", pkg))
	if err != nil || modErr != nil {
		msg := "node or server/openai/testdata/node_modules missing (run npm ci there)"
		if os.Getenv("OENGINE_REQUIRE_NODE") == "1" {
			t.Fatal(msg + " and OENGINE_REQUIRE_NODE=1")
		}
		t.Skip(msg)
	}
}

// runNode runs `node script args...` in testdata (2 minutes at most) and
// returns its output; a failure ends t with it.
func runNode(t *testing.T, script string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir = "testdata"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

// TestBenchOpenAITarget: oengine's own load generator (bench serve
// --target openai) runs against this API: every request succeeds and the
// figures come from the streamed usage.
func TestBenchOpenAITarget(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	reps := runBench(t, bench.NewOpenAI(h.base, h.name), 2, 6)
	if len(reps) != 1 || reps[0].Succeeded != 6 || reps[0].OutTokens != 6*8 || bench.CheckErrorRate(reps, 0) != nil {
		t.Fatalf("reports %+v", reps)
	}
	h.idle(t, false)
}

// A failure after the stream started ends it with one error chunk and no
// [DONE]; the request metrics count the failure.
func TestStreamFailureAfterStart(t *testing.T) {
	h := startHarness(t, harnessOpts{template: llama2Template})
	body := `{"model":"tiny","max_tokens":500,"ignore_eos":true,"stream":true,"messages":[{"role":"user","content":"go"}]}`
	req, _ := http.NewRequestWithContext(ctxT(t), "POST", h.base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	buf := make([]byte, 1)
	var seen strings.Builder
	for !strings.Contains(seen.String(), `"content":"`) || strings.Count(seen.String(), "data: ") < 3 {
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatalf("stream ended early: %v\n%s", err, seen.String())
		}
		seen.WriteByte(buf[0])
	}
	boom := errors.New("injected device failure")
	h.model.fail.Store(&boom)
	rest, _ := io.ReadAll(resp.Body)
	h.model.fail.Store(nil)
	all := seen.String() + string(rest)
	var last string
	for _, line := range strings.Split(all, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			last = d
		}
	}
	var e errorBody
	if err := json.Unmarshal([]byte(last), &e); err != nil || e.Error.Code != "internal" || e.Error.Type != "server_error" {
		t.Fatalf("last data %q: %v", last, err)
	}
	if strings.Contains(all, "[DONE]") || strings.Count(all, `"error"`) != 1 {
		t.Fatalf("want exactly one error chunk and no [DONE]:\n%s", all)
	}
	h.idle(t, false)
}

// A model whose own template is hostile (it loops without bound) does not
// hang Enable: the template fails its probe under the limits and chat
// prompts use the plain fallback.
func TestHostileModelTemplateFallsBack(t *testing.T) {
	start := time.Now()
	h := startHarness(t, harnessOpts{template: `{% for i in range(100000000) %}x{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}`})
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Enable took %v", d)
	}
	c := h.client()
	r, err := c.Chat.Completions.New(ctxT(t), oa.ChatCompletionNewParams{Model: "tiny", MaxCompletionTokens: oa.Int(2),
		Messages: []oa.ChatCompletionMessageParamUnion{oa.SystemMessage("Be brief."), oa.UserMessage("Hi")}})
	if err != nil {
		t.Fatal(err)
	}
	plain := h.tok.Encode("System: Be brief.\n\nUser: Hi\n\nAssistant:", tokEncodeBOS)
	if int(r.Usage.PromptTokens) != len(plain) {
		t.Fatalf("prompt of %d tokens, the plain fallback has %d", r.Usage.PromptTokens, len(plain))
	}
}

// The lease, budget and busy rules over HTTP: an expired session answers
// 410 session_expired (and stays readable as a tombstone), the session cap
// 429 overloaded with Retry-After, a second mutating turn 409
// session_busy.
func TestSessionsLeaseBudgetBusy(t *testing.T) {
	clock := &clockT{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := startHarness(t, harnessOpts{template: llama2Template, clock: clock, maxSessions: 2})
	open := func() string {
		code, s := h.do(t, "POST", "/v1/sessions", `{"model":"tiny","lease_ms":"60000"}`)
		if code != http.StatusCreated {
			t.Fatalf("open: %d %v", code, s)
		}
		return s["ref"].(map[string]any)["session_id"].(string)
	}
	a, b := open(), open()

	t.Run("budget", func(t *testing.T) {
		req, _ := http.NewRequest("POST", h.base+"/v1/sessions", strings.NewReader(`{"model":"tiny"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var g map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&g)
		resp.Body.Close()
		if resp.StatusCode != 429 || errCode(g) != "overloaded" || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("third session: %d %v Retry-After %q", resp.StatusCode, g, resp.Header.Get("Retry-After"))
		}
	})

	t.Run("busy", func(t *testing.T) {
		release := h.model.hold()
		defer release()
		before := h.e.Stats().Requests
		chat := `{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"x"}],"session":{"id":"` + b + `"}}`
		done := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest("POST", h.base+"/v1/chat/completions", strings.NewReader(chat))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		eventually(t, "first turn admitted", func() bool { return h.e.Stats().Requests > before })
		code, g := h.do(t, "POST", "/v1/chat/completions", chat)
		if code != 409 || errCode(g) != "session_busy" {
			t.Fatalf("second turn: %d %v", code, g)
		}
		release()
		if code := <-done; code != 200 {
			t.Fatalf("first turn: %d", code)
		}
	})

	t.Run("expired", func(t *testing.T) {
		clock.Advance(2 * time.Minute)
		code, g := h.do(t, "PATCH", "/v1/sessions/"+a, "")
		if code != 410 || errCode(g) != "session_expired" {
			t.Fatalf("renew expired: %d %v", code, g)
		}
		code, g = h.do(t, "POST", "/v1/chat/completions", `{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"x"}],"session":{"id":"`+a+`"}}`)
		if code != 410 || errCode(g) != "session_expired" {
			t.Fatalf("chat on expired: %d %v", code, g)
		}
		code, g = h.do(t, "GET", "/v1/sessions/"+a, "")
		if code != 200 || g["state"] != "GENERATION_SESSION_STATE_EXPIRED" {
			t.Fatalf("tombstone: %d %v", code, g)
		}
		code, g = h.do(t, "DELETE", "/v1/sessions/"+a, "")
		if code != 200 || g["status"] != "CLOSE_STATUS_EXPIRED" {
			t.Fatalf("close expired: %d %v", code, g)
		}
	})
	h.idle(t, true)
}

// A reader that stops reading pauses its sequence (the engine's event
// queue fills while the write blocks) instead of buffering the output, and
// the stream completes once it reads again.
func TestSlowReaderPauses(t *testing.T) {
	h := startHarness(t, harnessOpts{template: llama2Template, writeBuffer: 4096, eventQueue: 8})
	d := smallReceiveDialer()
	if d == nil {
		t.Skip("no portable way to shrink the receive buffer here")
	}
	conn, err := d.Dial("tcp", h.s.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"tiny","max_tokens":400,"temperature":0,"ignore_eos":true,"stream":true,"messages":[{"role":"user","content":"go"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	before := h.e.Stats().Pauses
	start := time.Now()
	eventually(t, "the engine pauses the sequence", func() bool { return h.e.Stats().Pauses > before })
	t.Logf("paused after %v", time.Since(start))
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(all, []byte("data: [DONE]\n\n")) || !bytes.Contains(all, []byte(`"finish_reason":"length"`)) {
		t.Fatalf("stream did not complete: ...%q", all[max(0, len(all)-200):])
	}
	h.idle(t, false)
}

// With API keys: no key is 401 in OpenAI's shape (embeddings too);
// requests, sessions and Abort belong to the key that made them (another
// key gets 404).
func TestAPIKeysAndOwnership(t *testing.T) {
	h := startHarness(t, harnessOpts{template: llama2Template})
	keys, err := server.NewKeys([]server.Key{{Name: "alice", Secret: "alice-secret-0123456789"}, {Name: "bob", Secret: "bob-secret-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	h.s.SetKeys(keys)
	anon := h.client()
	_, err = anon.Models.List(ctxT(t))
	var ae *oa.Error
	if !errors.As(err, &ae) || ae.StatusCode != 401 || ae.Type != "authentication_error" {
		t.Fatalf("no key: %v", err)
	}
	_, err = embed(anon, ctxT(t), oa.EmbeddingNewParams{Model: "tiny", Input: oa.EmbeddingNewParamsInputUnion{OfString: oa.String("hi")}})
	if !errors.As(err, &ae) || ae.StatusCode != 401 {
		t.Fatalf("embeddings without a key: %v", err)
	}
	alice := h.client(option.WithAPIKey("alice-secret-0123456789"))
	if e, err := embed(alice, ctxT(t), oa.EmbeddingNewParams{Model: "tiny", Input: oa.EmbeddingNewParamsInputUnion{OfString: oa.String("hi")}}); err != nil || len(e.Data) != 1 {
		t.Fatalf("alice's embeddings: %v", err)
	}
	r, err := alice.Chat.Completions.New(ctxT(t), oa.ChatCompletionNewParams{Model: "tiny", MaxCompletionTokens: oa.Int(2),
		Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("hi")}})
	if err != nil || len(r.Choices) != 1 {
		t.Fatalf("alice: %v", err)
	}
	as := func(key, method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(ctxT(t), method, h.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	code, s := as("alice-secret-0123456789", "POST", "/v1/sessions", `{"model":"tiny","session_id":"shared-name"}`)
	if code != 201 || s["ref"].(map[string]any)["session_id"] != "shared-name" {
		t.Fatalf("alice opens: %d %v", code, s)
	}
	if code, g := as("bob-secret-0123456789", "GET", "/v1/sessions/shared-name", ""); code != 404 || errCode(g) != "session_not_found" {
		t.Fatalf("bob reads alice's session: %d %v", code, g)
	}
	// Client-chosen ids are per principal: bob may use the same name.
	if code, g := as("bob-secret-0123456789", "POST", "/v1/sessions", `{"model":"tiny","session_id":"shared-name"}`); code != 201 {
		t.Fatalf("bob opens his own: %d %v", code, g)
	}
	if code, g := as("bob-secret-0123456789", "POST", "/v1/chat/completions",
		`{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"x"}],"session":{"id":"shared-name"}}`); code != 200 {
		t.Fatalf("bob's chat in his session: %d %v", code, g)
	}
	for _, key := range []string{"alice-secret-0123456789", "bob-secret-0123456789"} {
		if code, _ := as(key, "DELETE", "/v1/sessions/shared-name", ""); code != 200 {
			t.Fatalf("close: %d", code)
		}
	}
	h.idle(t, false)
}
