package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"oengine/bench"
)

// soakArgs are the bench serve flags a soak uses.
type soakArgs struct {
	cfg                                  bench.SoakConfig
	target, addr, url, metricsURL, model string
	inLen, outLen, vocab, jsonOut        string
	ignoreEOS                            bool
	temp                                 float64
	args                                 []string
}

// isSet reports whether the command line set flag name.
func isSet(fs *flagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// runSoak runs `bench serve --scenario soak` (docs/bench.md: soak): it
// fails (exit status 1) when any check fails.
func runSoak(a soakArgs, stdout, stderr io.Writer) error {
	if a.target != "grpc" {
		return fmt.Errorf("bench serve: the soak scenario needs --target grpc, not %q", a.target)
	}
	in, err := bench.ParseDist(a.inLen)
	if err != nil {
		return err
	}
	out, err := bench.ParseDist(a.outLen)
	if err != nil {
		return err
	}
	cfg := a.cfg
	cfg.Workload = bench.Workload{Input: in, Output: out, Seed: cfg.Seed, IgnoreEOS: a.ignoreEOS, Temperature: a.temp}
	if a.vocab != "" {
		if cfg.Workload.Vocab, err = bench.VocabFromGGUF(a.vocab); err != nil {
			return err
		}
	}
	switch a.metricsURL {
	case "none":
		return fmt.Errorf("bench serve: the soak scenario reads /metrics; --metrics-url none is not possible")
	case "":
		cfg.MetricsURL = strings.TrimRight(a.url, "/") + "/metrics"
	default:
		cfg.MetricsURL = a.metricsURL
	}
	if err := cfg.Fill(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	g, err := bench.DialGRPC(a.addr, a.model)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	desc := g.Describe(dctx)
	cancel()
	g.Close()
	if len(desc) == 0 {
		return fmt.Errorf("bench: no OpenEngine server answers at %s", a.addr)
	}
	file := bench.File{Tool: "oengine bench serve", Version: version, Args: a.args,
		Started: time.Now().UTC().Format(time.RFC3339), Machine: bench.Machine(), Server: desc}
	rep, runErr := bench.RunSoak(ctx, a.addr, a.model, cfg, stderr)
	if rep != nil {
		file.Soak = rep
		if a.jsonOut != "" {
			if err := bench.WriteJSON(a.jsonOut, file); err != nil {
				return err
			}
		}
		bench.WriteSoak(stdout, rep)
		if a.jsonOut != "" {
			fmt.Fprintf(stdout, "wrote %s\n", a.jsonOut)
		}
	}
	if runErr != nil {
		return runErr
	}
	if !rep.Passed {
		return fmt.Errorf("bench serve: soak: a check failed")
	}
	return nil
}
