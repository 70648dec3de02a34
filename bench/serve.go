package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Scenario names.
const (
	ScenarioGenerate    = "generate"     // independent requests
	ScenarioMultiTurn   = "multiturn"    // conversations: append (sessions) and resend, two reports
	ScenarioStreamInput = "stream-input" // prompts sent as paced chunks (GenerateStream)
	ScenarioCancel      = "cancel-storm" // a fraction of requests cancelled at random points
)

// Scenarios lists the scenario names RunServe knows.
var Scenarios = []string{ScenarioGenerate, ScenarioMultiTurn, ScenarioStreamInput, ScenarioCancel, ScenarioSoak}

// ServeConfig is one `bench serve` invocation.
type ServeConfig struct {
	Scenario string   `json:"scenario"`
	Workload Workload `json:"workload"`
	Load     Load     `json:"load"`
	// Sweep, when set, repeats the run at each concurrency (Load.Requests
	// or Load.Duration per level).
	Sweep []int `json:"sweep,omitempty"`
	// PerConcurrency, when > 0, raises each run's request count to
	// PerConcurrency x its concurrency (so a sweep's high levels run long
	// enough to fill their slots).
	PerConcurrency int `json:"requests_per_concurrency,omitempty"`
	// Turns per conversation (multiturn).
	Turns int `json:"turns,omitempty"`
	// Modes of the multiturn scenario: "append", "resend" (default both
	// where the target has sessions).
	Modes []string `json:"modes,omitempty"`
	// Stream paces the stream-input scenario.
	Stream StreamInput `json:"stream_input,omitzero"`
	// CancelFraction of requests cancelled on purpose (cancel-storm).
	CancelFraction float64 `json:"cancel_fraction,omitempty"`
	SLO            SLO     `json:"slo"`
	// RequestTimeout bounds each request (0: none beyond the run's).
	RequestTimeout time.Duration `json:"request_timeout_ns,omitempty"`
	// MetricsURL is the server's /metrics, scraped around each run ("": none).
	MetricsURL string `json:"metrics_url,omitempty"`
	// InputMode chooses how prompts get their length: InputAuto (default),
	// InputTokens or InputText (docs/bench.md: input methods).
	InputMode string `json:"input_mode,omitempty"`
}

// Input modes.
const (
	// InputAuto sends token ids where the target takes them and a
	// vocabulary is known (Workload.Vocab, or fetched from an OpenEngine
	// server), and calibrated text otherwise.
	InputAuto = "auto"
	// InputTokens requires token ids (the run fails when it cannot).
	InputTokens = "tokens"
	// InputText always sends calibrated text.
	InputText = "text"
)

// Optional target abilities that RunServe looks for.
type (
	// tokenTarget says whether a target sends Request.TokenIDs.
	tokenTarget interface{ AcceptsTokenIDs() bool }
	// vocabFetcher reads the model's vocabulary from the server.
	vocabFetcher interface {
		FetchVocab(ctx context.Context) (*Vocab, error)
	}
	// contextReporter reads the model's context length from the server.
	contextReporter interface {
		ContextLength(ctx context.Context) (int, error)
	}
	// guidedTarget says whether a target sends Request.GuidedJSONSchema.
	guidedTarget interface{ AcceptsGuided() bool }
)

// checkGuided refuses a guided workload that would not be sent as asked:
// a target that cannot carry the schema, or a scenario whose requests do
// not come from the workload's generator one by one.
func checkGuided(t Target, cfg ServeConfig) error {
	g := cfg.Workload.Guided
	if g == nil || g.Fraction == 0 {
		return nil
	}
	if g.Fraction < 0 || g.Fraction > 1 || g.JSONSchema == "" {
		return fmt.Errorf("bench: guided requests need a fraction in [0, 1] and a JSON Schema (got %g, %d bytes)", g.Fraction, len(g.JSONSchema))
	}
	if gt, ok := t.(guidedTarget); !ok || !gt.AcceptsGuided() {
		return fmt.Errorf("bench: guided requests need the grpc target (OpenEngine guided.json_schema), not %s", t.Name())
	}
	switch cfg.Scenario {
	case "", ScenarioGenerate, ScenarioCancel, ScenarioStreamInput:
		return nil
	}
	return fmt.Errorf("bench: guided requests are not supported by the %s scenario", cfg.Scenario)
}

// prepared is what RunServe learns before the first run.
type prepared struct {
	method     string       // the input method, for the report
	calib      *Calibration // text calibration, when used
	maxContext int          // the server's context length (0: unknown)
}

// prepare settles the input method of cfg's workload against t (fetching
// a vocabulary or calibrating text, once for all runs) and reads the
// server's context length.
func prepare(ctx context.Context, t Target, cfg *ServeConfig) (prepared, error) {
	var p prepared
	if cr, ok := t.(contextReporter); ok {
		p.maxContext, _ = cr.ContextLength(ctx) // unknown: conversations are not stopped
	}
	w := &cfg.Workload
	if len(w.Prompts) > 0 {
		w.Vocab, w.Text = nil, nil
		p.method = "prompts file (lengths as the file gives them)"
		return p, nil
	}
	mode := cfg.InputMode
	if mode == "" {
		mode = InputAuto
	}
	if mode != InputAuto && mode != InputTokens && mode != InputText {
		return p, fmt.Errorf("bench: input mode %q (want auto, tokens or text)", mode)
	}
	tt, ok := t.(tokenTarget)
	takesIDs := ok && tt.AcceptsTokenIDs()
	why := ""
	if mode != InputText && takesIDs {
		if w.Vocab == nil {
			if vf, ok := t.(vocabFetcher); ok {
				v, err := vf.FetchVocab(ctx)
				if err != nil {
					why = err.Error()
				}
				w.Vocab = v
			} else {
				why = "no vocabulary: the target cannot list one (give --vocab)"
			}
		}
		if w.Vocab != nil {
			p.method = fmt.Sprintf("token ids (vocabulary: %s, %d ordinary of %d tokens)", w.Vocab.Source, len(w.Vocab.IDs), w.Vocab.Size)
			return p, nil
		}
	}
	if mode == InputTokens {
		if !takesIDs {
			return p, fmt.Errorf("bench: input mode tokens: the %s target takes text only", t.Name())
		}
		return p, fmt.Errorf("bench: input mode tokens: %s", why)
	}
	w.Vocab = nil
	probe := func(ctx context.Context, text string) (int, error) {
		r := t.Generate(ctx, Request{Prompt: text, MaxTokens: 1, IgnoreEOS: true})
		if r.Err != "" {
			return 0, &KindError{Kind: r.ErrKind, Msg: r.ErrKind + ": " + r.Err}
		}
		return r.PromptTokens, nil
	}
	plan, err := Calibrate(ctx, probe, w.Input.Center(), w.Seed)
	if err != nil {
		return p, err
	}
	w.Text = plan
	p.calib = &plan.Calibration
	p.method = fmt.Sprintf("calibrated text (%d words = %d tokens, %d probes)", plan.Words, plan.Tokens, plan.Probes)
	if why != "" {
		p.method += "; token ids not used: " + why
	}
	return p, nil
}

// Hooks lets the caller draw progress: Level is called when a run starts
// (name and concurrency), Progress as its jobs finish.
type Hooks struct {
	Level    func(scenario string, concurrency int)
	Progress Progress
}

// RunServe runs the configured scenario (and sweep) against t and returns
// one report per run.
func RunServe(ctx context.Context, t Target, cfg ServeConfig, h Hooks) ([]Report, error) {
	levels := cfg.Sweep
	if len(levels) == 0 {
		levels = []int{cfg.Load.Concurrency}
	}
	if err := checkGuided(t, cfg); err != nil {
		return nil, err
	}
	p, err := prepare(ctx, t, &cfg)
	if err != nil {
		return nil, err
	}
	var reps []Report
	for li, c := range levels {
		l := cfg.Load
		l.Concurrency = c
		if cfg.PerConcurrency > 0 && l.Requests > 0 {
			l.Requests = max(l.Requests, cfg.PerConcurrency*c)
		}
		// Each level draws its own prompts (so a level does not hit the
		// prefix cache filled by the one before); same seed, same prompts.
		lc := cfg
		lc.Workload.Seed = cfg.Workload.Seed + uint64(li)*1_000_003
		runs, err := scenarioRuns(t, cfg, p.maxContext)
		if err != nil {
			return reps, err
		}
		for _, r := range runs {
			if h.Level != nil {
				h.Level(r.name, c)
			}
			rep, err := runOne(ctx, t, lc, l, r, h.Progress)
			rep.InputMethod, rep.Calibration, rep.MaxContext = p.method, p.calib, p.maxContext
			if err != nil {
				return reps, err
			}
			reps = append(reps, rep)
			if ctx.Err() != nil {
				return reps, ctx.Err()
			}
		}
	}
	return reps, nil
}

// run is one named run of a scenario and its job maker.
type run struct {
	name string
	job  func(g *safeGen) Job
}

// safeGen is a Generator shared by concurrent jobs.
type safeGen struct {
	mu  sync.Mutex // protects g and rng
	g   *Generator
	rng *rand.Rand
}

func (s *safeGen) next(cancelFraction float64) Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.g.Next()
	cancelPlan(s.rng, &r, cancelFraction)
	return r
}

func (s *safeGen) conversation(turns, maxContext int) Conversation {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := NewConversation(s.g, turns)
	c.MaxContext = maxContext
	return c
}

func scenarioRuns(t Target, cfg ServeConfig, maxContext int) ([]run, error) {
	timeout := func(ctx context.Context) (context.Context, context.CancelFunc) {
		if cfg.RequestTimeout > 0 {
			return context.WithTimeout(ctx, cfg.RequestTimeout)
		}
		return context.WithCancel(ctx)
	}
	single := func(frac float64) func(g *safeGen) Job {
		return func(g *safeGen) Job {
			return func(ctx context.Context, i int) []Result {
				ctx, cancel := timeout(ctx)
				defer cancel()
				return []Result{t.Generate(ctx, g.next(frac))}
			}
		}
	}
	switch cfg.Scenario {
	case "", ScenarioGenerate:
		return []run{{ScenarioGenerate, single(0)}}, nil
	case ScenarioCancel:
		if cfg.CancelFraction <= 0 || cfg.CancelFraction > 1 {
			return nil, fmt.Errorf("bench: cancel-storm needs a cancel fraction in (0, 1], got %g", cfg.CancelFraction)
		}
		return []run{{ScenarioCancel, single(cfg.CancelFraction)}}, nil
	case ScenarioStreamInput:
		g, ok := t.(*GRPC)
		if !ok {
			return nil, fmt.Errorf("bench: stream-input needs the grpc target, not %s", t.Name())
		}
		si := cfg.Stream
		if si.Chunks <= 0 {
			si.Chunks = 4
		}
		return []run{{ScenarioStreamInput, func(sg *safeGen) Job {
			return func(ctx context.Context, i int) []Result {
				ctx, cancel := timeout(ctx)
				defer cancel()
				return []Result{g.GenerateStream(ctx, sg.next(0), si)}
			}
		}}}, nil
	case ScenarioSoak:
		return nil, fmt.Errorf("bench: the soak scenario runs through RunSoak, not RunServe")
	case ScenarioMultiTurn:
		ct, ok := t.(Conversational)
		if !ok {
			return nil, fmt.Errorf("bench: multiturn is not supported by the %s target", t.Name())
		}
		modes := cfg.Modes
		if len(modes) == 0 {
			modes = []string{"append", "resend"}
			if t.Name() != "grpc" {
				modes = []string{"resend"}
			}
		}
		turns := max(cfg.Turns, 2)
		var runs []run
		for _, mode := range modes {
			if mode != "append" && mode != "resend" {
				return nil, fmt.Errorf("bench: multiturn mode %q (want append or resend)", mode)
			}
			app := mode == "append"
			runs = append(runs, run{ScenarioMultiTurn + "-" + mode, func(sg *safeGen) Job {
				return func(ctx context.Context, i int) []Result {
					ctx, cancel := timeout(ctx)
					defer cancel()
					return ct.Converse(ctx, sg.conversation(turns, maxContext), app)
				}
			}})
		}
		return runs, nil
	}
	return nil, fmt.Errorf("bench: unknown scenario %q (have %v)", cfg.Scenario, Scenarios)
}

// runOne runs one scenario run at load l and aggregates it.
func runOne(ctx context.Context, t Target, cfg ServeConfig, l Load, r run, progress Progress) (Report, error) {
	// Every run (and every sweep level) draws the same requests.
	sg := &safeGen{g: NewGenerator(cfg.Workload), rng: rand.New(rand.NewPCG(cfg.Workload.Seed, 0x63616e63))}
	var sc *Scraper
	if cfg.MetricsURL != "" {
		sc = NewScraper(cfg.MetricsURL)
		if err := sc.Start(ctx); err != nil {
			sc = nil // the report says nothing of the server rather than failing the run
		}
	}
	results, elapsed, err := Run(ctx, l, r.job(sg), progress)
	rep := Aggregate(results, elapsed, cfg.SLO)
	rep.Scenario, rep.Target, rep.Concurrency, rep.Rate = r.name, t.Name(), l.Concurrency, l.Rate
	rep.InputAsked, rep.OutputAsked = cfg.Workload.Input.String(), cfg.Workload.Output.String()
	switch t.Name() {
	case "sse":
		rep.OutputAsked = "server" // the SSE route has no max_tokens
	case "openai-embeddings", "openai-rerank":
		rep.OutputAsked = "none" // nothing is generated
	}
	if len(cfg.Workload.Prompts) > 0 {
		rep.InputAsked = "file"
	}
	rep.Config = map[string]any{
		"input_tokens": cfg.Workload.Input.String(), "output_tokens": cfg.Workload.Output.String(),
		"requests": l.Requests, "duration_s": l.Duration.Seconds(), "poisson": l.Poisson,
		"ignore_eos": cfg.Workload.IgnoreEOS, "temperature": cfg.Workload.Temperature, "seed": cfg.Workload.Seed,
	}
	if len(cfg.Workload.Prompts) > 0 {
		rep.Config["prompts"] = len(cfg.Workload.Prompts)
	}
	if g := cfg.Workload.Guided; g != nil && g.Fraction > 0 {
		rep.Config["guided_fraction"], rep.Config["guided_schema"] = g.Fraction, g.Source
	}
	switch cfg.Scenario {
	case ScenarioMultiTurn:
		rep.Config["turns"] = max(cfg.Turns, 2)
	case ScenarioCancel:
		rep.Config["cancel_fraction"] = cfg.CancelFraction
	case ScenarioStreamInput:
		rep.Config["chunks"], rep.Config["chunk_interval_ms"] = cfg.Stream.Chunks, cfg.Stream.Interval.Milliseconds()
	}
	if sc != nil {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if figs, ferr := sc.Finish(fctx); ferr == nil {
			rep.Server = figs
		}
		cancel()
	}
	return rep, err
}
