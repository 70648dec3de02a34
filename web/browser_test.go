package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// chromium finds the system browser (Debian's chromium package). Without
// one the browser tests skip, unless OENGINE_REQUIRE_CHROMIUM=1 (CI).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("OENGINE_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("chromium not found and OENGINE_REQUIRE_CHROMIUM=1 (apt-get install -y chromium)")
	}
	t.Skip("chromium not installed (apt-get install -y chromium); set OENGINE_REQUIRE_CHROMIUM=1 to fail instead")
	return ""
}

// browser is one headless Chromium tab; uncaught page exceptions are
// collected and fail the test.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string // screenshots

	mu         sync.Mutex // protects exceptions
	exceptions []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 4*time.Minute)
	dir := os.Getenv("OENGINE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &browser{t: t, ctx: ctx, dir: dir}
	b.run(chromedp.Navigate("about:blank")) // starts the browser
	msgs := chromedp.Console(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() {
				b.mu.Lock()
				b.exceptions = append(b.exceptions, m.String())
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancelT()
		cancelC()
		cancelA()
		<-stopped
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.exceptions {
			t.Errorf("page exception: %s", e)
		}
	})
	b.viewport(1280, 860, false)
	return b
}

func (b *browser) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) viewport(w, h int64, mobile bool) {
	b.t.Helper()
	scale := 1.0
	if mobile {
		scale = 2
	}
	if _, err := chromedp.Call(b.ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
		Width: w, Height: h, DeviceScaleFactor: scale, Mobile: mobile}); err != nil {
		b.t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

func (b *browser) str(expr string) string { b.t.Helper(); return eval[string](b, expr) }

func (b *browser) truth(expr string) bool { b.t.Helper(); return eval[bool](b, "!!("+expr+")") }

func (b *browser) exec(expr string) { b.t.Helper(); eval[chromedp.Void](b, expr) }

// wait polls a JavaScript condition.
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !b.truth(expr) {
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out waiting for %s (%s); page: %s", what, expr,
				b.str(`JSON.stringify({popover: document.getElementById('popover').innerText, session: document.getElementById('session-msg').textContent})`))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hover moves the mouse to the centre of the first element matching sel
// (a real pointer event: CSS :hover follows it).
func (b *browser) hover(sel string) {
	b.t.Helper()
	xy := eval[[]float64](b, fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`, sel))
	b.mouse(xy[0], xy[1])
}

func (b *browser) mouse(x, y float64) {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, input.DispatchMouseEvent, input.DispatchMouseEventParams{
		Type: input.DispatchMouseEventTypeMouseMoved, X: x, Y: y}); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) click(sel string) { b.t.Helper(); b.run(chromedp.Click(chromedp.CSS(sel))) }

func (b *browser) key(k string) { b.t.Helper(); b.run(chromedp.KeyEvent(k)) }

func (b *browser) screenshot(name string) {
	b.t.Helper()
	buf, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatal(err)
	}
	p := filepath.Join(b.dir, name)
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s (%d bytes)", p, len(buf))
}

func (b *browser) enterKey(key string) {
	b.t.Helper()
	b.run(chromedp.WaitVisible(chromedp.ID("key-input")), chromedp.SendKeys(chromedp.ID("key-input"), key))
	b.click("#key-form button")
	b.wait("the server facts", `document.getElementById('f-instance').textContent.length > 3`)
}

const (
	jsTranslateVisible = `getComputedStyle(document.querySelector('.think .translate')).visibility === 'visible'`
	jsCountsShown      = `!document.getElementById('pop-counts').hidden`
	jsPopText          = `document.getElementById('pop-text').textContent`
	jsPopStatus        = `document.getElementById('pop-status').textContent`
)

// TestConsoleInBrowser drives the console in headless Chromium against a
// live server whose model answers with a thinking block: the chat over a
// session, the Translate action's visibility rules, the translation
// stream, the page-memory cache, cancel, refresh, the 410 message, labels,
// keyboard and a 360 px viewport.
func TestConsoleInBrowser(t *testing.T) {
	const key = "s3cret-web-key"
	c := startConsole(t, consoleOpts{key: key})
	b := newBrowser(t)

	// The page is open; the API asks for the key once.
	b.run(chromedp.Navigate(c.base + "/"))
	b.enterKey(key)
	if !b.truth(`getComputedStyle(document.getElementById('key-form')).display === 'none'`) {
		t.Fatal("the key form is still shown after a good key")
	}
	if got := b.str(`document.getElementById('f-model').textContent`); got != "think-test" {
		t.Fatalf("model shown %q", got)
	}
	b.wait("the load figures", `document.getElementById('l-kv').textContent.includes('/ 512')`)

	// Open a session and stream a turn slowly enough to hover the block
	// while it streams.
	b.wait("the model list", `document.getElementById('model-select').options.length > 0`)
	b.click("#open-btn")
	b.wait("the open session", `!document.getElementById('session-open-view').hidden`)
	sid := b.str(`document.getElementById('s-id').textContent`)
	if !strings.HasPrefix(sid, "gs-") {
		t.Fatalf("session id %q", sid)
	}
	c.model.setDelay(200 * time.Millisecond)
	b.run(chromedp.SendKeys(chromedp.ID("prompt"), "Hi there"))
	b.click("#send-btn")
	b.wait("a streaming thinking block", `document.querySelector('.think[data-state="streaming"]')`)
	b.hover(`.think[data-state="streaming"]`)
	time.Sleep(150 * time.Millisecond)
	if n := b.str(`String(document.querySelectorAll('.think .translate').length)`); n != "0" {
		t.Fatalf("a streaming block shows %s Translate actions", n)
	}
	if !b.truth(`document.querySelector('.think[data-state="streaming"]')`) {
		t.Fatal("the block completed before the hover check: the check proved nothing")
	}
	c.model.setDelay(0)
	b.wait("the completed turn", `document.querySelector('.think[data-state="complete"]') && !document.getElementById('send-btn').hidden`)
	if got := strings.TrimSpace(b.str(`document.querySelector('.turn.assistant .content').textContent`)); got != chatAnswer {
		t.Fatalf("answer %q", got)
	}
	if got := strings.TrimSpace(b.str(`document.querySelector('.think .think-text').textContent`)); got != chatReasoning {
		t.Fatalf("reasoning %q", got)
	}
	if b.truth(`document.querySelector('.think details').open`) {
		t.Fatal("the thinking block is expanded; it must render collapsed")
	}
	b.wait("the session figures", `Number(document.getElementById('s-retained').textContent) > 0 && Number(document.getElementById('s-pinned').textContent) > 0`)
	if cd := b.str(`document.getElementById('s-countdown').textContent`); !strings.Contains(cd, ":") {
		t.Fatalf("lease countdown %q", cd)
	}

	// Completed block: hidden until hovered, visible on hover, and kept
	// while expanded.
	b.mouse(2, 2)
	if b.truth(jsTranslateVisible) {
		t.Fatalf("Translate visible without hover (%s)", b.str(`JSON.stringify({hoverNone: matchMedia('(hover: none)').matches, coarse: matchMedia('(pointer: coarse)').matches, anyHover: matchMedia('(any-hover: hover)').matches, focus: document.activeElement.outerHTML.slice(0, 80)})`))
	}
	b.hover(".think")
	b.wait("Translate on hover", jsTranslateVisible)
	b.click(".think summary")
	b.mouse(2, 2)
	if !b.truth(`document.querySelector('.think details').open`) || !b.truth(jsTranslateVisible) {
		t.Fatal("Translate not kept visible while the block is expanded")
	}
	b.screenshot("chat.png")

	// Translate: progress, deltas, then the counts; one request.
	b.exec(`window.__rec = []; new MutationObserver(() => window.__rec.push({
		text: document.getElementById('pop-text').textContent,
		status: document.getElementById('pop-status').textContent,
		counts: !document.getElementById('pop-counts').hidden})).observe(document.getElementById('popover'),
		{subtree: true, childList: true, characterData: true, attributes: true}); true`)
	before := c.sseCount("")
	c.model.setDelay(30 * time.Millisecond)
	b.hover(".think")
	b.click(".think .translate")
	b.wait("the token counts", jsCountsShown)
	c.model.setDelay(0)
	if got := strings.TrimSpace(b.str(jsPopText)); got != transAnswer {
		t.Fatalf("translation %q, want %q", got, transAnswer)
	}
	type record struct {
		Text   string `json:"text"`
		Status string `json:"status"`
		Counts bool   `json:"counts"`
	}
	rec := eval[[]record](b, `window.__rec`)
	partial, thinking, countsAt := map[string]bool{}, false, -1
	for i, r := range rec {
		if r.Status == "The model is thinking…" && r.Text == "" {
			thinking = true
		}
		if r.Counts && countsAt < 0 {
			countsAt = i
		}
		if !r.Counts && r.Text != "" && r.Text != strings.TrimSpace(transAnswer) {
			partial[r.Text] = true
		}
	}
	if !thinking || len(partial) < 2 || countsAt < 0 {
		t.Fatalf("want progress, then several partial texts, then counts; got thinking=%v partial=%d counts at %d", thinking, len(partial), countsAt)
	}
	counts := b.str(`document.getElementById('pop-counts').textContent`)
	var in, out int
	if _, err := fmt.Sscanf(counts, "Input tokens: %d · Output tokens: %d", &in, &out); err != nil || in < 20 || out < 10 {
		t.Fatalf("counts %q (%v)", counts, err)
	}
	if d := c.sseCount("") - before; d != 1 {
		t.Fatalf("translate made %v requests, want 1", d)
	}
	b.screenshot("popover.png")

	// Reopen: from page memory, no request.
	b.key(kb.Escape)
	b.wait("the popover closed and focus back on Translate", `document.getElementById('popover').hidden && document.activeElement.classList.contains('translate')`)
	b.hover(".think")
	b.click(".think .translate")
	b.wait("the cached translation", jsCountsShown)
	if st := b.str(jsPopStatus); !strings.Contains(st, "no request") || strings.TrimSpace(b.str(jsPopText)) != transAnswer {
		t.Fatalf("reopen: status %q text %q", st, b.str(jsPopText))
	}
	time.Sleep(200 * time.Millisecond)
	if d := c.sseCount("") - before; d != 1 {
		t.Fatalf("reopening made a request (%v in all)", d)
	}

	// Discard and translate again: one more request.
	b.click("#pop-again")
	eventually(t, "the second translation", func() bool { return c.sseCount("done") >= 2 })
	b.wait("the counts again", jsCountsShown)
	if d := c.sseCount("") - before; d != 2 {
		t.Fatalf("discard and translate again: %v requests in all, want 2", d)
	}

	// Cancel mid-stream: the fetch is aborted, the server sees the client
	// leave and frees the sequence.
	disc := c.sseCount("disconnected")
	c.model.setDelay(250 * time.Millisecond)
	b.click("#pop-again")
	b.wait("the stream under way", jsPopStatus+` === 'The model is thinking…' || `+jsPopStatus+` === 'Translating…'`)
	if l := c.e.Load(); l.Running != 1 {
		t.Fatalf("running %d, want the translation running", l.Running)
	}
	b.click("#pop-cancel")
	b.wait("the cancelled status", jsPopStatus+`.startsWith('Cancelled')`)
	eventually(t, "disconnected outcome", func() bool { return c.sseCount("disconnected") == disc+1 })
	c.model.setDelay(0)
	c.ledgerClean(t)

	// Refresh: the key and the cache are gone, the conversation resumes.
	b.run(chromedp.Reload())
	b.enterKey(key)
	if b.truth(`JSON.stringify(sessionStorage).includes('` + key + `') || localStorage.length > 0`) {
		t.Fatal("the API key or a translation outlived the page")
	}
	b.wait("the restored conversation", `document.querySelector('.think[data-state="complete"]')`)
	n := c.sseCount("")
	b.hover(".think")
	b.click(".think .translate")
	b.wait("the counts after refresh", jsCountsShown)
	if d := c.sseCount("") - n; d != 1 {
		t.Fatalf("after refresh translate made %v requests, want 1 (the cache must be cleared)", d)
	}

	// Keyboard: the action is reachable by Tab from the block's summary
	// and opens with Enter (from the cache again: no request).
	b.key(kb.Escape)
	b.mouse(2, 2)
	b.exec(`document.querySelector('.think summary').focus()`)
	b.key(kb.Tab)
	if !b.truth(`document.activeElement.classList.contains('translate')`) || !b.truth(jsTranslateVisible) {
		t.Fatal("Tab from the summary does not reach a visible Translate action")
	}
	b.key(kb.Enter)
	b.wait("the cached translation by keyboard", jsCountsShown)
	if d := c.sseCount("") - n; d != 1 {
		t.Fatalf("keyboard reopen made a request")
	}

	// Every control has a name.
	unnamed := eval[[]string](b, `[...document.querySelectorAll('button, input, select, textarea')].filter(e =>
		!(e.getAttribute('aria-label') || (e.labels && e.labels.length) || e.textContent.trim())).map(e => e.id || e.outerHTML)`)
	if len(unnamed) > 0 {
		t.Fatalf("controls without a label: %v", unnamed)
	}

	// An expired session: the route answers 410 and the page says so.
	resp, err := c.do("PATCH", "/v1/sessions/"+sid, `{"lease_ms": 1}`)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("renew with a 1 ms lease: %v %v", resp, err)
	}
	resp.Body.Close()
	time.Sleep(20 * time.Millisecond)
	b.key(kb.Escape)
	b.run(chromedp.SetValue(chromedp.ID("lang-select"), "German"))
	expired := c.sseCount("session_expired")
	b.hover(".think")
	b.click(".think .translate")
	b.wait("the 410 message", `!document.getElementById('pop-error').hidden`)
	if msg := b.str(`document.getElementById('pop-error').textContent`); !strings.Contains(msg, "expired") {
		t.Fatalf("410 message %q", msg)
	}
	if b.truth(`!document.getElementById('pop-retry').hidden || !document.getElementById('pop-again').hidden`) {
		t.Fatal("retry offered for an expired session")
	}
	if c.sseCount("session_expired") != expired+1 {
		t.Fatal("the server did not answer session_expired")
	}
	b.wait("the session shown expired", `document.getElementById('s-state').textContent === 'expired' && !document.getElementById('new-btn').hidden`)
	b.screenshot("expired.png")

	// A retryable refusal: a draining server answers 503; the page says so
	// and offers Retry, which sends the request again.
	b.click("#new-btn")
	b.click("#open-btn")
	b.wait("a second session", `!document.getElementById('session-open-view').hidden && document.getElementById('s-state').textContent === 'idle'`)
	b.run(chromedp.SendKeys(chromedp.ID("prompt"), "Hello again"))
	b.click("#send-btn")
	b.wait("the second turn", `document.querySelector('.think[data-state="complete"]') && !document.getElementById('send-btn').hidden`)
	// Renew restarts the lease; Close releases the session's pins.
	if c.e.Cache().Stats().Pinned == 0 {
		t.Fatal("the open session pins nothing")
	}
	b.exec(`document.getElementById('s-countdown').textContent = ''`)
	b.click("#renew-btn")
	b.wait("the renewed lease", `document.getElementById('session-msg').textContent === 'Lease renewed.' && document.getElementById('s-countdown').textContent.includes(':')`)
	b.click("#close-btn")
	b.wait("the closed session", `document.getElementById('s-state').textContent === 'closed' && !document.getElementById('new-btn').hidden && document.getElementById('prompt').disabled`)
	eventually(t, "the pins released", func() bool { return c.e.Cache().Stats().Pinned == 0 })
	c.s.Drain()
	draining := c.sseCount("draining")
	b.hover(".think")
	b.click(".think .translate")
	b.wait("the 503 message", `!document.getElementById('pop-error').hidden`)
	if msg := b.str(`document.getElementById('pop-error').textContent`); !strings.Contains(msg, "shutting down") {
		t.Fatalf("503 message %q", msg)
	}
	b.click("#pop-retry")
	eventually(t, "the retried request", func() bool { return c.sseCount("draining") == draining+2 })

	// 360 px wide: nothing overflows sideways.
	b.viewport(360, 740, true)
	b.wait("the narrow layout", `document.documentElement.clientWidth === 360`)
	if !b.truth(`document.documentElement.scrollWidth <= 360`) {
		t.Fatalf("horizontal overflow at 360 px: scrollWidth %s", b.str(`String(document.documentElement.scrollWidth)`))
	}
	b.screenshot("mobile.png")
	c.ledgerClean(t)
}

// TestConsoleRetryOverloaded: a full queue answers 429; the page says the
// server is busy and offers Retry, which succeeds once there is room.
func TestConsoleRetryOverloaded(t *testing.T) {
	c := startConsole(t, consoleOpts{maxRunning: 1, maxWaiting: 1})
	b := newBrowser(t)
	b.run(chromedp.Navigate(c.base + "/"))
	b.wait("the model list", `document.getElementById('model-select').options.length > 0`)
	b.click("#open-btn")
	b.wait("the open session", `!document.getElementById('session-open-view').hidden`)
	sid := b.str(`document.getElementById('s-id').textContent`)
	b.run(chromedp.SendKeys(chromedp.ID("prompt"), "Hi there"))
	b.click("#send-btn")
	b.wait("the completed turn", `document.querySelector('.think[data-state="complete"]') && !document.getElementById('send-btn').hidden`)

	// Fill the engine: one translation runs, one waits. The second is sent
	// only once the first runs: sent together, the second can find the
	// first still in the one waiting place and be refused itself.
	c.model.setDelay(100 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	translate := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/session/"+sid+"/generate",
				strings.NewReader(`{"prompt":"Translate the following text into Latin."}`))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	translate()
	eventually(t, "one running", func() bool { return c.e.Load().Running == 1 })
	translate()
	eventually(t, "one running and one waiting", func() bool { l := c.e.Load(); return l.Running == 1 && l.Waiting == 1 })
	overloaded := c.sseCount("overloaded")
	b.hover(".think")
	b.click(".think .translate")
	b.wait("the 429 message", `!document.getElementById('pop-error').hidden`)
	if msg := b.str(`document.getElementById('pop-error').textContent`); !strings.Contains(msg, "busy") {
		t.Fatalf("429 message %q", msg)
	}
	if c.sseCount("overloaded") != overloaded+1 {
		t.Fatal("the server did not answer overloaded")
	}
	if !b.truth(`!document.getElementById('pop-retry').hidden`) {
		t.Fatal("no Retry for a retryable refusal")
	}
	cancel()
	wg.Wait()
	c.model.setDelay(0)
	c.ledgerClean(t)
	b.click("#pop-retry")
	b.wait("the translation after Retry", jsCountsShown)
	if got := strings.TrimSpace(b.str(jsPopText)); got != transAnswer {
		t.Fatalf("translation after Retry %q", got)
	}
	c.ledgerClean(t)
}

// TestConsoleRerank: on a reranker, an encoder, the page offers no chat
// (a note says why) and its Rerank panel ranks the documents typed in,
// one per line, as POST /v1/rerank does: the same order and scores.
// Empty input is refused on the page, before any request.
func TestConsoleRerank(t *testing.T) {
	c := startConsole(t, consoleOpts{modelFile: "../engine/testdata/embed/tiny-bert-rerank-f16.gguf"})
	b := newBrowser(t)
	b.run(chromedp.Navigate(c.base + "/"))
	b.wait("the Rerank panel", `!document.getElementById('rank-panel').hidden && document.getElementById('rank-model').options.length > 0`)
	if !b.truth(`document.querySelector('.chat').hidden && document.querySelector('.session').hidden && !document.getElementById('encoder-msg').hidden`) {
		t.Fatal("an encoder's page offers a chat")
	}
	b.click("#rank-btn")
	if msg := b.str(`document.getElementById('rank-msg').textContent`); !strings.Contains(msg, "needed") {
		t.Fatalf("empty input: message %q", msg)
	}
	query := "What is the capital of France?"
	docs := []string{"The Eiffel Tower was completed in 1889.", "Paris is the capital and largest city of France.",
		"Photosynthesis converts light energy into chemical energy."}
	b.run(chromedp.SendKeys(chromedp.ID("rank-query"), query))
	b.exec(`document.getElementById('rank-docs').value = ` + jsString(strings.Join(docs, "\n")))
	b.click("#rank-btn")
	b.wait("the ranked documents", `document.querySelectorAll('#rank-results li').length === 3`)
	b.screenshot("console-rerank.png")

	body, _ := json.Marshal(map[string]any{"model": "think-test", "query": query, "documents": docs})
	resp, err := c.do("POST", "/v1/rerank", string(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var want struct {
		Results []struct {
			Index          int     `json:"index"`
			RelevanceScore float64 `json:"relevance_score"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&want); err != nil || len(want.Results) != 3 {
		t.Fatalf("/v1/rerank: %v, %+v", err, want)
	}
	for k, r := range want.Results {
		li := fmt.Sprintf(`document.querySelectorAll('#rank-results li')[%d]`, k)
		if got := b.str(li + `.dataset.index`); got != fmt.Sprint(r.Index) {
			t.Fatalf("place %d: document %s on the page, %d from the API", k, got, r.Index)
		}
		if got := b.str(li + `.querySelector('.score').textContent`); got != fmt.Sprintf("%.4f", r.RelevanceScore) {
			t.Fatalf("place %d: score %s on the page, %.4f from the API", k, got, r.RelevanceScore)
		}
		if got := b.str(li + `.querySelector('.doc').textContent`); got != docs[r.Index] {
			t.Fatalf("place %d: text %q", k, got)
		}
	}
	c.ledgerClean(t)
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
