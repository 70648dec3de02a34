package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	cases := []struct {
		name string
		xs   []float64
		p    float64
		want float64
	}{
		{"single", []float64{7}, 99, 7},
		{"median odd", []float64{3, 1, 2}, 50, 2},
		{"median even interpolates", []float64{1, 2, 3, 4}, 50, 2.5},
		{"p90 of 1..10", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9.1},
		{"p99 of 1..100", seq(100), 99, 99.01},
		{"p0 is min", []float64{5, 9, 1}, 0, 1},
		{"p100 is max", []float64{5, 9, 1}, 100, 9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Percentile(c.xs, c.p)
			if math.Abs(got-c.want) > 1e-9 {
				t.Fatalf("Percentile(%v, %v) = %v, want %v", c.xs, c.p, got, c.want)
			}
		})
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Fatal("empty sample must give NaN")
	}
}

func seq(n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	return xs
}

func TestSummarizeDoesNotReorder(t *testing.T) {
	xs := []float64{3, 1, 2}
	s := Summarize(xs)
	if xs[0] != 3 || s.Mean != 2 || s.Min != 1 || s.Max != 3 || s.Count != 3 {
		t.Fatalf("summary %+v of %v", s, xs)
	}
}

func TestGoodput(t *testing.T) {
	ms := time.Millisecond
	rs := []Result{
		{TTFT: 50 * ms, E2E: 500 * ms, ITLs: []time.Duration{10 * ms, 10 * ms}},
		{TTFT: 150 * ms, E2E: 500 * ms},                                         // TTFT too slow
		{TTFT: 50 * ms, E2E: 500 * ms, ITLs: []time.Duration{30 * ms, 40 * ms}}, // ITL too slow
		{TTFT: 10 * ms, Err: "boom"},                                            // failed
		{TTFT: 90 * ms, E2E: 900 * ms},
		{TTFT: 10 * ms, E2E: 20 * ms, Cancelled: true}, // cancelled on purpose
	}
	slo := SLO{TTFT: 100 * ms, ITL: 20 * ms}
	if got := Goodput(rs, slo, 2*time.Second); got != 1.0 {
		t.Fatalf("goodput = %v, want 1.0 (2 good in 2 s)", got)
	}
	if got := Goodput(rs, SLO{}, time.Second); got != 4 {
		t.Fatalf("goodput without SLO = %v, want 4 (every success)", got)
	}
}

func TestAggregateAndCompare(t *testing.T) {
	ms := time.Millisecond
	rs := []Result{
		{TTFT: 10 * ms, E2E: 100 * ms, OutputTokens: 10, PromptTokens: 5, ITLs: []time.Duration{10 * ms}},
		{TTFT: 30 * ms, E2E: 300 * ms, OutputTokens: 30, PromptTokens: 5, CachedTokens: 4},
		{Cancelled: true, OutputTokens: 2},
		{Err: "x", ErrKind: "RESOURCE_EXHAUSTED"},
	}
	a := Aggregate(rs, 2*time.Second, SLO{})
	a.Scenario, a.Concurrency, a.Target = "fixed", 4, "a"
	if a.Succeeded != 2 || a.Cancelled != 1 || a.Errors["RESOURCE_EXHAUSTED"] != 1 {
		t.Fatalf("counts %+v", a)
	}
	if a.OutTokens != 42 || a.OutTokPerS != 21 || a.ReqPerS != 1 || a.Cached != 4 {
		t.Fatalf("throughput %+v", a)
	}
	if a.TTFTms.P50 != 20 || a.E2Ems.Max != 300 {
		t.Fatalf("latency %+v %+v", a.TTFTms, a.E2Ems)
	}
	b := a
	b.OutTokPerS = 42
	b.Target = "b"
	var out bytes.Buffer
	Compare(&out, File{Reports: []Report{a}}, File{Reports: []Report{b}})
	if !strings.Contains(out.String(), "2.00x") {
		t.Fatalf("compare output lacks the 2.00x throughput ratio:\n%s", out.String())
	}
	out.Reset()
	WriteTable(&out, []Report{a})
	if !strings.Contains(out.String(), "RESOURCE_EXHAUSTED=1") {
		t.Fatalf("table lacks error kinds:\n%s", out.String())
	}
	out.Reset()
	if err := WriteSweepSVG(&out, []Report{a, b}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "<svg") || strings.Count(out.String(), "<polyline") != 4 {
		t.Fatalf("svg: want 4 lines (2 targets x 2 panels):\n%s", out.String())
	}
}
