package sessions

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"oengine/engine"
	"oengine/ggml"
	"oengine/model/gguf"
	"oengine/model/llama"
	"oengine/model/synth"
	"oengine/model/tokenizer"
)

var benchLlama struct {
	once sync.Once
	m    engine.Model
	tok  engine.Tokenizer
	err  error
}

// benchPreset is the synthetic model of the TTFT benchmarks: the
// tinyllama-1.1b preset (Q8_0, context 4096) unless OENGINE_BENCH_PRESET
// names another synth preset (e.g. "tiny" for a quick run).
func benchModel(b *testing.B) (engine.Model, engine.Tokenizer) {
	benchLlama.once.Do(func() {
		preset := os.Getenv("OENGINE_BENCH_PRESET")
		if preset == "" {
			preset = "tinyllama-1.1b"
		}
		data, err := synth.Build(synth.Options{Arch: "llama", Preset: preset, Type: ggml.TypeQ8_0, Seed: 1, CtxLen: 4096})
		if err != nil {
			benchLlama.err = err
			return
		}
		f, err := gguf.Parse(data)
		if err != nil {
			benchLlama.err = err
			return
		}
		tok, err := tokenizer.FromGGUF(f)
		if err != nil {
			benchLlama.err = err
			return
		}
		m, err := llama.Load(f, llama.Options{})
		if err != nil {
			benchLlama.err = err
			return
		}
		benchLlama.m, benchLlama.tok = engine.FromLlama(m, llama.KVF16), engine.WrapTokenizer(tok)
	})
	if benchLlama.err != nil {
		b.Skipf("synthetic model unavailable: %v", benchLlama.err)
	}
	return benchLlama.m, benchLlama.tok
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func randomIDs(r *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(100 + r.IntN(vocab-100))
	}
	return out
}

// ttft submits through start and returns the time to the first token,
// draining the rest.
func ttft(b *testing.B, next func(context.Context) (engine.Event, error), t0 time.Time) time.Duration {
	b.Helper()
	var first time.Duration
	for {
		ev, err := next(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if ev.Kind == engine.EventTokens && first == 0 {
			first = time.Since(t0)
		}
		if ev.Kind == engine.EventError {
			b.Fatal(ev.Err)
		}
		if ev.Terminal() {
			return first
		}
	}
}

// BenchmarkTurn8TTFT measures the time to first token of turn 8 of a
// conversation (about 1.5k tokens of history: a 100-token system prompt and
// 7 turns of 200 input and 8 output tokens; sizes via OENGINE_BENCH_SYSTEM,
// _INPUT, _OUTPUT) three ways in each iteration: an APPEND continuation of
// the session, the whole history resent with bypass_prefix_cache, and the
// whole history resent with the prefix cache (each with its own new input
// of the same length). Reported: each TTFT in ms
// and the two resend / append ratios.
func BenchmarkTurn8TTFT(b *testing.B) {
	m, tok := benchModel(b)
	e, err := engine.New(engine.Config{ModelName: "bench", GreedyDefault: true}, m, tok)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	mgr, err := New(Config{InstanceID: "bench", Models: func(string) (Engine, bool) { return e, true }})
	if err != nil {
		b.Fatal(err)
	}
	defer mgr.Close()
	ctx := context.Background()
	vocab := e.Limits().Vocab
	r := rand.New(rand.NewPCG(1, 2))
	sysN, inN, outN := envInt("OENGINE_BENCH_SYSTEM", 100), envInt("OENGINE_BENCH_INPUT", 200), envInt("OENGINE_BENCH_OUTPUT", 8)

	if _, err := mgr.Open(ctx, OpenRequest{ID: "conv", Model: "bench", TokenIDs: randomIDs(r, sysN, vocab)}); err != nil {
		b.Fatal(err)
	}
	ref := Ref{SessionID: "conv", Owner: "bench"}
	for turn := 1; turn <= 7; turn++ {
		t, err := mgr.Begin(ctx, Continuation{Ref: ref, Model: "bench"},
			engine.Request{TokenIDs: randomIDs(r, inN, vocab), MaxTokens: outN, Stop: engine.StopParams{IgnoreEOS: true}})
		if err != nil {
			b.Fatal(err)
		}
		if ev := t.Wait(); ev.Kind != engine.EventDone {
			b.Fatal(ev.Err)
		}
	}
	info, _ := mgr.Get(ref, true)
	hist := info.Tokens
	// Each variant gets its own new input of the same length: only the
	// history can come from pinned or cached pages.
	resend := func() []int32 { return append(append([]int32(nil), hist...), randomIDs(r, inN, vocab)...) }
	b.Logf("turn 8: %d tokens of history + %d new", len(hist), inN)

	var app, bypass, prefix time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := Continuation{Ref: ref, Model: "bench", Mode: ModeAppend}
		if i > 0 { // REPLACE at the end of the history recomputes exactly what APPEND did
			from := len(hist)
			c.Mode, c.FromToken = ModeReplace, &from
		}
		t0 := time.Now()
		t, err := mgr.Begin(ctx, c, engine.Request{TokenIDs: randomIDs(r, inN, vocab), MaxTokens: 1})
		if err != nil {
			b.Fatal(err)
		}
		app += ttft(b, t.Next, t0)

		t0 = time.Now()
		st, err := e.Submit(ctx, engine.Request{TokenIDs: resend(), MaxTokens: 1, BypassPrefixCache: true})
		if err != nil {
			b.Fatal(err)
		}
		bypass += ttft(b, st.Next, t0)

		t0 = time.Now()
		st, err = e.Submit(ctx, engine.Request{TokenIDs: resend(), MaxTokens: 1})
		if err != nil {
			b.Fatal(err)
		}
		prefix += ttft(b, st.Next, t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(app.Milliseconds())/n, "append-ms")
	b.ReportMetric(float64(bypass.Milliseconds())/n, "bypass-ms")
	b.ReportMetric(float64(prefix.Milliseconds())/n, "prefix-ms")
	b.ReportMetric(float64(bypass)/float64(app), "bypass/append")
	b.ReportMetric(float64(prefix)/float64(app), "prefix/append")
}
