package sse

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"oengine/engine"
	"oengine/model/chat"
	"oengine/model/tokenizer"
	"oengine/sessions"
)

const sseScript = "<think>Let me plan this.</think>Bonjour le monde, ça va?"

// usageLog records the engine's own usage per request id.
type usageLog struct {
	mu sync.Mutex // protects m
	m  map[string]engine.RequestStats
}

func (u *usageLog) hooks() engine.Hooks {
	u.m = map[string]engine.RequestStats{}
	return engine.Hooks{OnRequestDone: func(rs engine.RequestStats) {
		u.mu.Lock()
		u.m[rs.ID] = rs
		u.mu.Unlock()
	}}
}

func (u *usageLog) get(id string) (engine.RequestStats, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	rs, ok := u.m[id]
	return rs, ok
}

// checkSSEStream verifies the event grammar: status 200 and the event-stream
// type, ids 1, 2, 3, ..., started first, JSON data, known names, exactly one
// terminal event and nothing after it.
func checkSSEStream(t *testing.T, r sseResult) {
	t.Helper()
	if r.status != http.StatusOK || r.err != nil {
		t.Fatalf("status %d, err %v, body %s", r.status, r.err, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	if len(r.events) < 2 || r.events[0].Name != "started" {
		t.Fatalf("events %v", r.names())
	}
	terminal := 0
	for i, ev := range r.events {
		if ev.ID != strconv.Itoa(i+1) {
			t.Fatalf("event %d has id %q", i, ev.ID)
		}
		if !json.Valid([]byte(ev.Data)) {
			t.Fatalf("event %d data %q is not JSON", i, ev.Data)
		}
		switch ev.Name {
		case "done", "error":
			terminal++
			if i != len(r.events)-1 {
				t.Fatalf("terminal event %s at %d of %d: %v", ev.Name, i, len(r.events), r.names())
			}
		case "started", "thinking", "delta":
		default:
			t.Fatalf("unknown event %q", ev.Name)
		}
	}
	if terminal != 1 {
		t.Fatalf("%d terminal events: %v", terminal, r.names())
	}
}

func TestSSEStreamOrderAndUsage(t *testing.T) {
	tok := sseVocab(t)
	var usage usageLog
	e := newScriptEngine(t, scriptFor(tok, sseScript), sseEngineOpts{name: "main", hooks: usage.hooks()})
	h := startSSE(t, sseHarnessOpts{}, e)
	sess := h.open("main", "You are a translator.")
	wantText, wantBlocks := chat.StripReasoning(sseScript, false)
	prompt := "Translate: good morning"
	wantInput := len(tok.Encode(prompt, tokenizer.EncodeOptions{AddSpecial: true}))
	wantOutput := len(tok.Encode(sseScript, tokenizer.EncodeOptions{Continuation: true})) + 1 // + EOS

	runs := 24
	if testing.Short() {
		runs = 8
	}
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			if i%3 == 0 {
				time.Sleep(time.Duration(i) * time.Millisecond)
			}
			r := h.generate(context.Background(), sess.Ref.SessionID, prompt)
			checkSSEStream(t, r)
			var st sseStarted
			r.events[0].decode(t, &st)
			if st.Model != "main" || st.RequestID == "" {
				t.Errorf("started %+v", st)
			}
			if got := r.text(t); got != wantText {
				t.Errorf("deltas %q, want %q", got, wantText)
			}
			thinking := 0
			for j, ev := range r.events {
				if ev.Name == "thinking" {
					thinking++
					if ev.Data != "{}" {
						t.Errorf("thinking carries %s", ev.Data)
					}
					if slices.Contains(r.names()[:j], "delta") {
						t.Errorf("thinking after a delta: %v", r.names())
					}
				}
			}
			if thinking != wantBlocks {
				t.Errorf("%d thinking events, want %d", thinking, wantBlocks)
			}
			var d sseDone
			r.events[len(r.events)-1].decode(t, &d)
			// The engine's hook runs on its step loop, possibly after the
			// terminal event reached the client.
			var rs engine.RequestStats
			waitFor(t, "the engine's usage", func() bool {
				var ok bool
				rs, ok = usage.get(st.RequestID)
				return ok
			})
			if d.InputTokens != rs.PromptTokens || d.OutputTokens != rs.CompletionTokens || d.FinishReason != "stop" {
				t.Errorf("done %+v, engine usage prompt %d completion %d", d, rs.PromptTokens, rs.CompletionTokens)
			}
			if d.InputTokens != wantInput || d.OutputTokens != wantOutput {
				t.Errorf("done %+v, want input %d output %d", d, wantInput, wantOutput)
			}
		})
	}
	wg.Wait()
	if got := h.outcomeCount("done"); got != float64(runs) {
		t.Fatalf("outcome done = %v, want %d", got, runs)
	}
	waitFor(t, "pages released", func() bool { return e.Cache().Stats().InUse == 0 })
	if err := e.Cache().CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}

// A length-limited generation ends with finish_reason "length" and the
// configured budget.
func TestSSELengthAndKeepAlive(t *testing.T) {
	tok := sseVocab(t)
	m := fillerModel(tok)
	m.delay = 25 * time.Millisecond
	e := newScriptEngine(t, m, sseEngineOpts{name: "main"})
	h := startSSE(t, sseHarnessOpts{cfg: Config{MaxTokens: 6, KeepAlive: 10 * time.Millisecond}}, e)
	sess := h.open("main", "hello")
	r := h.generate(context.Background(), sess.Ref.SessionID, "count")
	checkSSEStream(t, r)
	var d sseDone
	r.events[len(r.events)-1].decode(t, &d)
	if d.FinishReason != "length" || d.OutputTokens != 6 {
		t.Fatalf("done %+v", d)
	}
	if got, want := r.text(t), strings.Repeat(" a", 6); got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
	if r.comments == 0 {
		t.Fatal("no keep-alive comment with 25 ms between tokens and a 10 ms interval")
	}
}

// A template whose generation prompt opens a reasoning block: the filter
// starts inside it; the prompt goes through the template.
func TestSSEChatTemplateReasoningPrompt(t *testing.T) {
	tok := sseVocab(t)
	const tmpl = `{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}
{% endfor %}{% if add_generation_prompt %}[assistant] <think>
{% endif %}`
	e := newScriptEngine(t, scriptFor(tok, "secret reasoning</think>Visible answer."), sseEngineOpts{name: "main"})
	h := startSSE(t, sseHarnessOpts{cfg: Config{}, chatTemplates: map[string]string{"main": tmpl}}, e)
	sess := h.open("main", "sys")
	r := h.generate(context.Background(), sess.Ref.SessionID, "question </s> here")
	checkSSEStream(t, r)
	if got := strings.Join(r.names(), ","); !strings.HasPrefix(got, "started,thinking,delta") {
		t.Fatalf("events %s", got)
	}
	if got := r.text(t); got != "Visible answer." {
		t.Fatalf("text %q", got)
	}
	enc, err := chat.NewEncoder(tok, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	p, err := enc.Encode("question </s> here")
	if err != nil {
		t.Fatal(err)
	}
	var d sseDone
	r.events[len(r.events)-1].decode(t, &d)
	if d.InputTokens != len(p.Tokens) {
		t.Fatalf("input tokens %d, want %d (templated)", d.InputTokens, len(p.Tokens))
	}
	if slices.Contains(p.Tokens[1:], tok.EOS()) || p.Tokens[0] != tok.BOS() || slices.Contains(p.Tokens[1:], tok.BOS()) {
		t.Fatalf("user </s> was special-parsed or BOS doubled: %v", p.Tokens)
	}
}

// The session is byte-for-byte the same before and after side generations.
func TestSSEIsolation(t *testing.T) {
	tok := sseVocab(t)
	e := newScriptEngine(t, scriptFor(tok, sseScript), sseEngineOpts{name: "main"})
	h := startSSE(t, sseHarnessOpts{}, e)
	sess := h.open("main", "You are a helpful translator. Keep answers short and exact.")
	ref := sess.Ref
	before, err := h.mgr.Get(ref, true)
	if err != nil {
		t.Fatal(err)
	}
	pinned := e.Cache().Stats().Pinned
	for range 3 {
		h.clock.Advance(time.Minute) // the lease clock runs; the route must not renew it
		checkSSEStream(t, h.generate(context.Background(), ref.SessionID, "You are a helpful translator. Say hi"))
	}
	after, err := h.mgr.Get(ref, true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("session changed:\nbefore %+v\nafter  %+v", before, after)
	}
	if before.PinnedPages == 0 || before.RetainedTokens == 0 {
		t.Fatalf("session has nothing to compare: %+v", before)
	}
	if got := e.Cache().Stats().Pinned; got != pinned {
		t.Fatalf("pinned pages %d, was %d", got, pinned)
	}
}

func TestSSEFallback(t *testing.T) {
	tok := sseVocab(t)
	newPair := func(t *testing.T) (*engine.Engine, *engine.Engine, *scriptModel) {
		main := newScriptEngine(t, scriptFor(tok, "from main"), sseEngineOpts{name: "main"})
		fm := fillerModel(tok)
		fm.delay = 2 * time.Millisecond
		fast := newScriptEngine(t, fm, sseEngineOpts{name: "fast"})
		return main, fast, fm
	}
	startedModel := func(t *testing.T, r sseResult) string {
		t.Helper()
		checkSSEStream(t, r)
		var st sseStarted
		r.events[0].decode(t, &st)
		return st.Model
	}
	t.Run("fast model configured and loaded", func(t *testing.T) {
		main, fast, _ := newPair(t)
		h := startSSE(t, sseHarnessOpts{cfg: Config{FastModel: "fast", MaxTokens: 4}}, main, fast)
		sess := h.open("main", "ctx")
		r := h.generate(context.Background(), sess.Ref.SessionID, "hi")
		if m := startedModel(t, r); m != "fast" || r.text(t) != " a a a a" {
			t.Fatalf("model %s, text %q", m, r.text(t))
		}
	})
	t.Run("fast model absent (failed to load)", func(t *testing.T) {
		main, _, _ := newPair(t)
		h := startSSE(t, sseHarnessOpts{cfg: Config{FastModel: "fast"}}, main)
		sess := h.open("main", "ctx")
		r := h.generate(context.Background(), sess.Ref.SessionID, "hi")
		if m := startedModel(t, r); m != "main" || r.text(t) != "from main" {
			t.Fatalf("model %s, text %q", m, r.text(t))
		}
	})
	t.Run("fast model broken", func(t *testing.T) {
		main, fast, _ := newPair(t)
		h := startSSE(t, sseHarnessOpts{cfg: Config{FastModel: "fast"}}, main, fast)
		sess := h.open("main", "ctx")
		fast.Close() // refuses every request from now on
		r := h.generate(context.Background(), sess.Ref.SessionID, "hi")
		if m := startedModel(t, r); m != "main" || r.text(t) != "from main" {
			t.Fatalf("model %s, text %q", m, r.text(t))
		}
	})
	t.Run("fault after deltas ends with error, no switch", func(t *testing.T) {
		main, fast, fm := newPair(t)
		h := startSSE(t, sseHarnessOpts{cfg: Config{FastModel: "fast", MaxTokens: 500}}, main, fast)
		sess := h.open("main", "ctx")
		resp, err := h.post(context.Background(), nil, sess.Ref.SessionID, promptBody("hi"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rd := newSSEBodyReader(resp.Body)
		var events []sseEvent
		for {
			ev, err := rd.next()
			if err != nil {
				if err != io.EOF {
					t.Fatal(err)
				}
				break
			}
			events = append(events, ev)
			if ev.Name == "delta" && len(events) == 3 {
				fm.setFail(errors.New("device lost"))
			}
		}
		res := sseResult{status: resp.StatusCode, header: resp.Header, events: events}
		if m := startedModel(t, res); m != "fast" {
			t.Fatalf("started on %s", m)
		}
		last := events[len(events)-1]
		var ee sseErrorEvent
		last.decode(t, &ee)
		if last.Name != "error" || ee.Code != "internal" || ee.Retryable {
			t.Fatalf("last event %s %+v", last.Name, ee)
		}
		if strings.Contains(res.text(t), "main") {
			t.Fatal("switched to the main model after deltas")
		}
		if main.Stats().Requests != 1 { // the session's initial prefill only
			t.Fatalf("main engine ran %d requests", main.Stats().Requests)
		}
		if got := h.outcomeCount("error"); got != 1 {
			t.Fatalf("outcome error = %v", got)
		}
	})
}

func newSSEBodyReader(r io.Reader) *sseReader { return &sseReader{br: bufio.NewReader(r)} }

// The route answers every contract violation before streaming, with its
// status and error body.
func TestSSEValidation(t *testing.T) {
	tok := sseVocab(t)
	e := newScriptEngine(t, scriptFor(tok, "ok"), sseEngineOpts{name: "main"})
	h := startSSE(t, sseHarnessOpts{cfg: Config{CORSOrigins: []string{"https://app.example"}}}, e)
	expired := h.open("main", "will expire")
	h.clock.Advance(11 * time.Minute) // past the default 10 min lease
	live := h.open("main", "live").Ref.SessionID
	closed := h.open("main", "closed").Ref.SessionID
	if _, _, err := h.mgr.CloseSession(sessions.Ref{SessionID: closed, Owner: h.s.InstanceID()}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", MaxBodyBytes)
	type tc struct {
		name    string
		method  string
		id      string
		body    string
		chunked bool   // hide the length (no Content-Length)
		ctype   string // Content-Type; "": application/json, "-": none
		status  int
		code    string
	}
	cases := []tc{
		{name: "wrong method", method: http.MethodGet, id: live, status: 405, code: "invalid_request"},
		{name: "put", method: http.MethodPut, id: live, body: `{"prompt":"x"}`, status: 405, code: "invalid_request"},
		{name: "malformed JSON", id: live, body: `{"prompt": "x"`, status: 400, code: "invalid_request"},
		{name: "empty body", id: live, body: ``, status: 400, code: "invalid_request"},
		{name: "not an object", id: live, body: `["x"]`, status: 400, code: "invalid_request"},
		{name: "trailing data", id: live, body: `{"prompt":"x"} {}`, status: 400, code: "invalid_request"},
		{name: "extra field model", id: live, body: `{"prompt":"x","model":"fast"}`, status: 400, code: "invalid_request"},
		{name: "extra field max_tokens", id: live, body: `{"prompt":"x","max_tokens":5}`, status: 400, code: "invalid_request"},
		{name: "field name case", id: live, body: `{"Prompt":"x"}`, status: 400, code: "invalid_request"},
		{name: "duplicate prompt", id: live, body: `{"prompt":"x","prompt":"y"}`, status: 400, code: "invalid_request"},
		{name: "missing prompt", id: live, body: `{}`, status: 400, code: "invalid_request"},
		{name: "prompt null", id: live, body: `{"prompt":null}`, status: 400, code: "invalid_request"},
		{name: "prompt number", id: live, body: `{"prompt":5}`, status: 400, code: "invalid_request"},
		{name: "prompt object", id: live, body: `{"prompt":{"text":"x"}}`, status: 400, code: "invalid_request"},
		{name: "empty prompt", id: live, body: `{"prompt":""}`, status: 400, code: "invalid_request"},
		{name: "invalid UTF-8", id: live, body: "{\"prompt\":\"a\xff\xfeb\"}", status: 400, code: "invalid_request"},
		{name: "unpaired surrogate escape", id: live, body: `{"prompt":"a\ud800b"}`, status: 400, code: "invalid_request"},
		{name: "lone low surrogate", id: live, body: `{"prompt":"\udc00"}`, status: 400, code: "invalid_request"},
		{name: "prompt over 32 KiB", id: live, body: promptBody(strings.Repeat("a", MaxPromptBytes+1)), status: 413, code: "payload_too_large"},
		{name: "prompt over 32 KiB in UTF-8 bytes", id: live, body: promptBody(strings.Repeat("é", MaxPromptBytes/2+1)), status: 413, code: "payload_too_large"},
		{name: "body over 256 KiB", id: live, body: `{"prompt":"` + big + `"}`, status: 413, code: "payload_too_large"},
		{name: "body over 256 KiB chunked", id: live, body: `{"prompt":"` + big + `"}`, chunked: true, status: 413, code: "payload_too_large"},
		{name: "prompt at 32 KiB beyond the context", id: live, body: promptBody(strings.Repeat("a ", MaxPromptBytes/2)), status: 400, code: "context_length_exceeded"},
		{name: "unknown session", id: "gs-nope", body: `{"prompt":"x"}`, status: 404, code: "session_not_found"},
		{name: "expired session", id: expired.Ref.SessionID, body: `{"prompt":"x"}`, status: 410, code: "session_expired"},
		{name: "closed session", id: closed, body: `{"prompt":"x"}`, status: 410, code: "session_closed"},
		// Issue 17 point 10: only JSON bodies (before the fix each of these streamed).
		{name: "content type text/plain", id: live, body: `{"prompt":"x"}`, ctype: "text/plain", status: 415, code: "unsupported_media_type"},
		{name: "content type form", id: live, body: `{"prompt":"x"}`, ctype: "application/x-www-form-urlencoded", status: 415, code: "unsupported_media_type"},
		{name: "no content type", id: live, body: `{"prompt":"x"}`, ctype: "-", status: 415, code: "unsupported_media_type"},
		{name: "json with charset", id: live, body: `{"prompt":"x"`, ctype: "application/json; charset=utf-8", status: 400, code: "invalid_request"},
	}
	run := func(t *testing.T, c tc) {
		method := c.method
		if method == "" {
			method = http.MethodPost
		}
		var body io.Reader = strings.NewReader(c.body)
		if c.chunked {
			body = io.MultiReader(strings.NewReader(c.body))
		}
		req, err := http.NewRequest(method, h.url(c.id), body)
		if err != nil {
			t.Fatal(err)
		}
		switch c.ctype {
		case "":
			req.Header.Set("Content-Type", "application/json")
		case "-":
		default:
			req.Header.Set("Content-Type", c.ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		checkErrorResponse(t, resp, c.status, c.code)
		if c.status == 405 && resp.Header.Get("Allow") != "POST, OPTIONS" {
			t.Fatalf("Allow %q", resp.Header.Get("Allow"))
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { run(t, c) })
	}
	t.Run("CORS preflight allowed origin", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodOptions, h.url(live), nil)
		req.Header.Set("Origin", "https://app.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
			!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") ||
			!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "content-type") {
			t.Fatalf("preflight %d %v", resp.StatusCode, resp.Header)
		}
	})
	t.Run("CORS preflight other origin", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodOptions, h.url(live), nil)
		req.Header.Set("Origin", "https://evil.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		checkErrorResponse(t, resp, 403, "invalid_request")
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatal("CORS header for a foreign origin")
		}
	})
	t.Run("CORS POST from allowed origin streams with the header", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, h.url(live), strings.NewReader(`{"prompt":"x"}`))
		req.Header.Set("Origin", "https://app.example")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(string(b), "event: done") {
			t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, b)
		}
	})
	t.Run("same-origin POST needs no CORS origin", func(t *testing.T) {
		// A page served by this server (the web console) posts with
		// Origin set to the server's own origin.
		req, _ := http.NewRequest(http.MethodPost, h.url(live), strings.NewReader(`{"prompt":"x"}`))
		req.Header.Set("Origin", h.base)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(string(b), "event: done") {
			t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, b)
		}
	})
	t.Run("draining", func(t *testing.T) {
		h.s.Drain()
		resp, err := h.post(context.Background(), nil, live, `{"prompt":"x"}`)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		checkErrorResponse(t, resp, 503, "draining")
		if resp.Header.Get("Retry-After") == "" {
			t.Fatal("no Retry-After")
		}
	})
	if got := h.outcomeCount("invalid_request"); got < 15 {
		t.Fatalf("outcome invalid_request = %v", got)
	}
}

func checkErrorResponse(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	var eb struct {
		Error map[string]any `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil {
		t.Fatalf("error body %s: %v", b, err)
	}
	if eb.Error["code"] != code || eb.Error["message"] == "" || len(eb.Error) != 2 {
		t.Fatalf("error body %s, want code %s", b, code)
	}
}

// A full queue answers 429 with Retry-After before streaming.
func TestSSEOverloaded(t *testing.T) {
	tok := sseVocab(t)
	m := fillerModel(tok)
	e := newScriptEngine(t, m, sseEngineOpts{name: "main", maxRunning: 1, maxWaiting: 1})
	h := startSSE(t, sseHarnessOpts{cfg: Config{MaxTokens: 8}}, e)
	id := h.open("main", "ctx").Ref.SessionID
	m.gated.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var bodies []io.Closer
	defer func() {
		m.gated.Store(false)
		close(m.gate)
		for _, b := range bodies {
			b.Close()
		}
	}()
	for i := 0; ; i++ {
		resp, err := h.post(ctx, nil, id, `{"prompt":"x"}`)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			bodies = append(bodies, resp.Body)
			if i > 4 {
				t.Fatal("no 429 after 5 accepted requests with max-running 1 and max-waiting 1")
			}
			continue
		}
		defer resp.Body.Close()
		if resp.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
		checkErrorResponse(t, resp, http.StatusTooManyRequests, "overloaded")
		break
	}
}
