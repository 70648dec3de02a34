package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"oengine/bench"
)

func init() {
	register("bench", "measure: bench serve (load generator), bench model (llama-bench-like), bench compare, bench chart", runBench)
}

const benchUsage = `usage:
  oengine bench serve   [flags]          drive a running server (grpc, sse, openai, openai-chat, openai-embeddings or openai-rerank target);
                                         exact input lengths, exit 1 beyond --max-error-rate (docs/bench.md)
  oengine bench model   [flags]          prefill / decode throughput of a GGUF file in this process
  oengine bench compare A.json B.json    B/A ratios of two runs (also: oengine bench --compare A B)
  oengine bench chart -o out.svg A.json [B.json ...]   one sweep chart of several runs
`

func runBench(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, benchUsage)
		return errors.New("bench: no subcommand")
	}
	switch args[0] {
	case "serve":
		return runBenchServe(args[1:], stdout, stderr)
	case "model":
		return runBenchModel(args[1:], stdout, stderr)
	case "compare", "--compare", "-compare":
		return runBenchCompare(args[1:], stdout)
	case "chart":
		return runBenchChart(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, benchUsage)
		return nil
	}
	fmt.Fprint(stderr, benchUsage)
	return fmt.Errorf("bench: unknown subcommand %q", args[0])
}

func runBenchCompare(args []string, stdout io.Writer) error {
	fs := newFlags("bench compare", nil)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if args = fs.Args(); len(args) != 2 {
		return errors.New("bench compare: want two JSON files, A and B")
	}
	a, err := bench.ReadJSON(args[0])
	if err != nil {
		return err
	}
	b, err := bench.ReadJSON(args[1])
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "A = %s\nB = %s\n", args[0], args[1])
	bench.Compare(stdout, a, b)
	return nil
}

func runBenchChart(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench chart", stderr)
	out := fs.String("o", "sweep.svg", "SVG file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("bench chart: name at least one JSON file")
	}
	var reps []bench.Report
	for _, p := range fs.Args() {
		f, err := bench.ReadJSON(p)
		if err != nil {
			return err
		}
		reps = append(reps, f.Reports...)
	}
	if err := writeSVG(*out, reps); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return nil
}

func writeSVG(path string, reps []bench.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := bench.WriteSweepSVG(f, reps); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// intList parses "1,2,4,8".
func intList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad concurrency %q in %q", p, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func runBenchServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench serve", stderr)
	target := fs.String("target", "grpc", "grpc (OpenEngine Inference.Generate), sse (POST /session/{id}/generate), openai (/v1/completions), openai-chat (/v1/chat/completions), openai-embeddings (/v1/embeddings: one input a request, no output) or openai-rerank (/v1/rerank: a request's prompt cut into a query, its first 12 words, and --rerank-docs documents)")
	addr := fs.String("addr", "127.0.0.1:50051", "gRPC address of the server (grpc and sse targets)")
	url := fs.String("url", "http://127.0.0.1:8080", "HTTP base URL (openai and sse targets; /metrics for all)")
	metricsURL := fs.String("metrics-url", "", "Prometheus endpoint scraped around each run (default: URL/metrics; \"none\": off)")
	model := fs.String("model", "", "model name sent with requests (default: the server's default)")
	rerankDocs := fs.Int("rerank-docs", 8, "documents per request of the openai-rerank target")
	label := fs.String("label", "", "name of this target in reports and charts (default: the target kind)")
	scenario := fs.String("scenario", "generate", "generate, multiturn, stream-input, cancel-storm or soak (docs/bench.md)")
	inLen := fs.String("input-len", "128", "prompt length in tokens: N, MIN:MAX (uniform) or MEAN~STD (normal); exact with token ids, ±2% with calibrated text")
	vocab := fs.String("vocab", "", "GGUF file whose vocabulary token-id prompts are drawn from (default: ask an OpenEngine server; openai needs it for token ids)")
	inputMode := fs.String("input-mode", "auto", "auto (token ids where the target takes them and a vocabulary is known, else calibrated text), tokens or text")
	maxErrRate := fs.Float64("max-error-rate", 0, "fail (exit status 1) when any run has a larger fraction of failed requests")
	outLen := fs.String("output-len", "64", "output length in tokens: N, MIN:MAX or MEAN~STD")
	prompts := fs.String("prompts", "", "JSONL file of prompts ({\"prompt\": ...} per line) instead of synthetic text")
	requests := fs.Int("requests", 64, "requests per run (per sweep level); conversations for multiturn")
	duration := fs.Duration("duration", 0, "stop starting requests after this long (0: count only)")
	conc := fs.Int("concurrency", 8, "requests in flight (with --rate: the cap, 0 none)")
	rate := fs.Float64("rate", 0, "requests per second (0: fixed concurrency)")
	constant := fs.Bool("constant-rate", false, "space arrivals evenly instead of Poisson")
	sweep := fs.String("sweep", "", "comma-separated concurrencies, e.g. 1,2,4,8,16,32,64")
	perConc := fs.Int("requests-per-concurrency", 0, "raise each run's request count to this many times its concurrency")
	turns := fs.Int("turns", 4, "turns per conversation (multiturn)")
	modes := fs.String("modes", "", "multiturn modes: append,resend (default: both where the target has sessions)")
	chunks := fs.Int("chunks", 4, "input chunks per prompt (stream-input)")
	chunkEvery := fs.Duration("chunk-interval", 50*time.Millisecond, "pause between input chunks (stream-input)")
	cancelFrac := fs.Float64("cancel-fraction", 0.5, "fraction of requests cancelled at a random point (cancel-storm)")
	sloTTFT := fs.Duration("slo-ttft", 0, "goodput SLO: time to first token (0: not checked)")
	sloITL := fs.Duration("slo-itl", 0, "goodput SLO: mean inter-token latency of a request")
	sloE2E := fs.Duration("slo-e2e", 0, "goodput SLO: end-to-end latency")
	ignoreEOS := fs.Bool("ignore-eos", true, "generate exactly the output length")
	temp := fs.Float64("temperature", 0, "sampling temperature (0: greedy)")
	seed := fs.Uint64("seed", 1, "workload seed (same seed, same requests)")
	timeout := fs.Duration("timeout", 10*time.Minute, "per-request time limit")
	jsonOut := fs.String("json", "", "write every figure and the run's configuration to this JSON file")
	svgOut := fs.String("svg", "", "write the sweep chart (throughput and p99 TTFT against concurrency) here")
	appendJSON := fs.Bool("append", false, "add this run's reports to an existing --json file instead of replacing it")
	compare := fs.Bool("compare", false, "compare two JSON files given as arguments instead of running")
	stallFrac := fs.Float64("stall-fraction", 0.05, "soak: fraction of stalled readers (stop reading after the first token for --stall-for)")
	stallFor := fs.Duration("stall-for", 10*time.Second, "soak: how long a stalled reader stops reading; more than the server's --consumer-timeout")
	stallOut := fs.Int("stall-output", 512, "soak: max_tokens of a stalled request (asks logprobs over all candidates)")
	sampleEvery := fs.Duration("sample-every", 10*time.Second, "soak: period of the RSS, goroutine and page samples")
	rssAt := fs.Duration("rss-at", 5*time.Minute, "soak: time of the RSS reference sample (at most half the duration)")
	rssTol := fs.Float64("rss-tolerance", 0.10, "soak: allowed RSS growth after the run over the reference sample (fraction)")
	slack := fs.Int("goroutine-slack", 8, "soak: server goroutines allowed above the baseline after the run")
	settleFor := fs.Duration("settle-timeout", time.Minute, "soak: how long to wait after the load for the server to go idle")
	guidedFrac := fs.Float64("guided-fraction", 0, "fraction of requests constrained to --guided-schema (OpenEngine guided.json_schema; grpc target)")
	guidedSchema := fs.String("guided-schema", "", "JSON Schema file for the guided requests")
	fs.limit("cancel-fraction", 0, 1)
	fs.limit("guided-fraction", 0, 1)
	fs.limit("stall-fraction", 0, 1)
	fs.limit("rss-tolerance", 0, 10)
	fs.limit("stall-output", 1, math.Inf(1))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *compare {
		return runBenchCompare(fs.Args(), stdout)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench serve: unexpected argument %q (A.json B.json need --compare)", fs.Arg(0))
	}
	if *scenario == bench.ScenarioSoak {
		cf := 0.10 // the soak's default; --cancel-fraction's 0.5 is cancel-storm's
		if isSet(fs, "cancel-fraction") {
			cf = *cancelFrac
		}
		d := *duration
		if d <= 0 {
			d = 30 * time.Minute
		}
		sc := bench.SoakConfig{Duration: d, Concurrency: *conc, CancelFraction: cf, StallFraction: *stallFrac,
			StallFor: *stallFor, StallOutput: *stallOut, InputMode: *inputMode,
			SampleEvery: *sampleEvery, RSSAt: *rssAt, RSSTolerance: *rssTol, GoroutineSlack: *slack,
			Settle: *settleFor, Seed: *seed}
		if isSet(fs, "timeout") {
			sc.RequestTimeout = *timeout
		}
		return runSoak(soakArgs{cfg: sc, target: *target, addr: *addr, url: *url, metricsURL: *metricsURL,
			model: *model, inLen: *inLen, outLen: *outLen, ignoreEOS: *ignoreEOS, temp: *temp, vocab: *vocab,
			jsonOut: *jsonOut, args: args}, stdout, stderr)
	}
	in, err := bench.ParseDist(*inLen)
	if err != nil {
		return err
	}
	out, err := bench.ParseDist(*outLen)
	if err != nil {
		return err
	}
	levels, err := intList(*sweep)
	if err != nil {
		return err
	}
	cfg := bench.ServeConfig{
		InputMode: *inputMode,
		Scenario:  *scenario,
		Workload:  bench.Workload{Input: in, Output: out, Seed: *seed, IgnoreEOS: *ignoreEOS, Temperature: *temp},
		Load:      bench.Load{Concurrency: *conc, Rate: *rate, Poisson: *rate > 0 && !*constant, Requests: *requests, Duration: *duration, Seed: *seed},
		Sweep:     levels, PerConcurrency: *perConc, Turns: *turns, Stream: bench.StreamInput{Chunks: *chunks, Interval: *chunkEvery},
		CancelFraction: *cancelFrac, SLO: bench.SLO{TTFT: *sloTTFT, ITL: *sloITL, E2E: *sloE2E},
		RequestTimeout: *timeout,
	}
	if *modes != "" {
		cfg.Modes = strings.Split(*modes, ",")
	}
	if cfg.Workload.Guided, err = guidedWorkload(*guidedFrac, *guidedSchema); err != nil {
		return err
	}
	if *prompts != "" {
		if cfg.Workload.Prompts, err = bench.ReadPromptsJSONL(*prompts); err != nil {
			return err
		}
	}
	if *vocab != "" {
		if cfg.Workload.Vocab, err = bench.VocabFromGGUF(*vocab); err != nil {
			return err
		}
	}
	switch *metricsURL {
	case "none":
	case "":
		cfg.MetricsURL = strings.TrimRight(*url, "/") + "/metrics"
	default:
		cfg.MetricsURL = *metricsURL
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if *rerankDocs < 1 || *rerankDocs > 2048 {
		return fmt.Errorf("bench serve: --rerank-docs %d out of range 1-2048", *rerankDocs)
	}
	t, describe, closeAll, err := openTarget(ctx, *target, *addr, *url, *model, *rerankDocs)
	if err != nil {
		return err
	}
	defer closeAll()
	file := bench.File{Tool: "oengine bench serve", Version: version, Args: args,
		Started: time.Now().UTC().Format(time.RFC3339), Machine: bench.Machine(), Server: describe}

	bar := bench.NewBar(stderr)
	reps, runErr := bench.RunServe(ctx, t, cfg, bench.Hooks{Level: bar.Begin, Progress: bar.Update})
	bar.End()
	for i := range reps {
		if *label != "" {
			reps[i].Target = *label
		}
		reps[i].Config["target"], reps[i].Config["address"] = *target, targetAddress(*target, *addr, *url)
	}
	file.Reports = reps
	if *appendJSON && *jsonOut != "" {
		if old, err := bench.ReadJSON(*jsonOut); err == nil {
			file.Reports = append(old.Reports, reps...)
		}
	}
	// Files first: a closed stdout (a pipe to head) must not lose them.
	var wrote []string
	if *jsonOut != "" {
		if err := bench.WriteJSON(*jsonOut, file); err != nil {
			return err
		}
		wrote = append(wrote, *jsonOut)
	}
	if *svgOut != "" && len(file.Reports) > 0 {
		if err := writeSVG(*svgOut, file.Reports); err != nil {
			return err
		}
		wrote = append(wrote, *svgOut)
	}
	if len(reps) > 0 {
		bench.WriteTable(stdout, reps)
	}
	for _, w := range wrote {
		fmt.Fprintf(stdout, "wrote %s\n", w)
	}
	if runErr != nil {
		return runErr
	}
	return bench.CheckErrorRate(reps, *maxErrRate)
}

func targetAddress(target, addr, url string) string {
	switch target {
	case "grpc":
		return addr
	case "sse":
		return addr + " + " + url
	}
	return url
}

// openTarget connects the named target and describes the server.
func openTarget(ctx context.Context, kind, addr, url, model string, rerankDocs int) (bench.Target, map[string]any, func(), error) {
	switch kind {
	case "grpc", "sse":
		g, err := bench.DialGRPC(addr, model)
		if err != nil {
			return nil, nil, nil, err
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		desc := g.Describe(dctx)
		cancel()
		if len(desc) == 0 {
			g.Close()
			return nil, nil, nil, fmt.Errorf("bench: no OpenEngine server answers at %s", addr)
		}
		if kind == "grpc" {
			return g, desc, func() { g.Close() }, nil
		}
		s, err := bench.NewSSE(ctx, url, g)
		if err != nil {
			g.Close()
			return nil, nil, nil, err
		}
		return s, desc, func() { s.Close(); g.Close() }, nil
	case "openai", "openai-chat", "openai-embeddings", "openai-rerank":
		o := bench.NewOpenAI(url, model)
		switch kind {
		case "openai-chat":
			o = bench.NewOpenAIChat(url, model)
		case "openai-embeddings":
			o = bench.NewOpenAIEmbeddings(url, model)
		case "openai-rerank":
			o = bench.NewOpenAIRerank(url, model, rerankDocs)
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ids := o.Models(dctx)
		cancel()
		desc := map[string]any{"models": ids}
		if model == "" && len(ids) > 0 {
			o.Model = ids[0]
		}
		return o, desc, func() { o.Close() }, nil
	}
	return nil, nil, nil, fmt.Errorf("bench: unknown target %q (grpc, sse, openai, openai-chat, openai-embeddings or openai-rerank)", kind)
}

// guidedWorkload reads --guided-fraction and --guided-schema (nil when no
// request is guided).
func guidedWorkload(frac float64, path string) (*bench.Guided, error) {
	switch {
	case frac == 0 && path == "":
		return nil, nil
	case path == "":
		return nil, fmt.Errorf("bench serve: --guided-fraction %g needs --guided-schema FILE", frac)
	case frac == 0:
		return nil, fmt.Errorf("bench serve: --guided-schema needs --guided-fraction (0, 1]")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench serve: %w", err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("bench serve: --guided-schema %s is not JSON", path)
	}
	return &bench.Guided{Fraction: frac, JSONSchema: string(b), Source: filepath.Base(path)}, nil
}
