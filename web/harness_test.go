package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"oengine/internal/refdata"
	"oengine/internal/scripted"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"oengine/engine"
	"oengine/model/gguf"
	"oengine/model/llama"
	"oengine/model/tokenizer"
	"oengine/server"
	"oengine/server/openai"
	"oengine/server/sse"
	"oengine/sessions"
	"oengine/web"
)

// thinkModel is a fake engine.Model over the real Llama SentencePiece
// vocabulary whose generations are known in advance and open with a
// thinking block. Forward stores each token id in its page slot (a real
// paged K/V contract: a wrong page table shows up as wrong text) and reads
// the sequence back to choose the next token: a sequence holding the
// marker token gets the translation script, any other the chat script;
// within a script the next token follows the longest suffix of the
// sequence that is a prefix of the script.
type thinkModel struct {
	vocab  int
	marker int32
	chat   []int32
	trans  []int32
	delay  atomic.Int64 // nanoseconds slept per Forward
}

func (m *thinkModel) Info() engine.ModelInfo {
	return engine.ModelInfo{Vocab: m.vocab, ContextLen: 4096}
}
func (m *thinkModel) KVBytesPerPage(pageSize int) int64 { return int64(pageSize) * 4 }

func (m *thinkModel) NewKV(pages, pageSize int) (engine.KV, error) {
	return scripted.NewKV(pages, pageSize), nil
}

func (m *thinkModel) setDelay(d time.Duration) { m.delay.Store(int64(d)) }

func (m *thinkModel) Forward(k engine.KV, b *engine.Batch, logits []float32) error {
	if d := m.delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	return k.(*scripted.KV).Forward(b, logits, m.vocab, 0, func(seq []int32) int32 {
		if slices.Contains(seq, m.marker) {
			return scripted.Next(seq, m.trans)
		}
		return scripted.Next(seq, m.chat)
	})
}

// The scripted texts. The translation prompt the page sends starts
// "Translate the following text into ..." (app.js), so "▁following" marks it.
const (
	chatReasoning  = "The user greets me. I should answer briefly and politely."
	chatAnswer     = "Hello! How can I help you today?"
	transReasoning = "Translating."
	transAnswer    = "L'utilisateur me salue. Je dois répondre brièvement et poliment."
	markerPiece    = "▁following"
)

// thinkTemplate is a Qwen3-shaped chat template: it prints <think> (so the
// OpenAI API splits reasoning out) and leaves the model to open the block.
const thinkTemplate = `{%- for m in messages -%}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}<|im_start|>assistant
{%- if enable_thinking is defined and enable_thinking is false %}
<think>

</think>
{%- endif %}
{% endif -%}`

// testdata finds ../shared/testdata beside the repository root.
func testdata(t testing.TB) string {
	t.Helper()
	return refdata.Dir(t)
}

func vocab(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	f, err := gguf.Open(filepath.Join(testdata(t), "tokenizer", "ggml-vocab-llama-spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func newThinkModel(t testing.TB, tok *tokenizer.Tokenizer) *thinkModel {
	t.Helper()
	enc := func(s string) []int32 {
		return append(tok.Encode(s, tokenizer.EncodeOptions{Continuation: true}), tok.EOS())
	}
	marker, ok := tok.TokenID(markerPiece)
	if !ok {
		t.Fatalf("no %s token", markerPiece)
	}
	return &thinkModel{vocab: tok.VocabSize(), marker: marker,
		chat:  enc("<think>" + chatReasoning + "</think>" + chatAnswer),
		trans: enc("<think>" + transReasoning + "</think>" + transAnswer)}
}

// console is a live oengine server on 127.0.0.1:0 with sessions, the SSE
// route, the OpenAI API and the web console, serving the thinking model.
type console struct {
	t     testing.TB
	s     *server.Server
	e     *engine.Engine
	model *thinkModel
	base  string
	key   string // "" when auth is off
}

// consoleOpts configure startConsole.
type consoleOpts struct {
	key                    string // API key; "": auth off
	maxRunning, maxWaiting int    // engine admission (0: 8 and the engine default)
	// modelFile, when set, serves that GGUF (a real model, run on the CPU)
	// instead of the thinking model; console.model is then nil.
	modelFile string
	// corsOrigins are the other origins allowed to call the API from a
	// browser (--cors-origin).
	corsOrigins []string
}

func startConsole(t testing.TB, o consoleOpts) *console {
	t.Helper()
	key := o.key
	if o.maxRunning == 0 {
		o.maxRunning = 8
	}
	var (
		tok *tokenizer.Tokenizer
		m   *thinkModel
		em  engine.Model
	)
	if o.modelFile != "" {
		f, err := gguf.Open(o.modelFile)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if tok, err = tokenizer.FromGGUF(f); err != nil {
			t.Fatal(err)
		}
		w, err := llama.Load(f, llama.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		em = engine.FromLlama(w, llama.KVF16)
	} else {
		tok = vocab(t)
		m = newThinkModel(t, tok)
		em = m
	}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	const name = "think-test"
	e, err := engine.New(engine.Config{ModelName: name, PageSize: 16, KVPages: 512, MaxRunning: o.maxRunning,
		MaxWaiting: o.maxWaiting, GreedyDefault: true, CheckIntegrity: true, Logger: discard}, em, engine.WrapTokenizer(tok))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	cfg := server.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DrainGrace = 2 * time.Second
	cfg.Logger = discard
	if key != "" {
		keys, err := server.NewKeys([]server.Key{{Name: "web", Secret: key}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Keys = keys
	}
	sm := server.NewModel(e, tok)
	if m != nil {
		sm.ChatTemplate = thinkTemplate
	}
	s, err := server.New(cfg, sm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnableSessions(server.ExtensionConfig{Sessions: sessions.Config{ReapInterval: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if err := sse.Enable(s, sse.Config{CORSOrigins: o.corsOrigins}); err != nil {
		t.Fatal(err)
	}
	if err := openai.Enable(s, openai.Config{CORSOrigins: o.corsOrigins}); err != nil {
		t.Fatal(err)
	}
	if err := web.Enable(s, web.Config{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background()) }()
	t.Cleanup(func() {
		if m != nil {
			m.setDelay(0)
		}
		_ = s.Shutdown(time.Second)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return")
		}
	})
	return &console{t: t, s: s, e: e, model: m, base: "http://" + s.HTTPAddr(), key: key}
}

// sseCount is oengine:sse_requests_total{outcome} ("" sums every outcome).
func (c *console) sseCount(outcome string) float64 {
	c.t.Helper()
	mfs, err := c.s.Metrics().Registry().Gather()
	if err != nil {
		c.t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "oengine:sse_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && (outcome == "" || l.GetValue() == outcome) && l.GetValue() != "preflight" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// ledgerClean waits until nothing runs and no page is held by a request
// (session pins allowed), then checks the page ledger.
func (c *console) ledgerClean(t testing.TB) {
	t.Helper()
	eventually(t, "engine idle", func() bool { l := c.e.Load(); return l.Running == 0 && l.Waiting == 0 })
	eventually(t, "no page in use", func() bool { return c.e.Cache().Stats().InUse == 0 })
	if err := c.e.Cache().CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}

// do sends an API request with the key.
func (c *console) do(method, path, body string) (*http.Response, error) {
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	return http.DefaultClient.Do(req)
}

func eventually(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
