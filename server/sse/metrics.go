package sse

import (
	"errors"
	"oengine/server"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sseMetrics are the SSE route's series, on the server's registry.
//
//	oengine:sse_requests_total{outcome}            every request by how it ended
//	oengine:sse_time_to_first_delta_seconds{model_name}
//	oengine:sse_bytes_streamed_total{model_name}   event-stream bytes written
//
// Outcomes: done (a done event), error (an error event), disconnected (the
// client left), write_timeout (a stalled reader was cancelled), preflight,
// and for requests refused before the stream the error code
// (invalid_request, session_not_found, overloaded, ...).
type sseMetrics struct {
	requests *prometheus.CounterVec
	ttfd     *prometheus.HistogramVec
	bytes    *prometheus.CounterVec
}

func newSSEMetrics(reg *prometheus.Registry) (*sseMetrics, error) {
	m := &sseMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oengine:sse_requests_total",
			Help: "SSE generation requests by outcome (done, error, disconnected, write_timeout, preflight, or the error code of a refusal)."},
			[]string{"outcome"}),
		ttfd: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "oengine:sse_time_to_first_delta_seconds", Help: "Time from receiving an SSE request to writing its first delta.",
			Buckets: server.LatencyBuckets}, []string{"model_name"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oengine:sse_bytes_streamed_total", Help: "Bytes of event stream written to SSE clients."},
			[]string{"model_name"}),
	}
	var err error
	m.requests, err = register(reg, m.requests)
	if err != nil {
		return nil, err
	}
	if m.ttfd, err = register(reg, m.ttfd); err != nil {
		return nil, err
	}
	if m.bytes, err = register(reg, m.bytes); err != nil {
		return nil, err
	}
	return m, nil
}

// register adds c, or returns the equal collector already registered (two
// servers sharing one Metrics).
func register[C prometheus.Collector](reg *prometheus.Registry, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if prev, ok := are.ExistingCollector.(C); ok {
				return prev, nil
			}
		}
		return c, err
	}
	return c, nil
}

func (m *sseMetrics) outcome(o string) { m.requests.WithLabelValues(o).Inc() }

func (m *sseMetrics) firstDelta(model string, d time.Duration) {
	m.ttfd.WithLabelValues(model).Observe(d.Seconds())
}

func (m *sseMetrics) streamed(model string, n int) {
	m.bytes.WithLabelValues(model).Add(float64(n))
}
