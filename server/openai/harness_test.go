package openai

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"oengine/internal/refdata"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"oengine/engine"
	"oengine/model/gguf"
	"oengine/model/llama"
	"oengine/model/tokenizer"
	"oengine/server"
	"oengine/sessions"
)

// gatedModel is the real tiny model whose Forward can be held: while
// gated, each Forward first receives from gate (to keep requests running
// or waiting for as long as a test needs).
type gatedModel struct {
	engine.Model
	gated atomic.Bool
	gate  chan struct{}
	fail  atomic.Pointer[error] // when set, Forward fails with it
	// script, when set, makes the logits choose its tokens in order (then
	// EOS) for one greedy request at a time: the k-th logits row after
	// the first one since script was set picks script[k] (setScript).
	script atomic.Pointer[scriptState]
}

type scriptState struct {
	ids  []int32
	eos  int32
	base int32 // position of the first logits row; -1 before it
}

// setScript makes the next request generate ids, then eos.
func (g *gatedModel) setScript(ids []int32, eos int32) {
	g.script.Store(&scriptState{ids: ids, eos: eos, base: -1})
}

func (g *gatedModel) Forward(k engine.KV, b *engine.Batch, logits []float32) error {
	if g.gated.Load() {
		<-g.gate
	}
	if err := g.fail.Load(); err != nil {
		return *err
	}
	if err := g.Model.Forward(k, b, logits); err != nil {
		return err
	}
	if s := g.script.Load(); s != nil {
		vocab := g.Model.Info().Vocab
		for j, i := range b.Logits {
			if s.base < 0 {
				s.base = b.Pos[i]
			}
			tok := s.eos
			if n := int(b.Pos[i] - s.base); n < len(s.ids) {
				tok = s.ids[n]
			}
			logits[j*vocab+int(tok)] = 1e4
		}
	}
	return nil
}

// ForwardHidden is Forward for embedding steps (engine.HiddenModel).
func (g *gatedModel) ForwardHidden(k engine.KV, b *engine.Batch, logits, hidden []float32) error {
	if g.gated.Load() {
		<-g.gate
	}
	if err := g.fail.Load(); err != nil {
		return *err
	}
	return g.Model.(engine.HiddenModel).ForwardHidden(k, b, logits, hidden)
}

// Rank is the wrapped model's classification head (engine.RankModel).
func (g *gatedModel) Rank(dst, cls []float32) error { return g.Model.(engine.RankModel).Rank(dst, cls) }

// hold gates Forward; the returned function releases it.
func (g *gatedModel) hold() (release func()) {
	g.gated.Store(true)
	return func() {
		g.gated.Store(false)
		for {
			select {
			case g.gate <- struct{}{}:
			default:
				return
			}
		}
	}
}

// testdata finds ../shared/testdata beside the repository root.
func testdata(t testing.TB) string {
	t.Helper()
	return refdata.Dir(t)
}

// llama2Template is a chat template in the shape of Llama 2's (the tiny
// model's vocabulary is Llama's SentencePiece one), with BOS printed by
// the template so the BOS rule must not add a second one.
const llama2Template = `{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}<<SYS>>{{ m.content }}<</SYS>>{% elif m.role == 'user' %}[INST] {{ m.content }} [/INST]{% else %} {{ m.content }}{{ eos_token }}{% endif %}{% endfor %}`

// harness is a live server (real TCP) over the tiny Llama model with
// sessions and the OpenAI API.
type harness struct {
	t     testing.TB
	s     *server.Server
	e     *engine.Engine
	model *gatedModel
	tok   *tokenizer.Tokenizer
	base  string // http://host:port
	name  string
	done  chan error
}

type harnessOpts struct {
	maxRunning, maxWaiting int
	maxBody                int64
	template               string
	clock                  sessions.Clock // nil: the real one
	maxSessions            int
	writeBuffer            int    // server socket send buffer (0: system default)
	eventQueue             int    // engine event queue per request (0: default)
	modelFile              string // a GGUF of ../shared/testdata/models, or a path with a "/"; "": tiny-llama-f16.gguf
	corsOrigins            []string
}

// clockT is a settable clock for lease tests.
type clockT struct {
	mu  sync.Mutex // protects now
	now time.Time
}

func (c *clockT) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clockT) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func startHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	td := testdata(t)
	if o.modelFile == "" {
		o.modelFile = "tiny-llama-f16.gguf"
	}
	path := o.modelFile
	if !strings.Contains(path, "/") {
		path = filepath.Join(td, "models", path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	w, err := llama.Load(f, llama.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	gm := &gatedModel{Model: engine.FromLlama(w, llama.KVF16), gate: make(chan struct{})}
	if o.maxRunning == 0 {
		o.maxRunning = 4
	}
	if o.maxWaiting == 0 {
		o.maxWaiting = 8
	}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	metrics := server.NewMetrics()
	const name = "tiny"
	e, err := engine.New(engine.Config{ModelName: name, PageSize: 16, KVPages: 256, MaxRunning: o.maxRunning,
		MaxWaiting: o.maxWaiting, EventQueue: o.eventQueue, CheckIntegrity: true, Logger: discard, Hooks: metrics.EngineHooks(name)},
		gm, engine.WrapTokenizer(tok))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	cfg := server.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DrainGrace = 2 * time.Second
	cfg.Logger = discard
	cfg.Metrics = metrics
	if o.writeBuffer > 0 {
		// The connection limit wraps each conn, hiding the TCP socket.
		cfg.HTTPMaxConns = 0
		cfg.HTTPConnContext = func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetWriteBuffer(o.writeBuffer)
			}
			return ctx
		}
	}
	m := server.NewModel(e, tok)
	m.Aliases = []string{"tiny-alias"}
	m.ChatTemplate = o.template
	s, err := server.New(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnableSessions(server.ExtensionConfig{Sessions: sessions.Config{ReapInterval: time.Hour,
		Clock: o.clock, MaxSessions: o.maxSessions}}); err != nil {
		t.Fatal(err)
	}
	if err := Enable(s, Config{MaxBodyBytes: o.maxBody, WriteTimeout: 5 * time.Second, CORSOrigins: o.corsOrigins}); err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, s: s, e: e, model: gm, tok: tok, base: "http://" + s.HTTPAddr(), name: name, done: make(chan error, 1)}
	go func() { h.done <- s.Serve(context.Background()) }()
	t.Cleanup(func() {
		gm.gated.Store(false)
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

// client is the official OpenAI Go SDK pointed at the harness, without
// retries (so every status is seen as the server sent it).
func (h *harness) client(opts ...option.RequestOption) oa.Client {
	return oa.NewClient(append([]option.RequestOption{option.WithBaseURL(h.base + "/v1/"),
		option.WithAPIKey("unused"), option.WithMaxRetries(0)}, opts...)...)
}

// idle waits until the engine runs nothing and no page is in use or
// pinned, then checks the page ledger.
func (h *harness) idle(t testing.TB, allowPinned bool) {
	t.Helper()
	eventually(t, "engine idle", func() bool { l := h.e.Load(); return l.Running == 0 && l.Waiting == 0 })
	eventually(t, "pages released", func() bool {
		st := h.e.Cache().Stats()
		return st.InUse == 0 && (allowPinned || st.Pinned == 0)
	})
	if err := h.e.Cache().CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}

func eventually(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// chatDelta is one choice delta of a streamed chat completion.
type chatDelta struct{ content, reasoning string }

// chatDeltas reads the choice deltas of a streamed chat completion's body,
// in order.
func chatDeltas(t testing.TB, raw []byte) []chatDelta {
	t.Helper()
	var out []chatDelta
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
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
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			out = append(out, chatDelta{c.Delta.Content, c.Delta.ReasoningContent})
		}
	}
	return out
}
