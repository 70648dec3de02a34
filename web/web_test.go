package web_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"oengine/web"
)

// TestRoutes: the page and its assets are open without a key, with a
// same-origin content security policy; the info route needs the key and
// reports the served model and the live load.
func TestRoutes(t *testing.T) {
	c := startConsole(t, consoleOpts{key: "s3cret"})
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/", "text/html", `src="/web/app.js"`},
		{"/web/app.js", "javascript", "/session/"},
		{"/web/style.css", "text/css", ".think"},
	} {
		resp, err := http.Get(c.base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s without a key: %d", tc.path, resp.StatusCode)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, tc.ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", tc.path, ct, tc.ctype)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", tc.path, csp)
		}
		if !strings.Contains(string(b), tc.contains) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
		}
	}
	resp, err := http.Get(c.base + "/nothing-here")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing-here: %d, want 404 (the page is served at / only)", resp.StatusCode)
	}

	resp, err = http.Get(c.base + "/web/api/info")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("info without a key: %d, want 401", resp.StatusCode)
	}
	resp, err = c.do("GET", "/web/api/info", "")
	if err != nil {
		t.Fatal(err)
	}
	var info web.Info
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if info.InstanceID != c.s.InstanceID() || info.Version != "test" || !info.AuthEnabled || !info.Sessions ||
		len(info.Models) != 1 || info.Models[0].Name != "think-test" || info.Models[0].ContextLen != 4096 ||
		info.Models[0].DefaultLeaseMs != 600000 || info.Load.KVPagesTotal != 512 {
		t.Fatalf("info: %+v", info)
	}
}

// TestScriptedModel checks the harness the browser test relies on: a chat
// turn continuing a session streams the reasoning apart from the answer,
// and the SSE route shows progress (thinking) then the translation.
func TestScriptedModel(t *testing.T) {
	c := startConsole(t, consoleOpts{})
	resp, err := c.do("POST", "/v1/sessions", `{"model":"think-test"}`)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Ref struct {
			SessionID string `json:"session_id"`
		} `json:"ref"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("open: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	id := s.Ref.SessionID

	resp, err = c.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi there"}],"stream":true,"session":{"id":"`+id+`"}}`)
	if err != nil {
		t.Fatal(err)
	}
	var reasoning, content strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatal(err)
		}
		for _, x := range ch.Choices {
			reasoning.WriteString(x.Delta.ReasoningContent)
			content.WriteString(x.Delta.Content)
		}
	}
	resp.Body.Close()
	if strings.TrimSpace(reasoning.String()) != chatReasoning || strings.TrimSpace(content.String()) != chatAnswer {
		t.Fatalf("chat: reasoning %q content %q", reasoning.String(), content.String())
	}

	resp, err = c.do("POST", "/session/"+id+"/generate", `{"prompt":"Translate the following text into French. Reply with the translation only.\n\n`+chatReasoning+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	if !strings.Contains(body, "event: thinking") || !strings.Contains(body, "event: done") {
		t.Fatalf("SSE: %s", body)
	}
	var text strings.Builder
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var ev struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal([]byte(d), &ev)
			text.WriteString(ev.Text)
		}
	}
	if strings.TrimSpace(text.String()) != transAnswer {
		t.Fatalf("SSE text %q, want %q", text.String(), transAnswer)
	}
	c.ledgerClean(t)
}
