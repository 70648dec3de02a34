package openai

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// decodeRefusal checks the shape of a refusal: a 4xx status, an OpenAI
// error body that is valid JSON with a message.
func decodeRefusal(t *testing.T, aerr *apiError) {
	t.Helper()
	if aerr.status < 400 || aerr.status > 499 || aerr.msg == "" || aerr.code == "" {
		t.Fatalf("refusal %+v", aerr)
	}
	b, err := json.Marshal(aerr.body())
	if err != nil || !json.Valid(b) {
		t.Fatalf("error body %s: %v", b, err)
	}
}

func fuzzBody(body []byte) (*httptest.ResponseRecorder, *http.Request) {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	return httptest.NewRecorder(), r
}

// FuzzChatRequest decodes arbitrary bodies the way POST
// /v1/chat/completions does (readJSON, engineRequest, messages): it never
// panics, refuses with a 4xx OpenAI error, and what it accepts is a sane
// engine request over valid UTF-8 messages.
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":[{"type":"text","text":"a"}]},{"role":"user","content":null}],"n":2,"stop":["x","y"]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}],"max_tokens":0}`,
		`{"messages":[],"stop":"\u0000","seed":-1,"temperature":-3}`,
		`{"messages":[{"role":"tool","content":[{"type":"image_url"}]}],"session":{"id":"s","mode":"append"}}`,
		`{"messages":[{"role":"user","content":"x"}]} {}`, `[]`, `null`, "{\"messages\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req chatRequest
		w, r := fuzzBody(body)
		if aerr := readJSON(w, r, 1<<20, &req); aerr != nil {
			decodeRefusal(t, aerr)
			return
		}
		if !utf8.Valid(body) {
			t.Fatal("accepted a body that is not UTF-8")
		}
		maxTokens := req.MaxCompletionTokens
		if maxTokens == nil {
			maxTokens = req.MaxTokens
		}
		er, aerr := req.engineRequest(maxTokens)
		if aerr != nil {
			decodeRefusal(t, aerr)
			return
		}
		if er.N < 0 || er.MaxTokens < 0 || er.MinTokens < 0 {
			t.Fatalf("accepted counts n=%d max=%d min=%d", er.N, er.MaxTokens, er.MinTokens)
		}
		for _, s := range er.Stop.Strings {
			if s == "" {
				t.Fatal("accepted an empty stop string")
			}
		}
		msgs, aerr := messages(req.Messages)
		if aerr != nil {
			decodeRefusal(t, aerr)
			return
		}
		if len(msgs) == 0 {
			t.Fatal("accepted no messages")
		}
		for _, m := range msgs {
			if !utf8.ValidString(m.Content) {
				t.Fatalf("message content %q is not UTF-8", m.Content)
			}
		}
	})
}

// FuzzCompletionPrompt decodes arbitrary prompt values of POST
// /v1/completions: a string, strings, token ids or token-id lists; never
// an empty list, never a panic.
func FuzzCompletionPrompt(f *testing.F) {
	for _, s := range []string{`"hi"`, `["a","b"]`, `[1,2,3]`, `[[1],[2,3]]`, `[[]]`, `[]`, `null`, `{"a":1}`, `[1,"a"]`, `[-5]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ps, aerr := prompts(json.RawMessage(raw))
		if aerr != nil {
			decodeRefusal(t, aerr)
			return
		}
		if len(ps) == 0 {
			t.Fatalf("accepted %q as no prompt", raw)
		}
		for i, p := range ps {
			if p.ids != nil && len(p.ids) == 0 {
				t.Fatalf("prompt %d of %q is an empty id list", i, raw)
			}
		}
	})
}
