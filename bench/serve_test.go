package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"oengine/engine"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func fixedWorkload(in, out int) Workload {
	return Workload{Input: Fixed(in), Output: Fixed(out), Seed: 1, IgnoreEOS: true}
}

// serverDelta returns the run's change of a counter scraped from
// /metrics, summed over label sets.
func serverDelta(rep Report, name string) (float64, bool) {
	var sum float64
	found := false
	for k, v := range rep.Server {
		if strings.HasPrefix(k, name) && strings.HasSuffix(k, ":delta") {
			sum += v
			found = true
		}
	}
	return sum, found
}

func TestServeGenerateGRPC(t *testing.T) {
	ts := startServer(t)
	g := dial(t, ts)
	cfg := ServeConfig{Scenario: ScenarioGenerate, Workload: fixedWorkload(8, 6),
		Load: Load{Concurrency: 4, Requests: 12}, MetricsURL: ts.httpBase + "/metrics",
		SLO: SLO{TTFT: time.Minute}}
	reps, err := RunServe(testCtx(t), g, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 {
		t.Fatalf("%d reports, want 1", len(reps))
	}
	r := reps[0]
	if r.Succeeded != 12 || len(r.Errors) != 0 {
		t.Fatalf("succeeded %d errors %v, want 12 and none", r.Succeeded, r.Errors)
	}
	if r.OutTokens != 12*6 {
		t.Errorf("output tokens %d, want %d (ignore_eos, max 6)", r.OutTokens, 12*6)
	}
	if r.TTFTms.Count != 12 || r.ITLms.Count != 12*5 {
		t.Errorf("TTFT samples %d, ITL samples %d; want 12 and 60", r.TTFTms.Count, r.ITLms.Count)
	}
	// Token-id prompts: every prompt is exactly 8 tokens in the server's
	// count, and the report's totals are the server's.
	if r.InTokens != 12*8 || r.InputMeasured.Min != 8 || r.InputMeasured.Max != 8 || r.InputMismatches != 0 {
		t.Errorf("input tokens %d, measured %+v, mismatches %d; want 96, exactly 8 each", r.InTokens, r.InputMeasured, r.InputMismatches)
	}
	if !strings.HasPrefix(r.InputMethod, "token ids (vocabulary: server") {
		t.Errorf("input method %q, want token ids from the server's vocabulary", r.InputMethod)
	}
	// (every prompt token is looked up in the prefix cache once)
	if d, ok := serverDelta(r, "oengine:prefix_cache_queries_total"); !ok || int(d) != r.InTokens {
		t.Errorf("scraped prefix_cache_queries delta = %v (found %v), report says %d input tokens", d, ok, r.InTokens)
	}
	if r.OutputMeasured.Min != 6 || r.OutputMeasured.Max != 6 || r.OutputMismatches != 0 || r.ErrorRate != 0 {
		t.Errorf("output measured %+v mismatches %d error rate %v", r.OutputMeasured, r.OutputMismatches, r.ErrorRate)
	}
	if r.Goodput != r.ReqPerS {
		t.Errorf("goodput %v != request throughput %v under a 1-minute TTFT SLO", r.Goodput, r.ReqPerS)
	}
	if d, ok := serverDelta(r, "oengine:generation_tokens_total"); !ok || d != 72 {
		t.Errorf("scraped generation_tokens delta = %v (found %v), want 72; figures %v", d, ok, r.Server)
	}
	if r.Target != "grpc" || r.Concurrency != 4 {
		t.Errorf("report labels %q c=%d", r.Target, r.Concurrency)
	}
}

func TestServeSweepAndChart(t *testing.T) {
	ts := startServer(t)
	g := dial(t, ts)
	cfg := ServeConfig{Workload: fixedWorkload(4, 3), Load: Load{Requests: 4}, Sweep: []int{1, 2, 4}}
	var levels []int
	reps, err := RunServe(testCtx(t), g, cfg, Hooks{Level: func(_ string, c int) { levels = append(levels, c) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 3 || len(levels) != 3 {
		t.Fatalf("%d reports, %d levels; want 3", len(reps), len(levels))
	}
	for i, c := range []int{1, 2, 4} {
		if reps[i].Concurrency != c || reps[i].Succeeded != 4 {
			t.Errorf("level %d: conc %d ok %d", i, reps[i].Concurrency, reps[i].Succeeded)
		}
	}
	var svg bytes.Buffer
	if err := WriteSweepSVG(&svg, reps); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svg.String(), "<polyline") && !strings.Contains(svg.String(), "<path") {
		t.Errorf("chart has no line:\n%s", svg.String())
	}
}

func TestServeRateBoundedByDuration(t *testing.T) {
	ts := startServer(t)
	g := dial(t, ts)
	cfg := ServeConfig{Workload: fixedWorkload(4, 2), Load: Load{Rate: 40, Poisson: true, Duration: 400 * time.Millisecond, Seed: 3}}
	start := time.Now()
	reps, err := RunServe(testCtx(t), g, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Fatalf("run took %v; a duration bound must stop it", el)
	}
	r := reps[0]
	// 40/s for 0.4 s: about 16 arrivals; allow wide Poisson spread.
	if r.Requests < 3 || r.Requests > 60 || r.Succeeded != r.Requests {
		t.Errorf("requests %d ok %d, want ~16 all ok", r.Requests, r.Succeeded)
	}
}

func TestServeCancelStorm(t *testing.T) {
	ts := startServer(t)
	g := dial(t, ts)
	cfg := ServeConfig{Scenario: ScenarioCancel, CancelFraction: 0.5, Workload: fixedWorkload(8, 12),
		Load: Load{Concurrency: 8, Requests: 16}, MetricsURL: ts.httpBase + "/metrics"}
	reps, err := RunServe(testCtx(t), g, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	if r.Cancelled == 0 || r.Succeeded == 0 {
		t.Fatalf("cancelled %d succeeded %d: a 0.5 storm over 16 requests should have both", r.Cancelled, r.Succeeded)
	}
	if r.Cancelled+r.Succeeded != 16 || len(r.Errors) != 0 {
		t.Errorf("cancelled %d + ok %d != 16, errors %v", r.Cancelled, r.Succeeded, r.Errors)
	}
	// The server must let go of every cancelled sequence.
	deadline := time.Now().Add(30 * time.Second)
	for ts.engine.Load().Running != 0 || ts.engine.Load().Waiting != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("engine still busy after the storm: %+v", ts.engine.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestServeOpenAITarget(t *testing.T) {
	e := tinyEngine(t, engine.Hooks{})
	o := NewOpenAI(openAIShim(t, e), "tiny")
	defer o.Close()
	w := fixedWorkload(6, 5)
	w.Vocab = tinyVocab(t)
	cfg := ServeConfig{Workload: w, Load: Load{Concurrency: 3, Requests: 6}}
	reps, err := RunServe(testCtx(t), o, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	if r.Succeeded != 6 || r.OutTokens != 30 || r.ITLms.Count != 6*4 || r.InTokens != 36 || r.InputMismatches != 0 {
		t.Errorf("ok %d out %d itl %d in %d (mismatches %d); want 6, 30, 24, 36, 0", r.Succeeded, r.OutTokens, r.ITLms.Count, r.InTokens, r.InputMismatches)
	}
	// resend multi-turn works over any OpenAI server
	w = fixedWorkload(4, 3)
	w.Vocab = tinyVocab(t)
	cfg = ServeConfig{Scenario: ScenarioMultiTurn, Turns: 3, Workload: w, Load: Load{Concurrency: 2, Requests: 2}}
	reps, err = RunServe(testCtx(t), o, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].Scenario != "multiturn-resend" || reps[0].Succeeded != 6 {
		t.Fatalf("multiturn over openai: %+v", reps)
	}
}

// TestGRPCPromptsExact checks on the server side that token-id prompts
// have exactly the asked length (the engine's hook sees each admitted
// prompt) and come from ordinary tokens of the vocabulary.
func TestGRPCPromptsExact(t *testing.T) {
	ts := startServer(t)
	g := dial(t, ts)
	v, err := g.FetchVocab(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	want := tinyVocab(t)
	if v.Size != want.Size || len(v.IDs) == 0 || len(v.IDs) > len(want.IDs)+256 {
		t.Fatalf("server vocabulary: size %d, %d ordinary; the GGUF says %d, %d", v.Size, len(v.IDs), want.Size, len(want.IDs))
	}
	inPool := map[uint32]bool{}
	for _, id := range want.IDs {
		inPool[id] = true
	}
	for _, id := range v.IDs {
		if id < 3 { // the synthetic SentencePiece vocabulary's <unk>, <s>, </s>
			t.Fatalf("control token %d in the server-derived pool", id)
		}
	}
	w := fixedWorkload(23, 2)
	w.Vocab = want
	gen := NewGenerator(w)
	for range 20 {
		r := gen.Next()
		if len(r.TokenIDs) != 23 || r.InputTokens != 23 {
			t.Fatalf("request with %d ids (asked %d), want 23", len(r.TokenIDs), r.InputTokens)
		}
		for _, id := range r.TokenIDs {
			if !inPool[id] {
				t.Fatalf("id %d is not an ordinary token", id)
			}
		}
		res := g.Generate(testCtx(t), r)
		if res.Err != "" || res.PromptTokens != 23 || res.OutputTokens != 2 {
			t.Fatalf("server counted prompt %d output %d (err %q), want 23 and 2", res.PromptTokens, res.OutputTokens, res.Err)
		}
	}
}

// TestGRPCFailingTargetFailsRun: a model the server does not serve fails
// the run before it starts (no vocabulary, no calibration).
func TestGRPCFailingTargetFailsRun(t *testing.T) {
	ts := startServer(t)
	g, err := DialGRPC(ts.grpcAddr, "no-such-model")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	_, err = RunServe(testCtx(t), g, ServeConfig{Workload: fixedWorkload(8, 2), Load: Load{Requests: 2}}, Hooks{})
	if err == nil || !strings.Contains(err.Error(), "MODEL_NOT_FOUND") {
		t.Fatalf("run against an unknown model: err %v, want a MODEL_NOT_FOUND failure", err)
	}
}

// TestGRPCMultiTurnContextStop: conversations stop (reported, not failed)
// before a turn that would exceed the server's max_context_length.
func TestGRPCMultiTurnContextStop(t *testing.T) {
	ts := startServer(t)
	g := dial(t, ts)
	maxCtx, err := g.ContextLength(testCtx(t))
	if err != nil || maxCtx <= 0 {
		t.Fatalf("context length %d, %v", maxCtx, err)
	}
	in, out := maxCtx/5, 4 // the fifth turn would need 5*(in+out) > maxCtx
	wantTurns := maxCtx / (in + out)
	cfg := ServeConfig{Scenario: ScenarioMultiTurn, Modes: []string{"resend"}, Turns: 8,
		Workload: fixedWorkload(in, out), Load: Load{Concurrency: 2, Requests: 2}}
	reps, err := RunServe(testCtx(t), g, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	if r.ContextStops != 2 || r.Succeeded != 2*wantTurns || len(r.Errors) != 0 || r.MaxContext != maxCtx {
		t.Fatalf("stops %d ok %d errors %v max %d; want 2 stops after %d turns each (context %d)",
			r.ContextStops, r.Succeeded, r.Errors, r.MaxContext, wantTurns, maxCtx)
	}
	if r.InputMeasured.Min != float64(in) || r.InputMeasured.Max != float64(in) || r.InputMismatches != 0 {
		t.Errorf("per-turn input %+v, want exactly %d", r.InputMeasured, in)
	}
}

func TestServeOpenAIHTTPError(t *testing.T) {
	o := NewOpenAI("http://127.0.0.1:1", "m") // nothing listens on port 1
	r := o.Generate(testCtx(t), Request{Prompt: "a", MaxTokens: 2})
	if r.Err == "" || r.ErrKind != "transport" {
		t.Fatalf("want a transport error, got %+v", r)
	}
}

// skipUnimplemented skips when the in-process server lacks a service.
func skipUnimplemented(t *testing.T, what string, err error, kind string) {
	t.Helper()
	if status.Code(err) == codes.Unimplemented || kind == "UNIMPLEMENTED" {
		t.Skipf("%s: the server does not implement it yet (%v)", what, err)
	}
}

func TestServeMultiTurn(t *testing.T) {
	ts := startServerOpts(t, true)
	g := dial(t, ts)
	const turns = 3
	for _, mode := range []string{"resend", "append"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "append" {
				if _, err := g.openSession(testCtx(t), "", ""); err != nil {
					skipUnimplemented(t, "OpenEngineSessions", err, "")
					t.Fatal(err)
				}
			}
			cfg := ServeConfig{Scenario: ScenarioMultiTurn, Modes: []string{mode}, Turns: turns,
				Workload: fixedWorkload(6, 4), Load: Load{Concurrency: 2, Requests: 4}}
			reps, err := RunServe(testCtx(t), g, cfg, Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			r := reps[0]
			if r.Scenario != "multiturn-"+mode || r.Succeeded != 4*turns || len(r.Errors) != 0 {
				t.Fatalf("%s: ok %d errors %v, want %d turns ok", r.Scenario, r.Succeeded, r.Errors, 4*turns)
			}
			if mode == "append" && r.Cached == 0 {
				t.Errorf("append turns reused no cached prompt tokens")
			}
			// every turn's new input is exactly 6 tokens in the server's count
			if r.InputMeasured.Min != 6 || r.InputMeasured.Max != 6 || r.InputMismatches != 0 || r.OutputMismatches != 0 {
				t.Errorf("per-turn input %+v, mismatches in %d out %d; want exactly 6 (%v)",
					r.InputMeasured, r.InputMismatches, r.OutputMismatches, r.LengthExamples)
			}
		})
	}
}

func TestServeStreamInput(t *testing.T) {
	ts := startServerOpts(t, true)
	g := dial(t, ts)
	probe := g.GenerateStream(testCtx(t), Request{Prompt: "one two three", MaxTokens: 2, IgnoreEOS: true}, StreamInput{Chunks: 2})
	if probe.Err != "" {
		skipUnimplemented(t, "OpenEngineStreaming", nil, probe.ErrKind)
		t.Fatalf("probe: %s (%s)", probe.Err, probe.ErrKind)
	}
	cfg := ServeConfig{Scenario: ScenarioStreamInput, Stream: StreamInput{Chunks: 4, Interval: 5 * time.Millisecond},
		Workload: fixedWorkload(12, 4), Load: Load{Concurrency: 2, Requests: 4}}
	reps, err := RunServe(testCtx(t), g, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	if r.Succeeded != 4 || r.OutTokens != 16 {
		t.Fatalf("ok %d out %d, errors %v", r.Succeeded, r.OutTokens, r.Errors)
	}
	if r.InputMeasured.Min != 12 || r.InputMeasured.Max != 12 {
		t.Errorf("streamed token-id input measured %+v, want exactly 12", r.InputMeasured)
	}
	// TTFT counts from end of input: it must be shorter than the pacing
	// of the whole input (3 gaps of 5 ms) plus generation would suggest.
	if r.TTFTms.Min <= 0 {
		t.Errorf("TTFT min %v", r.TTFTms.Min)
	}
}

func TestServeSSE(t *testing.T) {
	ts := startServerOpts(t, true)
	g := dial(t, ts)
	s, err := NewSSE(testCtx(t), ts.httpBase, g)
	if err != nil {
		skipUnimplemented(t, "OpenEngineSessions (needed by the SSE route)", err, "")
		t.Fatal(err)
	}
	defer s.Close()
	probe := s.Generate(testCtx(t), Request{Prompt: "hello"})
	if probe.ErrKind == "http_404" || probe.ErrKind == "http_405" {
		t.Skipf("the SSE route is not served yet: %s", probe.Err)
	}
	cfg := ServeConfig{Workload: fixedWorkload(60, 4), Load: Load{Concurrency: 2, Requests: 4}}
	reps, err := RunServe(testCtx(t), s, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	if r.Succeeded != 4 || r.OutTokens == 0 {
		t.Fatalf("sse: ok %d out %d errors %v", r.Succeeded, r.OutTokens, r.Errors)
	}
	// The route takes text: calibrated to 60 tokens ±2% (±2) in the
	// server's count, template included.
	if r.Calibration == nil || !strings.HasPrefix(r.InputMethod, "calibrated text") {
		t.Fatalf("input method %q, want calibrated text", r.InputMethod)
	}
	if r.InputMeasured.Min < 58 || r.InputMeasured.Max > 62 || r.InputMismatches != 0 || r.OutputAsked != "server" {
		t.Errorf("measured input %+v mismatches %d output asked %q", r.InputMeasured, r.InputMismatches, r.OutputAsked)
	}
}
