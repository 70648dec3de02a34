package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"oengine/engine"
)

func init() {
	register("generate", "generate text from a prompt, streaming it as it is produced", runGenerate)
}

func runGenerate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("generate", stderr)
	ef := addEngineFlags(fs)
	prompt := fs.String("prompt", "Once upon a time", "prompt text")
	n := fs.Int("n", 64, "tokens to generate")
	temp := fs.Float64("temp", 0, "temperature (0: greedy)")
	seed := fs.Uint64("seed", 0, "sampling seed (0 with --temp > 0: random)")
	ignoreEOS := fs.Bool("ignore-eos", false, "keep generating past end-of-generation tokens")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt, err := openRuntime(ef, "", nil, stderr, logger)
	if err != nil {
		return err
	}
	defer rt.Close()
	if rt.file.Label == "synthetic" {
		fmt.Fprintln(stderr, "model: synthetic (built-in default: random weights, the text is noise)")
	}
	req := engine.Request{Prompt: *prompt, MaxTokens: *n, Stop: engine.StopParams{IgnoreEOS: *ignoreEOS}}
	req.Sampling.Temperature = temp
	if *seed != 0 {
		req.Sampling.Seed = seed
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	st, err := rt.Engine.Submit(ctx, req)
	if err != nil {
		return err
	}
	var first time.Time
	var out, promptTokens int
	fmt.Fprint(stdout, *prompt)
	for {
		ev, err := st.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch ev.Kind {
		case engine.EventPrompt:
			promptTokens = len(ev.Prompt.Tokens)
		case engine.EventTokens:
			if first.IsZero() {
				first = time.Now()
			}
			out += len(ev.Tokens)
			fmt.Fprint(stdout, ev.Text)
		case engine.EventError:
			fmt.Fprintln(stdout)
			return ev.Err
		}
		if ev.Terminal() {
			break
		}
	}
	fmt.Fprintln(stdout)
	end := time.Now()
	if first.IsZero() {
		first = end
	}
	decode := end.Sub(first).Seconds()
	fmt.Fprintf(stderr, "model %s: prompt %d tokens in %.3fs (%.1f tok/s), generated %d tokens in %.3fs (%.2f tok/s)\n",
		rt.file.Label, promptTokens, first.Sub(start).Seconds(), float64(promptTokens)/first.Sub(start).Seconds(),
		out, decode, tokPerS(out-1, decode))
	return nil
}

func tokPerS(n int, secs float64) float64 {
	if n <= 0 || secs <= 0 {
		return 0
	}
	return float64(n) / secs
}
