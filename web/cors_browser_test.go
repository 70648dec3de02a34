package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestCORSInBrowser: a page of another origin calls the OpenAI API from
// Chromium. With its origin in --cors-origin the browser's preflight (an
// API key in Authorization, an SDK's own header) and the request pass and
// the page reads the reply; a page of an origin not listed is refused by
// the browser, and its request never runs.
func TestCORSInBrowser(t *testing.T) {
	const key = "s3cret-web-key"
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<!doctype html><title>another site</title><p>app</p>")
	})
	app, evil := httptest.NewServer(page), httptest.NewServer(page)
	defer app.Close()
	defer evil.Close()
	c := startConsole(t, consoleOpts{key: key, corsOrigins: []string{app.URL}})
	b := newBrowser(t)
	call := fmt.Sprintf(`window.__r = undefined;
		fetch(%q + '/v1/chat/completions', {method: 'POST',
			headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer %s', 'X-Stainless-Lang': 'js'},
			body: JSON.stringify({model: 'think-test', max_tokens: 2, messages: [{role: 'user', content: 'hi'}]})})
		.then(r => r.json()).then(j => { window.__r = 'ok:' + j.object }, e => { window.__r = 'err:' + e.name })`, c.base, key)
	result := func() string {
		deadline := time.Now().Add(30 * time.Second)
		for !b.truth(`window.__r !== undefined`) {
			if time.Now().After(deadline) {
				t.Fatal("the page's fetch did not settle")
			}
			time.Sleep(20 * time.Millisecond)
		}
		return b.str(`window.__r`)
	}

	b.run(chromedp.Navigate(app.URL + "/"))
	b.exec(call)
	if got := result(); got != "ok:chat.completion" {
		t.Fatalf("from the allowed origin: %s", got)
	}
	before := c.e.Stats().Requests
	b.run(chromedp.Navigate(evil.URL + "/"))
	b.exec(call)
	if got := result(); !strings.HasPrefix(got, "err:TypeError") {
		t.Fatalf("from an origin not allowed: %s", got)
	}
	if n := c.e.Stats().Requests - before; n != 0 {
		t.Fatalf("%d requests from the origin not allowed reached the engine", n)
	}
}
