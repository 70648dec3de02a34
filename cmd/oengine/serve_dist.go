package main

import (
	"flag"
	"fmt"

	"oengine/server"
)

// distFlags are the serve flags for running under a distributed serving
// system (docs/deploy.md): vLLM-named metrics for llm-d's endpoint picker
// and the ZMQ KV event publisher.
type distFlags struct {
	metricsCompat string
}

func addDistFlags(fs *flag.FlagSet) *distFlags {
	d := &distFlags{}
	fs.StringVar(&d.metricsCompat, "metrics-compat", "", "also export metrics under another engine's names: `vllm` (vllm:num_requests_waiting, ... for llm-d's endpoint picker); empty: oengine: names only")
	return d
}

// check validates the flags after parsing.
func (d *distFlags) check() error {
	switch d.metricsCompat {
	case "", "vllm":
	default:
		return fmt.Errorf("serve: --metrics-compat must be vllm or empty, got %q", d.metricsCompat)
	}
	return nil
}

// apply enables what the flags ask for on a built server (before Listen).
func (d *distFlags) apply(srv *server.Server) error {
	if d.metricsCompat == "vllm" {
		if err := srv.EnableVLLMMetrics(); err != nil {
			return fmt.Errorf("serve: --metrics-compat vllm: %w", err)
		}
	}
	return nil
}
