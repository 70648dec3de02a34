package server

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// vLLM-compatible metric names (`--metrics-compat vllm`, docs/api.md,
// "Metrics for gateways"): routers such as the Gateway API Inference
// Extension's endpoint picker score pods by vLLM's names. The values are
// the same as the oengine: series of the same meaning, for the listed
// models (an auxiliary --fast-model is left out, as in GetLoad).
var (
	descVLLMRunning = prometheus.NewDesc("vllm:num_requests_running",
		"Requests with a running sequence (same as oengine:num_requests_running).", []string{"model_name"}, nil)
	descVLLMWaiting = prometheus.NewDesc("vllm:num_requests_waiting",
		"Requests waiting for admission (same as oengine:num_requests_waiting).", []string{"model_name"}, nil)
	descVLLMKVUsage = prometheus.NewDesc("vllm:kv_cache_usage_perc",
		"Fraction of KV pages in use or pinned, 1 = full (same as oengine:kv_cache_usage_perc).", []string{"model_name"}, nil)
	descVLLMCacheConfig = prometheus.NewDesc("vllm:cache_config_info",
		"KV cache configuration as labels (value 1): block_size tokens per page, num_gpu_blocks pages in the pool (host or device memory).",
		[]string{"model_name", "block_size", "num_gpu_blocks", "num_cpu_blocks", "enable_prefix_caching"}, nil)
	descVLLMLora = prometheus.NewDesc("vllm:lora_requests_info",
		"LoRA adapters of running and waiting requests as labels; the value is the scrape time (Unix seconds). oengine serves no adapters: both lists are empty and max_lora is 0.",
		[]string{"model_name", "running_lora_adapters", "waiting_lora_adapters", "max_lora"}, nil)
)

// vllmCollector reads the same figures as liveCollector under vLLM's names.
type vllmCollector struct {
	s   *Server
	now func() time.Time
}

// EnableVLLMMetrics also exports the vLLM-named series on /metrics; safe to
// call once per server (a second call is an error from the registry).
func (s *Server) EnableVLLMMetrics() error {
	return s.metrics.reg.Register(&vllmCollector{s: s, now: time.Now})
}

func (c *vllmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descVLLMRunning, descVLLMWaiting, descVLLMKVUsage, descVLLMCacheConfig, descVLLMLora} {
		ch <- d
	}
}

func (c *vllmCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.s.listed() {
		l, lim := m.Backend.Load(), m.Backend.Limits()
		g := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{m.Name}, labels...)...)
		}
		g(descVLLMRunning, float64(l.Running))
		g(descVLLMWaiting, float64(l.Waiting))
		usage := 0.0
		if l.Pages.Total > 0 {
			usage = float64(l.Pages.Used()) / float64(l.Pages.Total)
		}
		g(descVLLMKVUsage, usage)
		g(descVLLMCacheConfig, 1, strconv.Itoa(lim.PageSize), strconv.Itoa(lim.TotalPages), "0", "True")
		g(descVLLMLora, float64(c.now().UnixNano())/1e9, "", "", "0")
	}
}
