package sse

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"oengine/internal/refdata"
	"oengine/internal/scripted"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"oengine/engine"
	"oengine/model/gguf"
	"oengine/model/tokenizer"
	"oengine/server"
	"oengine/sessions"
)

// scriptModel is a fake engine.Model over a real vocabulary with a real
// paged K/V contract: Forward stores each token id at its page slot, and
// the next token after position p is read back from the sequence's pages:
// when the sequence ends with script[:j] (longest j) the next token is
// script[j]; with an empty script it is filler forever. So the text a
// request generates is known in advance and a wrong page table shows up as
// wrong text.
type scriptModel struct {
	vocab, ctx int
	script     []int32
	filler     int32
	delay      time.Duration // per Forward
	gated      atomic.Bool   // when set, each Forward first receives from gate
	gate       chan struct{}

	mu   sync.Mutex // protects fail
	fail error      // Forward returns it (fault injection)
}

func (m *scriptModel) Info() engine.ModelInfo {
	return engine.ModelInfo{Vocab: m.vocab, ContextLen: m.ctx}
}
func (m *scriptModel) KVBytesPerPage(pageSize int) int64 { return int64(pageSize) * 4 }

func (m *scriptModel) NewKV(pages, pageSize int) (engine.KV, error) {
	return scripted.NewKV(pages, pageSize), nil
}

func (m *scriptModel) setFail(err error) {
	m.mu.Lock()
	m.fail = err
	m.mu.Unlock()
}

func (m *scriptModel) Forward(k engine.KV, b *engine.Batch, logits []float32) error {
	if m.gated.Load() {
		<-m.gate
	}
	if m.delay > 0 {
		time.Sleep(m.delay)
	}
	m.mu.Lock()
	fail := m.fail
	m.mu.Unlock()
	if fail != nil {
		return fail
	}
	return k.(*scripted.KV).Forward(b, logits, m.vocab, max(len(m.script), 1), m.next)
}

// next is the script's next token after seq (the filler without a script).
func (m *scriptModel) next(seq []int32) int32 {
	if len(m.script) == 0 {
		return m.filler
	}
	return scripted.Next(seq, m.script)
}

// sseTestdata finds ../shared/testdata beside the repository root.
func sseTestdata(t testing.TB) string {
	t.Helper()
	return refdata.Dir(t)
}

var (
	sseTokOnce sync.Once
	sseTok     *tokenizer.Tokenizer
	sseTokErr  error
)

// sseVocab is the Llama SentencePiece vocabulary (32000 tokens, BOS added).
func sseVocab(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	td := sseTestdata(t)
	sseTokOnce.Do(func() {
		f, err := gguf.Open(filepath.Join(td, "tokenizer", "ggml-vocab-llama-spm.gguf"))
		if err != nil {
			sseTokErr = err
			return
		}
		defer f.Close()
		sseTok, sseTokErr = tokenizer.FromGGUF(f)
	})
	if sseTokErr != nil {
		t.Fatal(sseTokErr)
	}
	return sseTok
}

// scriptFor makes a model whose every generation is text, then EOS.
func scriptFor(tok *tokenizer.Tokenizer, text string) *scriptModel {
	s := tok.Encode(text, tokenizer.EncodeOptions{Continuation: true})
	s = append(s, tok.EOS())
	return &scriptModel{vocab: tok.VocabSize(), ctx: 4096, script: s, gate: make(chan struct{})}
}

// fillerModel generates one token ("▁a") until the length limit.
func fillerModel(tok *tokenizer.Tokenizer) *scriptModel {
	a, ok := tok.TokenID("▁a")
	if !ok {
		panic("no ▁a token")
	}
	return &scriptModel{vocab: tok.VocabSize(), ctx: 4096, filler: a, gate: make(chan struct{})}
}

type sseEngineOpts struct {
	name       string
	pages      int
	maxRunning int
	maxWaiting int
	eventQueue int
	hooks      engine.Hooks
}

func newScriptEngine(t testing.TB, m *scriptModel, o sseEngineOpts) *engine.Engine {
	t.Helper()
	if o.pages == 0 {
		o.pages = 512
	}
	if o.maxRunning == 0 {
		o.maxRunning = 8
	}
	e, err := engine.New(engine.Config{
		ModelName: o.name, PageSize: 16, KVPages: o.pages, MaxRunning: o.maxRunning, MaxWaiting: o.maxWaiting,
		EventQueue: o.eventQueue, GreedyDefault: true, CheckIntegrity: true, Hooks: o.hooks,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, m, engine.WrapTokenizer(sseVocab(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// clockT is a settable clock for lease tests.
type clockT struct {
	mu  sync.Mutex // protects now
	now time.Time
}

func (c *clockT) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clockT) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// sseHarness is a server with sessions and the SSE route on 127.0.0.1:0.
type sseHarness struct {
	t     testing.TB
	s     *server.Server
	mgr   *sessions.Manager
	clock *clockT
	base  string // http://host:port
	done  chan error
}

type sseHarnessOpts struct {
	cfg           Config
	chatTemplates map[string]string // per served name: the model's chat template ("": plain text)
	writeBuffer   int               // server socket send buffer (0: system default)
}

// startSSE serves the engines (with the Llama SPM vocabulary) with
// sessions and the SSE route.
func startSSE(t testing.TB, o sseHarnessOpts, engines ...*engine.Engine) *sseHarness {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DrainGrace = 2 * time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.writeBuffer > 0 {
		cfg.HTTPMaxConns = 0 // the connection cap's listener hides *net.TCPConn
		cfg.HTTPConnContext = func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetWriteBuffer(o.writeBuffer)
			}
			return ctx
		}
	}
	models := make([]server.Model, len(engines))
	for i, e := range engines {
		models[i] = server.NewModel(e, sseVocab(t))
		if tmpl, ok := o.chatTemplates[e.ModelName()]; ok {
			models[i].ChatTemplate = tmpl
		}
	}
	s, err := server.New(cfg, models...)
	if err != nil {
		t.Fatal(err)
	}
	clock := &clockT{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	mgr, err := s.EnableSessions(server.ExtensionConfig{Sessions: sessions.Config{Clock: clock, ReapInterval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Enable(s, o.cfg); err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	h := &sseHarness{t: t, s: s, mgr: mgr, clock: clock, base: "http://" + s.HTTPAddr(), done: make(chan error, 1)}
	go func() { h.done <- s.Serve(context.Background()) }()
	t.Cleanup(func() {
		_ = s.Shutdown(time.Second)
		select {
		case err := <-h.done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return")
		}
	})
	return h
}

// open opens a session on model with an initial prompt.
func (h *sseHarness) open(model, prompt string) sessions.Info {
	h.t.Helper()
	in, err := h.mgr.Open(context.Background(), sessions.OpenRequest{Model: model, Prompt: prompt})
	if err != nil {
		h.t.Fatal(err)
	}
	return in
}

func (h *sseHarness) url(id string) string { return h.base + "/session/" + id + "/generate" }

// sseEvent is one parsed event.
type sseEvent struct {
	ID   string
	Name string
	Data string
}

func (e sseEvent) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(e.Data), v); err != nil {
		t.Fatalf("event %s data %q: %v", e.Name, e.Data, err)
	}
}

// sseReader parses an event stream.
type sseReader struct {
	br       *bufio.Reader
	comments int
}

// next returns the next event; io.EOF at the end of the stream.
func (r *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	seen := false
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			if err == io.EOF && (seen || line != "") {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if seen {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
			r.comments++
		case strings.HasPrefix(line, "id: "):
			ev.ID, seen = line[4:], true
		case strings.HasPrefix(line, "event: "):
			ev.Name, seen = line[7:], true
		case strings.HasPrefix(line, "data: "):
			if ev.Data != "" {
				return ev, fmt.Errorf("two data lines in one event")
			}
			ev.Data, seen = line[6:], true
		default:
			return ev, fmt.Errorf("unexpected line %q", line)
		}
	}
}

// post sends {"prompt": prompt} with a plain client.
func (h *sseHarness) post(ctx context.Context, client *http.Client, id, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url(id), strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if client == nil {
		client = http.DefaultClient
	}
	return client.Do(req)
}

func promptBody(p string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"prompt": p})
	return b.String()
}

// sseResult is a whole stream.
type sseResult struct {
	status   int
	header   http.Header
	events   []sseEvent
	comments int
	err      error // reading error (nil at a clean end)
	body     []byte
}

// generate runs one request to its end.
func (h *sseHarness) generate(ctx context.Context, id, prompt string) sseResult {
	h.t.Helper()
	return h.generateBody(ctx, id, promptBody(prompt))
}

func (h *sseHarness) generateBody(ctx context.Context, id, body string) sseResult {
	h.t.Helper()
	resp, err := h.post(ctx, nil, id, body)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	res := sseResult{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		res.body, res.err = io.ReadAll(resp.Body)
		return res
	}
	r := &sseReader{br: bufio.NewReader(resp.Body)}
	for {
		ev, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			res.err = err
			break
		}
		res.events = append(res.events, ev)
	}
	res.comments = r.comments
	return res
}

// text is the concatenation of the deltas.
func (r sseResult) text(t testing.TB) string {
	var b strings.Builder
	for _, ev := range r.events {
		if ev.Name == "delta" {
			var d sseDelta
			ev.decode(t, &d)
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

func (r sseResult) names() []string {
	out := make([]string, len(r.events))
	for i, ev := range r.events {
		out[i] = ev.Name
	}
	return out
}

// waitFor polls cond every 2 ms for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// counter reads a counter of the SSE metrics.
func (h *sseHarness) outcomeCount(outcome string) float64 {
	mfs, err := h.s.Metrics().Registry().Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "oengine:sse_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
