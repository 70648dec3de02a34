// Package bench is oengine's load generator: workloads, targets (OpenEngine
// gRPC, the SSE route, OpenAI-compatible /v1/completions), statistics and
// reports (table, JSON, SVG chart, comparisons).
package bench

import (
	"math"
	"sort"
	"time"
)

// Summary describes a sample of durations or values.
type Summary struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Summarize computes the summary of xs (the slice is not modified).
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Summary{
		Count: len(s),
		Mean:  sum / float64(len(s)),
		Min:   s[0],
		P50:   percentileSorted(s, 50),
		P90:   percentileSorted(s, 90),
		P99:   percentileSorted(s, 99),
		Max:   s[len(s)-1],
	}
}

// Percentile returns the p-th percentile (0..100) of xs by linear
// interpolation between closest ranks (the definition numpy uses by
// default). NaN for an empty sample.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if p <= 0 {
		return s[0]
	}
	if p >= 100 {
		return s[len(s)-1]
	}
	rank := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(rank))
	hi := lo + 1
	if hi >= len(s) {
		return s[lo]
	}
	frac := rank - float64(lo)
	return s[lo] + (s[hi]-s[lo])*frac
}

// ms converts durations to milliseconds for summaries.
func ms(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

// SLO is a service-level objective for goodput: a request counts as good
// when it succeeded and every set bound holds (zero bounds are not checked).
type SLO struct {
	TTFT time.Duration `json:"ttft_ms"`
	ITL  time.Duration `json:"itl_ms"` // mean inter-token latency of the request
	E2E  time.Duration `json:"e2e_ms"`
}

// Good reports whether r meets the SLO (a request cancelled on purpose
// never does).
func (s SLO) Good(r Result) bool {
	if r.Err != "" || r.Cancelled || r.ContextStop {
		return false
	}
	if s.TTFT > 0 && r.TTFT > s.TTFT {
		return false
	}
	if s.E2E > 0 && r.E2E > s.E2E {
		return false
	}
	if s.ITL > 0 && r.meanITL() > s.ITL {
		return false
	}
	return true
}

// Goodput is the number of requests per second that met the SLO.
func Goodput(rs []Result, slo SLO, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	good := 0
	for _, r := range rs {
		if slo.Good(r) {
			good++
		}
	}
	return float64(good) / elapsed.Seconds()
}
