package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"strings"

	"log/slog"

	"oengine/bench"
	"oengine/kernels/cuda"
	"oengine/model/gpu"
	"oengine/model/llama"
	"oengine/scheduler"
)

func runBenchModel(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench model", stderr)
	model := fs.String("model", "", "GGUF model file (default: the built-in synthetic model)")
	pp := fs.Int("pp", 512, "prompt tokens of the prefill test (0: skip)")
	tg := fs.Int("tg", 128, "generated tokens of the decode test (0: skip)")
	threads := fs.Int("threads", 0, "CPU worker threads (0: all cores)")
	reps := fs.Int("reps", 5, "repetitions of each test (after one warm-up)")
	batch := fs.Int("batch", scheduler.DefaultMaxBatchedTokens, "prefill chunk in tokens (the engine's step budget)")
	inputs := fs.Int("inputs", 1, "an encoder (BERT-style embedding model): inputs of --pp tokens embedded per forward pass; --tg does not apply")
	kvType := fs.String("kv-type", "f16", "K/V store type: f16 or f32")
	membw := fs.Bool("membw", false, "also measure memory read bandwidth and the decode bandwidth fraction")
	asJSON := fs.Bool("json", false, "print JSON instead of the table")
	mmap := fs.Bool("mmap", false, mmapUsage)
	rowMajor := fs.Bool("rowmajor", false, "keep Q4_0, Q5_0, Q5_1, Q8_0 and K-quant (Q2_K-Q6_K) weights row-major instead of their decode layouts, and BF16 weights BF16 instead of converting them to F16 (to compare the two)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (pprof) of the whole run to this file")
	device := fs.String("device", "auto", "compute `device`: auto, cpu, cuda or cuda:N")
	spec := addSpecFlags(fs)
	specPrompt := fs.String("spec-prompt", "", "prompt `text` of the speculative benchmark (default: a request to repeat a long passage)")
	fs.limit("reps", 1, math.Inf(1))
	fs.limit("batch", 1, math.Inf(1))
	fs.limit("inputs", 1, 4096)
	if err := fs.Parse(args); err != nil {
		return err
	}
	kvt := llama.KVF16
	switch strings.ToLower(*kvType) {
	case "f16":
	case "f32":
		kvt = llama.KVF32
	default:
		return fmt.Errorf("bench model: --kv-type must be f16 or f32, got %q", *kvType)
	}
	if _, _, err := cuda.ParseDevice(*device); err != nil {
		return fmt.Errorf("bench model: --device: %w", err)
	}
	if err := spec.check("bench model"); err != nil {
		return err
	}
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("bench model: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("bench model: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	dev, err := gpu.Open(*device, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer dev.Close()
	if *spec.ngram || *spec.draft != "" {
		return benchSpec(stdout, stderr, spec, dev.CUDA, *model, *specPrompt, *tg, *reps, *threads, *mmap, *asJSON, kvt)
	}
	lf, err := openModelFile(*model, *mmap, stderr)
	if err != nil {
		return err
	}
	defer lf.File.Close()
	res, err := bench.BenchModel(lf.File, bench.ModelBenchConfig{RowMajor: *rowMajor, PP: *pp, TG: *tg, Reps: *reps, Threads: *threads,
		Batch: *batch, PageSize: 16, KVType: kvt, MemBW: *membw, CUDA: dev.CUDA, Inputs: *inputs})
	if err != nil {
		return err
	}
	res.Path = lf.Label
	if res.Model == "" {
		res.Model = lf.Name
	}
	if *asJSON {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	if dev.CUDA == nil {
		res.Device = dev.String()
		fmt.Fprintf(stderr, "device %s\n", dev)
	}
	bench.WriteModelTable(stdout, []bench.ModelBenchResult{res})
	return nil
}

// benchSpec is bench model with --spec-ngram or --draft-model: greedy
// batch-1 decode with and without speculative decoding (bench.BenchSpec).
func benchSpec(stdout, stderr io.Writer, sf *specFlags, dev *cuda.Device, model, prompt string, tg, reps, threads int, mmap, asJSON bool, kvt llama.KVType) error {
	lf, err := openModelFile(model, mmap, stderr)
	if err != nil {
		return err
	}
	defer lf.File.Close()
	cfg := bench.SpecBenchConfig{NGram: *sf.ngram, Tokens: *sf.tokens, Adaptive: *sf.adaptive, Prompt: prompt,
		TG: tg, Reps: reps, Threads: threads, KVType: kvt, CUDA: dev}
	if *sf.draft != "" {
		df, err := openModelFile(*sf.draft, mmap, stderr)
		if err != nil {
			return fmt.Errorf("bench model: --draft-model: %w", err)
		}
		defer df.File.Close()
		cfg.Draft = df.File
	}
	res, err := bench.BenchSpec(lf.File, cfg)
	if err != nil {
		return err
	}
	if res.Model == "" {
		res.Model = lf.Name
	}
	if asJSON {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintf(stdout, "%s %s on %s, %s K=%d: plain %.2f ± %.2f tok/s, speculative %.2f ± %.2f tok/s (%.2fx), acceptance %.1f%% (%d/%d), same output %v\n",
		res.Model, res.Type, res.Device, res.Mode, res.SpecTokens, res.PlainTokensPerS, res.PlainStd, res.SpecTokensPerS, res.SpecStd,
		res.Speedup, 100*res.AcceptanceRate, res.AcceptedTokens, res.DraftTokens, res.SameOutput)
	return nil
}
