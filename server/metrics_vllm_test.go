package server

import (
	"context"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"oengine/kvcache"
)

// scrape fetches /metrics and parses it with Prometheus' own text parser.
func scrape(t *testing.T, h *harness) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, h.http+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// series returns the metrics of family name whose model_name is model.
func series(fams map[string]*dto.MetricFamily, name, model string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "model_name" && l.GetValue() == model {
				out = append(out, m)
			}
		}
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestVLLMMetrics: --metrics-compat vllm exports vLLM's names with the
// values of the oengine: series, for the listed model only.
func TestVLLMMetrics(t *testing.T) {
	main, fast := newFake(t, "main"), newFake(t, "fast")
	h := startServer(t, testConfig(), Model{Backend: main}, Model{Backend: fast, Auxiliary: true})

	if fams := scrape(t, h); fams["vllm:num_requests_running"] != nil {
		t.Fatal("vLLM names exported without --metrics-compat vllm")
	}
	if err := h.s.EnableVLLMMetrics(); err != nil {
		t.Fatal(err)
	}
	// One running request (held by the gate) and 3 used pages of 64.
	main.gate = make(chan struct{})
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan struct{})
	go func() { defer close(done); _, _ = h.generate(ctx, tokens(5, 6, 7)) }()
	defer func() { cancel(); <-done }()
	eventually(t, "one running request", func() bool { return main.liveCount() == 1 })
	tb := main.cache.NewTable(kvcache.Namespace{})
	if _, err := main.cache.PrepareAppend(tb, 12); err != nil {
		t.Fatal(err)
	}
	defer main.cache.Release(tb)

	fams := scrape(t, h)
	for _, pair := range [][2]string{
		{"vllm:num_requests_running", "oengine:num_requests_running"},
		{"vllm:num_requests_waiting", "oengine:num_requests_waiting"},
		{"vllm:kv_cache_usage_perc", "oengine:kv_cache_usage_perc"},
	} {
		v, o := series(fams, pair[0], "main"), series(fams, pair[1], "main")
		if len(v) != 1 || len(o) != 1 || fams[pair[0]].GetType() != dto.MetricType_GAUGE {
			t.Fatalf("%s: %d series (%s: %d)", pair[0], len(v), pair[1], len(o))
		}
		if v[0].GetGauge().GetValue() != o[0].GetGauge().GetValue() {
			t.Fatalf("%s = %v, %s = %v", pair[0], v[0].GetGauge().GetValue(), pair[1], o[0].GetGauge().GetValue())
		}
		if len(series(fams, pair[0], "fast")) != 0 {
			t.Fatalf("%s reports the auxiliary model", pair[0])
		}
	}
	if got := series(fams, "vllm:num_requests_running", "main")[0].GetGauge().GetValue(); got != 1 {
		t.Fatalf("running %v, want 1", got)
	}
	if got := series(fams, "vllm:kv_cache_usage_perc", "main")[0].GetGauge().GetValue(); got != 3.0/64 {
		t.Fatalf("kv usage %v, want 3/64", got)
	}
	cc := series(fams, "vllm:cache_config_info", "main")
	if len(cc) != 1 || cc[0].GetGauge().GetValue() != 1 {
		t.Fatalf("cache_config_info %v", cc)
	}
	if l := labels(cc[0]); l["block_size"] != "4" || l["num_gpu_blocks"] != "64" {
		t.Fatalf("cache_config_info labels %v", l)
	}
	lr := series(fams, "vllm:lora_requests_info", "main")
	if len(lr) != 1 || lr[0].GetGauge().GetValue() < 1e9 {
		t.Fatalf("lora_requests_info %v", lr)
	}
	if l := labels(lr[0]); l["max_lora"] != "0" || l["running_lora_adapters"] != "" || l["waiting_lora_adapters"] != "" {
		t.Fatalf("lora_requests_info labels %v", l)
	}
	close(main.gate)
}
