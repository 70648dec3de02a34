package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"time"

	"oengine/engine"
)

func init() {
	register("generate", "generate text from a prompt, streaming it as it is produced", runGenerate)
	helpTable["generate"] = cmdHelp{synopsis: "[MODEL.gguf] [flags]", modelArg: true,
		notes: "The text goes to stdout (ending with a newline), timings to stderr.",
		examples: []string{
			`oengine generate ~/models/qwen2.5-0.5b-instruct-q8_0.gguf --prompt "Hello" --n 64`,
			`oengine generate --model m.gguf --prompt "Once upon a time" --temp 0.8 --seed 1`,
		}}
}

// generateConfig is the parsed command line of generate.
type generateConfig struct {
	engine    *engineFlags
	prompt    string
	n         int
	temp      float64
	seed      uint64
	ignoreEOS bool
}

func parseGenerate(args []string) (*generateConfig, error) {
	c := &generateConfig{}
	fs := newFlags("generate", nil)
	c.engine = addEngineFlags(fs)
	fs.StringVar(&c.prompt, "prompt", "Once upon a time", "prompt `text`")
	fs.IntVar(&c.n, "n", 64, "tokens to generate")
	fs.Float64Var(&c.temp, "temp", 0, "temperature (0: greedy)")
	fs.Uint64Var(&c.seed, "seed", 0, "sampling seed (0 with --temp > 0: random)")
	fs.BoolVar(&c.ignoreEOS, "ignore-eos", false, "keep generating past end-of-generation tokens")
	fs.limit("n", 1, math.Inf(1))
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := c.engine.check("generate"); err != nil {
		return nil, err
	}
	return c, nil
}

func runGenerate(args []string, stdout, stderr io.Writer) error {
	c, err := parseGenerate(args)
	if err != nil {
		return err
	}
	return c.run(stdout, stderr)
}

func (c *generateConfig) run(stdout, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt, err := openRuntime(c.engine, "", nil, stderr, logger)
	if err != nil {
		return err
	}
	defer rt.Close()
	if rt.file.Label == "synthetic" {
		fmt.Fprintln(stderr, "model: synthetic (built-in default: random weights, the text is noise)")
	}
	req := engine.Request{Prompt: c.prompt, MaxTokens: c.n, Stop: engine.StopParams{IgnoreEOS: c.ignoreEOS}}
	req.Sampling.Temperature = &c.temp
	if c.seed != 0 {
		req.Sampling.Seed = &c.seed
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	st, err := rt.Engine.Submit(ctx, req)
	if err != nil {
		return err
	}
	first, promptTokens, out, err := streamText(stdout, c.prompt, st)
	if err != nil {
		return err
	}
	end := time.Now()
	if first.IsZero() {
		first = end
	}
	decode := end.Sub(first).Seconds()
	fmt.Fprintf(stderr, "model %s on %s: prompt %d tokens in %.3fs (%.1f tok/s), generated %d tokens in %.3fs (%.2f tok/s)\n",
		rt.file.Label, rt.Device, promptTokens, first.Sub(start).Seconds(), float64(promptTokens)/first.Sub(start).Seconds(),
		out, decode, tokPerS(out-1, decode))
	if lim := rt.Engine.Limits(); lim.Speculation != "" {
		st := rt.Engine.Stats()
		rate := 0.0
		if st.SpecDraftTokens > 0 {
			rate = float64(st.SpecAcceptedTokens) / float64(st.SpecDraftTokens)
		}
		fmt.Fprintf(stderr, "speculative (%s, K=%d): %d draft tokens, %d accepted (%.1f%%)\n",
			lim.Speculation, lim.SpecTokens, st.SpecDraftTokens, st.SpecAcceptedTokens, 100*rate)
	}
	return nil
}

// streamText writes the prompt, then the text of st as it comes, and always
// ends the output with a newline (also when the stream fails). It returns
// when the first token came, the prompt's token count and the tokens
// generated.
func streamText(stdout io.Writer, prompt string, st *engine.Stream) (first time.Time, promptTokens, out int, err error) {
	fmt.Fprint(stdout, prompt)
	defer fmt.Fprintln(stdout)
	for {
		ev, err := st.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return first, promptTokens, out, nil
		}
		if err != nil {
			return first, promptTokens, out, err
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
			return first, promptTokens, out, ev.Err
		}
		if ev.Terminal() {
			return first, promptTokens, out, nil
		}
	}
}

func tokPerS(n int, secs float64) float64 {
	if n <= 0 || secs <= 0 {
		return 0
	}
	return float64(n) / secs
}
