package server

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"oengine/engine"
	pb "oengine/proto/openengine/v1"
)

// Metrics holds the Prometheus metrics served on /metrics. Names follow the
// ones gateways already scrape (vLLM's, under the "oengine:" prefix); every
// model-scoped series has a model_name label.
type Metrics struct {
	reg *prometheus.Registry

	ttft, itl, e2e, queue *prometheus.HistogramVec
	success               *prometheus.CounterVec // per output: finished_reason
	failure               *prometheus.CounterVec // accepted, then failed: code
	rejected_             *prometheus.CounterVec // refused before acceptance: reason

	once sync.Once // the live collector is attached once
}

// LatencyBuckets are the histogram buckets of every latency metric (seconds).
var LatencyBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
	1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640}

// NewMetrics makes a registry with the oengine metrics plus the Go runtime
// and process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	hist := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: LatencyBuckets},
			append([]string{"model_name"}, labels...))
	}
	m.ttft = hist("oengine:time_to_first_token_seconds", "Time from receiving a request to sending its first token.", "route")
	m.itl = hist("oengine:inter_token_latency_seconds", "Time between two token events of one output.", "route")
	m.e2e = hist("oengine:e2e_request_latency_seconds", "Time from receiving a request to its last event.", "route")
	m.queue = hist("oengine:request_queue_time_seconds", "Time a request waited between acceptance and its first scheduling.")
	m.success = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oengine:request_success_total", Help: "Outputs that finished, by finish reason (stop, length, cancelled)."},
		[]string{"model_name", "route", "finished_reason"})
	m.failure = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oengine:request_failure_total", Help: "Accepted requests that ended with an error, by error reason."},
		[]string{"model_name", "route", "code"})
	m.rejected_ = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oengine:request_rejected_total", Help: "Requests refused before acceptance, by ErrorInfo reason."},
		[]string{"reason"})
	m.reg.MustRegister(m.ttft, m.itl, m.e2e, m.queue, m.success, m.failure, m.rejected_,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the registry /metrics serves; other packages may add to it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// EngineHooks returns hooks to put in an engine's configuration so that
// engine-side figures (queue time) reach the metrics; model is the name
// the model is served under.
func (m *Metrics) EngineHooks(model string) engine.Hooks {
	queue := m.queue.WithLabelValues(model)
	return engine.Hooks{
		OnRequestDone: func(rs engine.RequestStats) {
			if rs.Queue > 0 {
				queue.Observe(rs.Queue.Seconds())
			}
		},
	}
}

func (m *Metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *Metrics) rejected(reason string) { m.rejected_.WithLabelValues(reason).Inc() }

func (m *Metrics) failed(model, code string) { m.failure.WithLabelValues(model, RouteGRPC, code).Inc() }

func (m *Metrics) finished(model string, r pb.FinishReason) {
	name := "unknown"
	switch r {
	case pb.FinishReason_FINISH_REASON_STOP:
		name = "stop"
	case pb.FinishReason_FINISH_REASON_LENGTH:
		name = "length"
	case pb.FinishReason_FINISH_REASON_CANCELLED:
		name = "cancelled"
	}
	m.success.WithLabelValues(model, RouteGRPC, name).Inc()
}

// RouteGRPC is the route label of requests of the gRPC Generate RPC (and
// its session continuations); HTTP surfaces use their path, e.g.
// /v1/chat/completions.
const RouteGRPC = "grpc"

// Rejected counts a request a protocol surface refused before acceptance,
// by ErrorInfo reason (Failure.Reason).
func (m *Metrics) Rejected(reason string) { m.rejected(reason) }

// RequestMetrics records the latency and outcome figures of one accepted
// request of a protocol surface, under its route label. Not safe for
// concurrent use (one per request handler).
type RequestMetrics struct {
	m            *Metrics
	model, route string
	start        time.Time
	first        bool
	last         map[int]time.Time // per output: its last token event
}

// Request starts the figures of a request received at start.
func (m *Metrics) Request(route, model string, start time.Time) *RequestMetrics {
	return &RequestMetrics{m: m, model: model, route: route, start: start, last: map[int]time.Time{}}
}

// Tokens records a token event of output sent at now: the first of the
// request is its time to first token, later ones of the output its
// inter-token latency.
func (r *RequestMetrics) Tokens(output int, now time.Time) {
	if !r.first {
		r.first = true
		r.m.ttft.WithLabelValues(r.model, r.route).Observe(now.Sub(r.start).Seconds())
	}
	if t, ok := r.last[output]; ok {
		r.m.itl.WithLabelValues(r.model, r.route).Observe(now.Sub(t).Seconds())
	}
	r.last[output] = now
}

// Finished counts one output that finished with reason (stop, length,
// cancelled).
func (r *RequestMetrics) Finished(reason string) {
	r.m.success.WithLabelValues(r.model, r.route, reason).Inc()
}

// Failed counts the request as failed after acceptance, by ErrorInfo
// reason.
func (r *RequestMetrics) Failed(reason string) {
	r.m.failure.WithLabelValues(r.model, r.route, reason).Inc()
}

// Done records the request's end-to-end latency at now.
func (r *RequestMetrics) Done(now time.Time) {
	r.m.e2e.WithLabelValues(r.model, r.route).Observe(now.Sub(r.start).Seconds())
}

// attach registers the live collector that reads the server's engines on
// each scrape.
func (m *Metrics) attach(s *Server) {
	m.once.Do(func() { m.reg.MustRegister(&liveCollector{s: s}) })
}

// liveCollector reads Load and Stats of every engine at scrape time.
type liveCollector struct{ s *Server }

var (
	descRunning = prometheus.NewDesc("oengine:num_requests_running",
		"Requests with a running sequence.", []string{"model_name"}, nil)
	descWaiting = prometheus.NewDesc("oengine:num_requests_waiting",
		"Requests waiting for admission.", []string{"model_name"}, nil)
	descKVUsage = prometheus.NewDesc("oengine:kv_cache_usage_perc",
		"Fraction of KV pages in use or pinned (1 = full).", []string{"model_name"}, nil)
	descPages = prometheus.NewDesc("oengine:kv_pages",
		"KV pages by ledger state: free, cached (evictable), in_use, pinned.", []string{"model_name", "state"}, nil)
	descPrefixQueries = prometheus.NewDesc("oengine:prefix_cache_queries_total",
		"Prompt tokens looked up in the prefix cache.", []string{"model_name"}, nil)
	descPrefixHits = prometheus.NewDesc("oengine:prefix_cache_hits_total",
		"Prompt tokens found in the prefix cache.", []string{"model_name"}, nil)
	descPromptTokens = prometheus.NewDesc("oengine:prompt_tokens_total",
		"Prompt tokens computed (prefill, including recomputation).", []string{"model_name"}, nil)
	descGenTokens = prometheus.NewDesc("oengine:generation_tokens_total",
		"Tokens generated.", []string{"model_name"}, nil)
	descPreemptions = prometheus.NewDesc("oengine:num_preemptions_total",
		"Sequences preempted (requeued for recomputation).", []string{"model_name"}, nil)
	descPauses = prometheus.NewDesc("oengine:request_pauses_total",
		"Times a request was paused because its consumer stopped reading.", []string{"model_name"}, nil)
	descConsumerTimeouts = prometheus.NewDesc("oengine:consumer_timeouts_total",
		"Requests cancelled because their consumer stayed paused longer than the consumer timeout.", []string{"model_name"}, nil)
	descModelInfo = prometheus.NewDesc("oengine:model_info",
		"Always 1; the device label names where the model runs (cpu, or the CUDA device).", []string{"model_name", "device"}, nil)
)

func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunning, descWaiting, descKVUsage, descPages,
		descPrefixQueries, descPrefixHits, descPromptTokens, descGenTokens, descPreemptions, descPauses, descConsumerTimeouts, descModelInfo} {
		ch <- d
	}
}

func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.s.models {
		l, st := m.Backend.Load(), m.Backend.Stats()
		g := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{m.Name}, labels...)...)
		}
		ctr := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), m.Name)
		}
		g(descRunning, float64(l.Running))
		g(descWaiting, float64(l.Waiting))
		usage := 0.0
		if l.Pages.Total > 0 {
			usage = float64(l.Pages.Used()) / float64(l.Pages.Total)
		}
		g(descKVUsage, usage)
		g(descPages, float64(l.Pages.Free), "free")
		g(descPages, float64(l.Pages.Cached), "cached")
		g(descPages, float64(l.Pages.InUse), "in_use")
		g(descPages, float64(l.Pages.Pinned), "pinned")
		ctr(descPrefixQueries, st.PrefixQueries)
		ctr(descPrefixHits, st.PrefixHits)
		ctr(descPromptTokens, st.PromptTokens)
		ctr(descGenTokens, st.GenerationTokens)
		ctr(descPreemptions, st.Preemptions)
		ctr(descPauses, st.Pauses)
		ctr(descConsumerTimeouts, st.ConsumerTimeouts)
		if dev := m.Backend.Limits().Device; dev != "" {
			g(descModelInfo, 1, dev)
		}
	}
}
