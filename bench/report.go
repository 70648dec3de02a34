package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is every figure of one run, plus the configuration that made it.
type Report struct {
	Config      map[string]any     `json:"config"`
	Scenario    string             `json:"scenario"`
	Target      string             `json:"target"`
	Concurrency int                `json:"concurrency,omitempty"`
	Rate        float64            `json:"rate,omitempty"`
	Elapsed     float64            `json:"elapsed_s"`
	Requests    int                `json:"requests"`
	Succeeded   int                `json:"succeeded"`
	Cancelled   int                `json:"cancelled"`
	Errors      map[string]int     `json:"errors"`
	ErrorText   map[string]string  `json:"error_examples,omitempty"` // first message of each kind
	ReqPerS     float64            `json:"request_throughput"`
	OutTokPerS  float64            `json:"output_tokens_per_s"`
	InTokPerS   float64            `json:"input_tokens_per_s"`
	InTokens    int                `json:"input_tokens"`
	OutTokens   int                `json:"output_tokens"`
	Cached      int                `json:"cached_prompt_tokens"`
	Goodput     float64            `json:"goodput"`
	SLO         SLO                `json:"slo"`
	TTFTms      Summary            `json:"ttft_ms"`
	ITLms       Summary            `json:"itl_ms"`
	E2Ems       Summary            `json:"e2e_ms"`
	Server      map[string]float64 `json:"server_metrics_delta,omitempty"`

	// Lengths: what was asked next to what the server counted per request
	// (input: prompt_tokens less the conversation history; output:
	// completion_tokens), and how many requests missed the asked length.
	InputMethod      string       `json:"input_method,omitempty"`
	Calibration      *Calibration `json:"calibration,omitempty"`
	InputAsked       string       `json:"input_tokens_asked,omitempty"`
	InputMeasured    Summary      `json:"input_tokens_measured"`
	InputMismatches  int          `json:"input_length_mismatches"`
	OutputAsked      string       `json:"output_tokens_asked,omitempty"`
	OutputMeasured   Summary      `json:"output_tokens_measured"`
	OutputMismatches int          `json:"output_length_mismatches"`
	LengthExamples   []string     `json:"length_mismatch_examples,omitempty"` // the first few
	// ErrorRate is the fraction of requests that failed (cancelled on
	// purpose is not a failure).
	ErrorRate float64 `json:"error_rate"`
	// ContextStops counts conversations stopped before a turn that would
	// not fit MaxContext (not errors, not requests).
	ContextStops int `json:"context_stops"`
	MaxContext   int `json:"max_context_length,omitempty"`
	// GuidedRequests were sent constrained to a JSON Schema (succeeded or
	// not), GuidedOutTokens their output tokens (docs/bench.md: guided
	// requests).
	GuidedRequests  int `json:"guided_requests,omitempty"`
	GuidedOutTokens int `json:"guided_output_tokens,omitempty"`
}

// maxLengthExamples bounds Report.LengthExamples.
const maxLengthExamples = 5

// Aggregate turns per-request results into a report.
func Aggregate(rs []Result, elapsed time.Duration, slo SLO) Report {
	rep := Report{Errors: map[string]int{}, SLO: slo, Elapsed: elapsed.Seconds(), Requests: len(rs)}
	var ttft, itl, e2e []time.Duration
	var in, out []float64
	for _, r := range rs {
		if r.ContextStop {
			rep.ContextStops++
			rep.Requests--
			continue
		}
		if n, ok := r.MeasuredInput(); ok && r.Err == "" && !r.Cancelled {
			in = append(in, float64(n))
		}
		if r.InputOff() {
			rep.InputMismatches++
			rep.lengthExample(fmt.Sprintf("input: asked %d, server counted %d (prompt_tokens %d, history %d)",
				r.AskedInput, r.PromptTokens-r.History, r.PromptTokens, r.History))
		}
		if r.OutputOff() {
			rep.OutputMismatches++
			rep.lengthExample(fmt.Sprintf("output: asked %d (ignore_eos %v), got %d", r.AskedOutput, r.ExactOutput, r.OutputTokens))
		}
		switch {
		case r.Cancelled:
			rep.Cancelled++
		case r.Err != "":
			kind := r.ErrKind
			if kind == "" {
				kind = "error"
			}
			rep.Errors[kind]++
			if rep.ErrorText == nil {
				rep.ErrorText = map[string]string{}
			}
			if _, ok := rep.ErrorText[kind]; !ok {
				rep.ErrorText[kind] = r.Err
			}
		default:
			rep.Succeeded++
			out = append(out, float64(r.OutputTokens))
			if r.OutputTokens > 0 {
				ttft = append(ttft, r.TTFT)
			}
			e2e = append(e2e, r.E2E)
			itl = append(itl, r.ITLs...)
		}
		rep.InTokens += r.PromptTokens
		rep.OutTokens += r.OutputTokens
		rep.Cached += r.CachedTokens
		if r.Guided {
			rep.GuidedRequests++
			rep.GuidedOutTokens += r.OutputTokens
		}
	}
	if elapsed > 0 {
		rep.ReqPerS = float64(rep.Succeeded) / elapsed.Seconds()
		rep.OutTokPerS = float64(rep.OutTokens) / elapsed.Seconds()
		rep.InTokPerS = float64(rep.InTokens) / elapsed.Seconds()
	}
	rep.Goodput = Goodput(rs, slo, elapsed)
	rep.InputMeasured, rep.OutputMeasured = Summarize(in), Summarize(out)
	if rep.Requests > 0 {
		rep.ErrorRate = float64(rep.Requests-rep.Succeeded-rep.Cancelled) / float64(rep.Requests)
	}
	rep.TTFTms = Summarize(ms(ttft))
	rep.ITLms = Summarize(ms(itl))
	rep.E2Ems = Summarize(ms(e2e))
	return rep
}

func (rep *Report) lengthExample(s string) {
	if len(rep.LengthExamples) < maxLengthExamples {
		rep.LengthExamples = append(rep.LengthExamples, s)
	}
}

// Errors returns the number of failed requests.
func (rep Report) errorCount() int {
	n := 0
	for _, c := range rep.Errors {
		n += c
	}
	return n
}

// ErrTooManyErrors is wrapped by CheckErrorRate's error.
var ErrTooManyErrors = errors.New("bench: too many failed requests")

// CheckErrorRate fails when any report's error fraction exceeds limit, or
// a report had no request at all or only failed ones (whatever the limit:
// a level where nothing succeeded measured nothing); the error names each
// such run.
func CheckErrorRate(reps []Report, limit float64) error {
	var bad []string
	for _, r := range reps {
		switch {
		case r.Requests == 0 && r.ContextStops == 0:
			bad = append(bad, fmt.Sprintf("%s conc %d: no request ran", r.Scenario, r.Concurrency))
		case r.Requests > 0 && r.errorCount() >= r.Requests:
			bad = append(bad, fmt.Sprintf("%s conc %d: every one of %d requests failed", r.Scenario, r.Concurrency, r.Requests))
		case r.ErrorRate > limit:
			bad = append(bad, fmt.Sprintf("%s conc %d: %d of %d failed (%.3g > %g)", r.Scenario, r.Concurrency,
				r.errorCount(), r.Requests, r.ErrorRate, limit))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w (--max-error-rate %g): %s", ErrTooManyErrors, limit, strings.Join(bad, "; "))
}

// WriteTable prints reports as a readable table, the asked and measured
// token lengths, then per run the length mismatches, error kinds and a
// digest of the server's figures (all of them are in the JSON).
func WriteTable(w io.Writer, reps []Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tscenario\tconc\treqs\tok\tcxl\terr\treq/s\tin tok/s\tout tok/s\tgoodput\tTTFT p50\tTTFT p99\tITL p50\tITL p99\tE2E p50\tE2E p99\t")
	for _, r := range reps {
		errs := 0
		for _, n := range r.Errors {
			errs += n
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.1f\t%.1f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Target, r.Scenario, r.Concurrency, r.Requests, r.Succeeded, r.Cancelled, errs, r.ReqPerS, r.InTokPerS, r.OutTokPerS, r.Goodput,
			msString(r.TTFTms.P50), msString(r.TTFTms.P99), msString(r.ITLms.P50), msString(r.ITLms.P99),
			msString(r.E2Ems.P50), msString(r.E2Ems.P99))
	}
	tw.Flush()
	fmt.Fprintln(w, "(latencies in ms; cxl: cancelled on purpose by the workload)")
	writeLengths(w, reps)
	for _, r := range reps {
		if r.InputMismatches > 0 || r.OutputMismatches > 0 {
			fmt.Fprintf(w, "length mismatches (%s, conc %d): input %d, output %d\n", r.Scenario, r.Concurrency, r.InputMismatches, r.OutputMismatches)
			for _, e := range r.LengthExamples {
				fmt.Fprintf(w, "  e.g. %s\n", e)
			}
		}
		if r.GuidedRequests > 0 {
			fmt.Fprintf(w, "guided (%s, conc %d): %d of %d requests constrained to a JSON Schema, %d of %d output tokens\n",
				r.Scenario, r.Concurrency, r.GuidedRequests, r.Requests, r.GuidedOutTokens, r.OutTokens)
		}
		if r.ContextStops > 0 {
			fmt.Fprintf(w, "context (%s, conc %d): %d conversations stopped before a turn that would exceed %d tokens\n",
				r.Scenario, r.Concurrency, r.ContextStops, r.MaxContext)
		}
		if len(r.Errors) > 0 {
			kinds := make([]string, 0, len(r.Errors))
			for k, n := range r.Errors {
				kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
			}
			sort.Strings(kinds)
			fmt.Fprintf(w, "errors (%s, conc %d): %s\n", r.Scenario, r.Concurrency, strings.Join(kinds, " "))
			for _, k := range sortedKeys(r.ErrorText) {
				msg := r.ErrorText[k]
				if len(msg) > 160 {
					msg = msg[:160] + "..."
				}
				fmt.Fprintf(w, "  e.g. %s: %s\n", k, msg)
			}
		}
		if d := ServerDigest(r.Server); d != "" {
			fmt.Fprintf(w, "server (%s, conc %d): %s\n", r.Scenario, r.Concurrency, d)
		}
	}
}

// writeLengths prints the asked and measured token lengths of each run,
// then the input method of the first (RunServe uses one for all runs).
func writeLengths(w io.Writer, reps []Report) {
	if len(reps) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tscenario\tconc\tin asked\tin mean\tin p50\tin p99\tin off\tout asked\tout mean\tout p50\tout p99\tout off\t")
	for _, r := range reps {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.1f\t%g\t%g\t%d\t%s\t%.1f\t%g\t%g\t%d\t\n", r.Target, r.Scenario, r.Concurrency,
			r.InputAsked, r.InputMeasured.Mean, r.InputMeasured.P50, r.InputMeasured.P99, r.InputMismatches,
			r.OutputAsked, r.OutputMeasured.Mean, r.OutputMeasured.P50, r.OutputMeasured.P99, r.OutputMismatches)
	}
	tw.Flush()
	fmt.Fprintln(w, "(tokens per request as the server counts them; input excludes conversation history; off: requests not of the asked length)")
	if m := reps[0].InputMethod; m != "" {
		fmt.Fprintf(w, "input: %s\n", m)
	}
}

// msString prints a latency with three significant digits.
func msString(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 1:
		return fmt.Sprintf("%.3f", v)
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// digestItems are the server figures WriteTable shows: a label, the
// substring of the series name, the suffix of the figure, and whether to
// add up label sets (counters) or keep the largest (gauges).
var digestItems = []struct {
	label, name, suffix string
	sum                 bool
}{
	{"kv_peak", "kv_cache_usage", ":peak", false},
	{"preemptions", "preemption", ":delta", true},
	{"prefix_hits", "prefix_cache_hits", ":delta", true},
	{"prefix_queries", "prefix_cache_queries", ":delta", true},
	{"prompt_tokens", "prompt_tokens_total", ":delta", true},
	{"gen_tokens", "generation_tokens_total", ":delta", true},
	{"running_after", "num_requests_running", ":after", false},
	{"rejected", "request_rejected", ":delta", true},
}

// ServerDigest summarises server figures in one line ("" when none).
func ServerDigest(figs map[string]float64) string {
	var parts []string
	for _, it := range digestItems {
		v, found := 0.0, false
		for k, x := range figs {
			if !strings.HasSuffix(k, it.suffix) || !strings.Contains(metricName(strings.TrimSuffix(k, it.suffix)), it.name) {
				continue
			}
			switch {
			case it.sum:
				v += x
			case !found || x > v:
				v = x
			}
			found = true
		}
		if found {
			parts = append(parts, fmt.Sprintf("%s=%g", it.label, math.Round(v*1000)/1000))
		}
	}
	return strings.Join(parts, " ")
}

// File is the JSON document a run writes.
type File struct {
	Tool    string         `json:"tool"`
	Version string         `json:"version"`
	Args    []string       `json:"args,omitempty"`    // the command line's flags
	Started string         `json:"started,omitempty"` // RFC 3339
	Machine map[string]any `json:"machine"`
	Server  map[string]any `json:"server,omitempty"` // engine name, version, model as the target reports them
	Reports []Report       `json:"reports"`
	Soak    *SoakReport    `json:"soak,omitempty"` // a soak run (docs/bench.md: soak)
}

// WriteJSON writes f to path.
func WriteJSON(path string, f File) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadJSON reads a file written by WriteJSON.
func ReadJSON(path string) (File, error) {
	var f File
	b, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("bench: %s: %w", path, err)
	}
	return f, nil
}

// Compare prints B/A ratios of the headline figures for reports that match
// by scenario and concurrency.
func Compare(w io.Writer, a, b File) {
	type key struct {
		s string
		c int
	}
	idx := map[key]Report{}
	for _, r := range a.Reports {
		idx[key{r.Scenario, r.Concurrency}] = r
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tconc\treq/s B/A\tout tok/s B/A\tTTFT p50 B/A\tTTFT p99 B/A\tITL p50 B/A\tE2E p99 B/A\t")
	for _, rb := range b.Reports {
		ra, ok := idx[key{rb.Scenario, rb.Concurrency}]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", rb.Scenario, rb.Concurrency,
			ratio(rb.ReqPerS, ra.ReqPerS), ratio(rb.OutTokPerS, ra.OutTokPerS),
			ratio(rb.TTFTms.P50, ra.TTFTms.P50), ratio(rb.TTFTms.P99, ra.TTFTms.P99),
			ratio(rb.ITLms.P50, ra.ITLms.P50), ratio(rb.E2Ems.P99, ra.E2Ems.P99))
	}
	tw.Flush()
}

func ratio(b, a float64) string {
	if a == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", b/a)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
