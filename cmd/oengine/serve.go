package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
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
	helpTable["serve"] = cmdHelp{synopsis: "[MODEL.gguf] [flags]", modelArg: true,
		notes: "Without a model it serves the built-in synthetic model (random weights).",
		examples: []string{
			"oengine serve ~/models/qwen2.5-0.5b-instruct-q8_0.gguf --served-model-name qwen --kv-memory 2GiB",
			"oengine serve --model m.gguf --grpc-addr 127.0.0.1:50051 --http-addr 127.0.0.1:8080 --alias default",
		}}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return fmt.Sprint(*l) }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// serveConfig is the parsed command line of serve.
type serveConfig struct {
	engine                                          *engineFlags
	name, modelID                                   string
	aliases                                         stringList
	grpcAddr, httpAddr, advertise                   string
	grace                                           time.Duration
	fastModel                                       string
	logLevel                                        slog.Level
	sessionLease, sessionMaxLease, sessionRetention time.Duration
	sessionEvictIdle                                bool
	maxSessions                                     int
	sseMaxTokens                                    int
	sseTemp                                         float64
	sseKeepAlive, sseWriteTimeout                   time.Duration
	corsOrigins                                     stringList
	security                                        *securityFlags
	chatTemplate                                    string
	templateTimeout                                 time.Duration
	noReasoningSplit                                bool
	dist                                            *distFlags
}

func parseServe(args []string) (*serveConfig, error) {
	c := &serveConfig{}
	fs := newFlags("serve", nil)
	c.engine = addEngineFlags(fs)
	def := server.DefaultConfig()
	fs.StringVar(&c.name, "served-model-name", "", "model `name` announced to clients (default: general.name or the file name)")
	fs.StringVar(&c.modelID, "model-id", "", "`ID` reported as ModelInfo.model_id, the tokenizer source a router loads: a path on the shared model mount or a hub id org/name (default: the GGUF file's absolute path; the synthetic model: its name)")
	fs.Var(&c.aliases, "alias", "another `NAME` clients may use for the model (repeatable)")
	fs.StringVar(&c.grpcAddr, "grpc-addr", def.GRPCAddr, "gRPC listen `address`")
	fs.StringVar(&c.httpAddr, "http-addr", def.HTTPAddr, "HTTP listen `address` (metrics, health, SSE); empty: none")
	fs.StringVar(&c.advertise, "advertise-host", "", "`host` announced in GetKvEventSources (default: listener host or hostname)")
	fs.DurationVar(&c.grace, "drain-grace", def.DrainGrace, "how long running requests may finish on SIGTERM")
	c.engine.consumerTimeout = fs.Duration("consumer-timeout", 30*time.Second, "a request whose client stops reading is paused, then cancelled after this long")
	fs.StringVar(&c.fastModel, "fast-model", "", "a second, smaller GGUF `file` for the SSE side generation")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	fs.DurationVar(&c.sessionLease, "session-lease", 0, "default generation-session lease (0: engine default)")
	fs.DurationVar(&c.sessionMaxLease, "session-max-lease", 0, "longest lease granted; longer requests are clamped (0: engine default)")
	fs.DurationVar(&c.sessionRetention, "session-retention", time.Hour, "how long closed and expired sessions stay as tombstones")
	fs.BoolVar(&c.sessionEvictIdle, "session-evict-idle", false, "let idle sessions lose their pinned pages under memory pressure (state EVICTED)")
	fs.IntVar(&c.maxSessions, "max-sessions", 0, "live generation sessions at once (0: engine default)")
	fs.IntVar(&c.sseMaxTokens, "sse-max-tokens", sse.DefaultMaxTokens, "output budget of a POST /session/{id}/generate side generation")
	fs.Float64Var(&c.sseTemp, "sse-temperature", -1, "temperature of SSE side generations (negative: --default-temperature)")
	fs.DurationVar(&c.sseKeepAlive, "sse-keepalive", sse.DefaultKeepAlive, "interval of SSE keep-alive comments while no event is sent")
	fs.DurationVar(&c.sseWriteTimeout, "sse-write-timeout", sse.DefaultWriteTimeout, "an SSE reader stalled longer than this is cancelled")
	fs.Var(&c.corsOrigins, "cors-origin", "`origin` whose pages may call the HTTP API and the SSE route from a browser (repeatable; \"*\" any; none by default)")
	fs.StringVar(&c.chatTemplate, "chat-template", "", "Jinja chat template `file` replacing the GGUF's tokenizer.chat_template (OpenAI chat completions, SSE)")
	fs.DurationVar(&c.templateTimeout, "chat-template-timeout", chat.DefaultRenderTimeout, "longest chat template render; a template that runs longer fails")
	fs.BoolVar(&c.noReasoningSplit, "no-reasoning-split", false, "keep <think> blocks in the OpenAI content instead of reasoning_content")
	fs.allowNegative("sse-temperature")
	fs.limit("sse-max-tokens", 1, math.Inf(1))
	c.security = addSecurityFlags(fs.FlagSet, def)
	c.dist = addDistFlags(fs.FlagSet)
	fs.allowNegative("max-sessions-per-key")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := c.engine.check("serve"); err != nil {
		return nil, err
	}
	if *c.engine.consumerTimeout <= 0 {
		return nil, fmt.Errorf("serve: --consumer-timeout must be more than 0, got %v", *c.engine.consumerTimeout)
	}
	if err := c.dist.check(); err != nil {
		return nil, err
	}
	if err := c.logLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return nil, fmt.Errorf("serve: --log-level must be debug, info, warn or error, got %q", *logLevel)
	}
	return c, nil
}

// modelID is ModelInfo.model_id: the --model-id given, else the model
// file's absolute path, else (the synthetic model) its name.
func modelID(flagValue string, f *loadedFile) (string, error) {
	switch {
	case flagValue != "":
		return flagValue, nil
	case f.Label == "synthetic":
		return f.Name, nil
	}
	abs, err := filepath.Abs(f.Label)
	if err != nil {
		return "", fmt.Errorf("serve: model id: %w", err)
	}
	return abs, nil
}

func runServe(args []string, stdout, stderr io.Writer) error {
	c, err := parseServe(args)
	if err != nil {
		return err
	}
	return c.run(stdout, stderr)
}

func (c *serveConfig) run(stdout, stderr io.Writer) error {
	// The parsed values under the names the wiring below uses.
	ef, def, lvl := c.engine, server.DefaultConfig(), c.logLevel
	name, aliases, grpcAddr, httpAddr, advertise, grace := &c.name, c.aliases, &c.grpcAddr, &c.httpAddr, &c.advertise, &c.grace
	fastModel, sessionLease, sessionMaxLease, sessionRetention := &c.fastModel, &c.sessionLease, &c.sessionMaxLease, &c.sessionRetention
	sessionEvictIdle, maxSessions, sseMaxTokens, sseTemp := &c.sessionEvictIdle, &c.maxSessions, &c.sseMaxTokens, &c.sseTemp
	sseKeepAlive, sseWriteTimeout, corsOrigins := &c.sseKeepAlive, &c.sseWriteTimeout, c.corsOrigins
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))

	cfg := def
	cfg.GRPCAddr, cfg.HTTPAddr, cfg.AdvertiseHost = *grpcAddr, *httpAddr, *advertise
	cfg.DrainGrace = *grace
	cfg.EngineVersion = version
	cfg.Logger = logger
	cfg.Metrics = server.NewMetrics()
	sf := c.security
	reloadCert, err := sf.apply(&cfg)
	if err != nil {
		return err
	}

	rt, err := openRuntime(ef, *name, cfg.Metrics.EngineHooks, stderr, logger)
	if err != nil {
		return err
	}
	defer rt.Close()
	primary := server.NewModel(rt.Engine, rt.Tokenizer)
	primary.Aliases = aliases
	if primary.ID, err = modelID(c.modelID, rt.file); err != nil {
		return err
	}
	limits := chat.Limits{Timeout: c.templateTimeout}
	if c.chatTemplate != "" {
		b, err := os.ReadFile(c.chatTemplate)
		if err != nil {
			return fmt.Errorf("serve: --chat-template: %w", err)
		}
		if rt.Tokenizer == nil {
			return errors.New("serve: --chat-template: the model has no tokenizer")
		}
		// An explicit template must work: refuse to start rather than fall
		// back (a GGUF's own unusable template only logs a warning).
		if _, err := chat.NewEncoderLimits(rt.Tokenizer, string(b), limits); err != nil {
			return fmt.Errorf("serve: --chat-template %s: %w", c.chatTemplate, err)
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
		// The fast model does not speculate (and is not the draft: pass
		// the same file to --draft-model for that, docs/api.md).
		fef.spec = nil
		frt, err := openRuntime(&fef, "", cfg.Metrics.EngineHooks, stderr, logger)
		if err != nil {
			// docs/design.md §6: a fast model that fails to load
			// does not stop the server; it is reported as degraded.
			logger.Error("fast model failed to load; serving without it", "path", *fastModel, "err", err)
			cfg.ModelDegraded = fmt.Sprintf("fast model %s failed to load: %v", *fastModel, err)
		} else {
			defer frt.Close()
			fm := server.NewModel(frt.Engine, frt.Tokenizer)
			// Auxiliary: kept out of supported_models, GetLoad and
			// KV events, so a router sees one model (docs/deploy.md).
			fm.Auxiliary = true
			if fm.ID, err = modelID("", frt.file); err != nil {
				return err
			}
			models = append(models, fm)
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
		MaxSessionsPerKey: *sf.maxSessionsPerKey,
	}); err != nil {
		return err
	}
	if err := sse.Enable(srv, sc); err != nil {
		return err
	}
	if err := openai.Enable(srv, openai.Config{TemplateLimits: limits, NoReasoningSplit: c.noReasoningSplit, CORSOrigins: corsOrigins}); err != nil {
		return err
	}
	if err := web.Enable(srv, web.Config{Version: version}); err != nil {
		return err
	}
	if err := c.dist.apply(srv); err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	stopZMQ, err := c.dist.start(srv, logger)
	if err != nil {
		_ = srv.Shutdown(0)
		return err
	}
	defer stopZMQ()
	label := rt.file.Label
	if label == "synthetic" {
		label = "synthetic (built-in default: random weights)"
	}
	security := "no API keys (loopback only)"
	switch {
	case srv.AuthEnabled():
		security = "API keys required"
	case cfg.AllowUnauthenticated:
		security = "no API keys (--allow-unauthenticated)"
	}
	if cfg.TLS != nil {
		security += ", TLS"
		if cfg.TLS.ClientCAs != nil {
			security += " with client certificates"
		}
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	fmt.Fprintf(stdout, "oengine %s serving model %q [%s]\n  device %s\n  gRPC  %s (Inference, Control, health, reflection)\n  HTTP  %s (/metrics, /healthz, /readyz, POST /session/{id}/generate SSE, OpenAI /v1/*)\n  web   %s://%s/ (console)\n  auth  %s\n",
		version, primary.Name, label, rt.Device, srv.GRPCAddr(), srv.HTTPAddr(), scheme, srv.HTTPAddr(), security)
	start := time.Now()
	err = serveSignals(srv, sf, reloadCert, logger)
	logger.Info("server stopped", "uptime", time.Since(start).Round(time.Second))
	return err
}
