package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"oengine/internal/refdata"
	"testing"
	"time"

	"oengine/engine"
	"oengine/ggml"
	"oengine/loader"
	"oengine/model/gguf"
	"oengine/model/synth"
	"oengine/model/tokenizer"
	"oengine/server"
	"oengine/server/sse"
)

// tinyEngine builds the built-in synthetic tiny model and an engine on it.
func tinyEngine(t testing.TB, hooks engine.Hooks) *engine.Engine {
	t.Helper()
	return tinyEngineCfg(t, hooks, nil)
}

// tinyEngineCfg is tinyEngine with mut applied to the engine's
// configuration.
func tinyEngineCfg(t testing.TB, hooks engine.Hooks, mut func(*engine.Config)) *engine.Engine {
	t.Helper()
	data, err := synth.Build(synth.Options{Arch: "llama", Preset: "tiny", Type: ggml.TypeQ8_0, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return engineOnCfg(t, f, hooks, mut)
}

// tinyVocab is the vocabulary pool of the built-in synthetic tiny model.
func tinyVocab(t testing.TB) *Vocab {
	t.Helper()
	data, err := synth.Build(synth.Options{Arch: "llama", Preset: "tiny", Type: ggml.TypeQ8_0, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	v, err := VocabFromTokenizer(tok, "synth tiny")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// refEngine serves the tiny llama reference model of shared/testdata (a
// real SentencePiece vocabulary), skipping when the directory is missing.
func refEngine(t testing.TB, hooks engine.Hooks) (*engine.Engine, *tokenizer.Tokenizer) {
	t.Helper()
	path := refdata.Dir(t, "models", "tiny-llama-f16.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return engineOn(t, f, hooks), tok
}

func engineOn(t testing.TB, f *gguf.File, hooks engine.Hooks) *engine.Engine {
	t.Helper()
	return engineOnCfg(t, f, hooks, nil)
}

func engineOnCfg(t testing.TB, f *gguf.File, hooks engine.Hooks, mut func(*engine.Config)) *engine.Engine {
	t.Helper()
	cfg := engine.Config{PageSize: 16, KVPages: 256, MaxRunning: 16,
		Hooks: hooks, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mut != nil {
		mut(&cfg)
	}
	lm, err := loader.Load(f, loader.Options{Name: "tiny", Threads: 2, Engine: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lm.Close)
	return lm.Engine
}

// testServer is an oengine server on 127.0.0.1:0 serving the tiny model.
type testServer struct {
	grpcAddr, httpBase string
	engine             *engine.Engine
}

func startServer(t testing.TB) *testServer {
	return startServerOpts(t, false)
}

// startServerOpts starts a server; ext also enables sessions, streaming
// input and the SSE route, on the reference model of shared/testdata (a
// real vocabulary and chat-free text tokenizer for streamed text).
func startServerOpts(t testing.TB, ext bool) *testServer {
	t.Helper()
	return startServerCfg(t, ext, nil)
}

// startServerCfg is startServerOpts with mut applied to the engine's
// configuration (tiny model only).
func startServerCfg(t testing.TB, ext bool, mut func(*engine.Config)) *testServer {
	t.Helper()
	metrics := server.NewMetrics()
	var e *engine.Engine
	var tok *tokenizer.Tokenizer
	if ext {
		e, tok = refEngine(t, metrics.EngineHooks("tiny"))
	} else {
		e = tinyEngineCfg(t, metrics.EngineHooks("tiny"), mut)
	}
	cfg := server.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DrainGrace = time.Second
	cfg.Metrics = metrics
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := server.New(cfg, server.NewModel(e, tok))
	if err != nil {
		t.Fatal(err)
	}
	if ext {
		if _, err := s.EnableSessions(server.ExtensionConfig{}); err != nil {
			t.Fatal(err)
		}
		if err := sse.Enable(s, sse.Config{MaxTokens: 6}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background()) }()
	t.Cleanup(func() {
		_ = s.Shutdown(time.Second)
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop")
		}
	})
	return &testServer{grpcAddr: s.GRPCAddr(), httpBase: "http://" + s.HTTPAddr(), engine: e}
}

func dial(t testing.TB, ts *testServer) *GRPC {
	t.Helper()
	g, err := DialGRPC(ts.grpcAddr, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// openAIShim serves /v1/completions (stream=true) from an engine, the way
// an OpenAI-compatible server does, so the openai target is tested over a
// real HTTP connection against the real engine.
func openAIShim(t testing.TB, e *engine.Engine) string {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/completions" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var body struct {
			Prompt    json.RawMessage `json:"prompt"` // text or token ids
			MaxTokens int             `json:"max_tokens"`
			Temp      float64         `json:"temperature"`
			Stream    bool            `json:"stream"`
			IgnoreEOS bool            `json:"ignore_eos"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !body.Stream {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		req := engine.Request{MaxTokens: body.MaxTokens, Stop: engine.StopParams{IgnoreEOS: body.IgnoreEOS}}
		if json.Unmarshal(body.Prompt, &req.Prompt) != nil && json.Unmarshal(body.Prompt, &req.TokenIDs) != nil {
			http.Error(w, `{"error":{"message":"bad prompt"}}`, http.StatusBadRequest)
			return
		}
		req.Sampling.Temperature = &body.Temp
		st, err := e.Submit(r.Context(), req)
		if err != nil {
			http.Error(w, fmt.Sprintf(`{"error":{"message":%q}}`, err.Error()), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for {
			ev, err := st.Next(r.Context())
			if errors.Is(err, io.EOF) || err != nil {
				break
			}
			switch ev.Kind {
			case engine.EventTokens:
				for range ev.Tokens {
					// one chunk per token, as llama-server and vLLM stream
					fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"x\",\"finish_reason\":null}]}\n\n")
				}
				fl.Flush()
			case engine.EventDone:
				fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\n",
					ev.Usage.PromptTokens, ev.Usage.CompletionTokens)
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		fl.Flush()
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
