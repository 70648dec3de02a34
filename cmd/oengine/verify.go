package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"oengine/kernels/cuda"
	"oengine/model/gpu"
	"oengine/model/llama"
	"oengine/model/verify"
)

func init() {
	register("verify", "check a model against a llama.cpp reference JSON (logprobs, tokens, greedy)", runVerify)
	helpTable["verify"] = cmdHelp{synopsis: "MODEL.gguf --ref REF.json [flags]", modelArg: true,
		notes: "Exit status 1 when a check fails.",
		examples: []string{
			"oengine verify qwen2.5-0.5b-instruct-q8_0.gguf --ref qwen2.5-0.5b-instruct-q8_0.ref.json",
			"oengine verify --model m.gguf --ref m.ref.json --max-tokens 64 --kv f32",
			"oengine verify m.gguf --ref m.ref.json --device cuda",
		}}
}

// verifyConfig is the parsed command line of verify.
type verifyConfig struct {
	model, ref string
	device     string
	opts       verify.Options
}

func parseVerify(args []string) (*verifyConfig, error) {
	c := &verifyConfig{}
	o := &c.opts
	fs := newFlags("verify", nil)
	fs.StringVar(&c.model, "model", "", "GGUF model `file`")
	fs.StringVar(&c.ref, "ref", "", "reference JSON `file` written from llama.cpp (see shared testdata README)")
	fs.IntVar(&o.Threads, "threads", 0, "worker threads (0: all cores)")
	kv := fs.String("kv", "f16", "K/V store type: f16 or f32")
	fs.IntVar(&o.PageSize, "page-size", 16, "tokens per KV page (1 to 65536)")
	fs.IntVar(&o.MaxTokens, "max-tokens", 0, "skip cases longer than this many teacher-forced tokens (0: none)")
	fs.Float64Var(&o.GreedyTie, "greedy-tie", 0.05, "free-running greedy must match up to the first step whose reference top-1/top-2 margin is below this")
	fs.BoolVar(&o.GGML, "ggml", true, "run the free-running greedy check with llama.cpp's x86 CPU arithmetic (GGML mode: slower, batch-dependent attention) so that it follows the reference token for token; false uses oengine's own kernels")
	fs.BoolVar(&o.GGMLAVX512, "ggml-avx512", true, "in GGML mode, use the summation orders of an AVX-512 build of llama.cpp (the shared reference data was written by one); false: AVX2")
	fs.BoolVar(&o.GGMLForced, "ggml-forced", false, "also teacher-force in GGML mode, feeding the prompt as llama.cpp did (default: oengine's own kernels, chunked)")
	fs.StringVar(&c.device, "device", "auto", "compute `device`: auto, cpu, cuda or cuda:N (on CUDA the check runs the CUDA forward pass with F16 K/V; the GGML modes are CPU only)")
	fs.BoolVar(&o.CUDAExact, "cuda-exact", false, "on CUDA, keep every matmul on the float32 GEMV kernels (default: the serving arithmetic: int8 activations for quantized decode, tensor cores on F16 operands for chunks of 64+ tokens)")
	fs.limit("page-size", 1, 1<<16)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if _, _, err := cuda.ParseDevice(c.device); err != nil {
		return nil, fmt.Errorf("verify: --device: %w", err)
	}
	if c.model == "" || c.ref == "" {
		return nil, errors.New("verify: a model (argument or --model) and --ref are required")
	}
	switch *kv {
	case "f16":
		o.KV = llama.KVF16
	case "f32":
		o.KV = llama.KVF32
	default:
		return nil, fmt.Errorf("verify: --kv must be f16 or f32, got %q", *kv)
	}
	return c, nil
}

func runVerify(args []string, stdout, stderr io.Writer) error {
	c, err := parseVerify(args)
	if err != nil {
		return err
	}
	return c.run(stdout, stderr)
}

func (c *verifyConfig) run(stdout, stderr io.Writer) error {
	dev, err := gpu.Open(c.device, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer dev.Close()
	fmt.Fprintf(stderr, "device %s\n", dev)
	c.opts.CUDA = dev.CUDA
	rep, err := verify.Run(c.model, c.ref, c.opts)
	if err != nil {
		return err
	}
	if _, err := rep.WriteTo(stdout); err != nil {
		return err
	}
	if !rep.Pass {
		return errors.New("verify: FAILED")
	}
	return nil
}
