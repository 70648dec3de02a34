package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"oengine/model/chat"
	"oengine/server"
	"oengine/server/openai"
	"oengine/server/sse"
	"oengine/sessions"
	"oengine/web"
)

func init() {
	register("serve", "serve a model over OpenEngine gRPC and HTTP (metrics, health, SSE)", runServe)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return fmt.Sprint(*l) }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func runServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	ef := addEngineFlags(fs)
	def := server.DefaultConfig()
	name := fs.String("served-model-name", "", "model name announced to clients (default: general.name or the file name)")
	var aliases stringList
	fs.Var(&aliases, "alias", "another name clients may use for the model (repeatable)")
	grpcAddr := fs.String("grpc-addr", def.GRPCAddr, "gRPC listen address")
	httpAddr := fs.String("http-addr", def.HTTPAddr, "HTTP listen address (metrics, health, SSE); empty: none")
	advertise := fs.String("advertise-host", "", "host announced in GetKvEventSources (default: listener host or hostname)")
	grace := fs.Duration("drain-grace", def.DrainGrace, "how long running requests may finish on SIGTERM")
	fastModel := fs.String("fast-model", "", "a second, smaller GGUF model for the SSE side generation")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	sessionLease := fs.Duration("session-lease", 0, "default generation-session lease (0: engine default)")
	sessionMaxLease := fs.Duration("session-max-lease", 0, "longest lease granted; longer requests are clamped (0: engine default)")
	sessionRetention := fs.Duration("session-retention", time.Hour, "how long closed and expired sessions stay as tombstones")
	sessionEvictIdle := fs.Bool("session-evict-idle", false, "let idle sessions lose their pinned pages under memory pressure (state EVICTED)")
	maxSessions := fs.Int("max-sessions", 0, "live generation sessions at once (0: engine default)")
	sseMaxTokens := fs.Int("sse-max-tokens", sse.DefaultMaxTokens, "output budget of a POST /session/{id}/generate side generation")
	sseTemp := fs.Float64("sse-temperature", -1, "temperature of SSE side generations (negative: --default-temperature)")
	sseKeepAlive := fs.Duration("sse-keepalive", sse.DefaultKeepAlive, "interval of SSE keep-alive comments while no event is sent")
	sseWriteTimeout := fs.Duration("sse-write-timeout", sse.DefaultWriteTimeout, "an SSE reader stalled longer than this is cancelled")
	chatTemplate := fs.String("chat-template", "", "Jinja chat template file replacing the GGUF's tokenizer.chat_template (OpenAI chat completions, SSE)")
	templateTimeout := fs.Duration("chat-template-timeout", chat.DefaultRenderTimeout, "longest chat template render; a template that runs longer fails")
	noReasoningSplit := fs.Bool("no-reasoning-split", false, "keep <think> blocks in the OpenAI content instead of reasoning_content")
	var corsOrigins stringList
	fs.Var(&corsOrigins, "cors-origin", "origin allowed to call the SSE route from a browser (repeatable; \"*\" any; none by default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("serve: --log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))

	cfg := def
	cfg.GRPCAddr, cfg.HTTPAddr, cfg.AdvertiseHost = *grpcAddr, *httpAddr, *advertise
	cfg.DrainGrace = *grace
	cfg.EngineVersion = version
	cfg.Logger = logger
	cfg.Metrics = server.NewMetrics()

	rt, err := openRuntime(ef, *name, cfg.Metrics.EngineHooks, stderr, logger)
	if err != nil {
		return err
	}
	defer rt.Close()
	primary := server.NewModel(rt.Engine, rt.Tokenizer)
	primary.Aliases = aliases
	limits := chat.Limits{Timeout: *templateTimeout}
	if *chatTemplate != "" {
		b, err := os.ReadFile(*chatTemplate)
		if err != nil {
			return fmt.Errorf("serve: --chat-template: %w", err)
		}
		if rt.Tokenizer == nil {
			return errors.New("serve: --chat-template: the model has no tokenizer")
		}
		// An explicit template must work: refuse to start rather than fall
		// back (a GGUF's own unusable template only logs a warning).
		if _, err := chat.NewEncoderLimits(rt.Tokenizer, string(b), limits); err != nil {
			return fmt.Errorf("serve: --chat-template %s: %w", *chatTemplate, err)
		}
		primary.ChatTemplate = string(b)
	}
	models := []server.Model{primary}
	sc := sse.Config{
		MaxTokens: *sseMaxTokens, KeepAlive: *sseKeepAlive, WriteTimeout: *sseWriteTimeout,
		CORSOrigins: corsOrigins,
	}
	if *sseTemp >= 0 {
		sc.Sampling.Temperature = sseTemp
	}
	if *fastModel != "" {
		// Not loaded: the route logs it and uses the session's model.
		sc.FastModel = baseName(*fastModel)
		fef := *ef
		fef.model = fastModel
		frt, err := openRuntime(&fef, "", cfg.Metrics.EngineHooks, stderr, logger)
		if err != nil {
			// docs/design.md §6: a fast model that fails to load
			// does not stop the server; it is reported as degraded.
			logger.Error("fast model failed to load; serving without it", "path", *fastModel, "err", err)
			cfg.ModelDegraded = fmt.Sprintf("fast model %s failed to load: %v", *fastModel, err)
		} else {
			defer frt.Close()
			models = append(models, server.NewModel(frt.Engine, frt.Tokenizer))
			sc.FastModel = frt.Engine.ModelName()
		}
	}
	srv, err := server.New(cfg, models...)
	if err != nil {
		return err
	}
	if _, err := srv.EnableSessions(server.ExtensionConfig{
		Sessions: sessions.Config{DefaultLease: *sessionLease, MaxLease: *sessionMaxLease,
			Retention: *sessionRetention, EvictIdle: *sessionEvictIdle, MaxSessions: *maxSessions},
	}); err != nil {
		return err
	}
	if err := sse.Enable(srv, sc); err != nil {
		return err
	}
	if err := openai.Enable(srv, openai.Config{TemplateLimits: limits, NoReasoningSplit: *noReasoningSplit}); err != nil {
		return err
	}
	if err := web.Enable(srv, web.Config{Version: version}); err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	label := rt.file.Label
	if label == "synthetic" {
		label = "synthetic (built-in default: random weights)"
	}
	fmt.Fprintf(stdout, "oengine %s serving model %q [%s]\n  gRPC  %s (Inference, Control, health, reflection)\n  HTTP  %s (/metrics, /healthz, /readyz, POST /session/{id}/generate SSE, OpenAI /v1/*)\n  Web   http://%s/ (console)\n",
		version, primary.Name, label, srv.GRPCAddr(), srv.HTTPAddr(), srv.HTTPAddr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	err = srv.Serve(ctx)
	logger.Info("server stopped", "uptime", time.Since(start).Round(time.Second))
	return err
}

// version is the engine version reported by GetServerInfo.
var version = "0.1.0-dev"
