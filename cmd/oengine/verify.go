package main

import (
	"errors"
	"fmt"
	"io"

	"oengine/model/llama"
	"oengine/model/verify"
)

func init() {
	register("verify", "check a model against a llama.cpp reference JSON (logprobs, tokens, greedy)", runVerify)
}

func runVerify(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify", stderr)
	model := fs.String("model", "", "GGUF model file")
	ref := fs.String("ref", "", "reference JSON written from llama.cpp (see shared testdata README)")
	threads := fs.Int("threads", 0, "worker threads (0: all cores)")
	kv := fs.String("kv", "f16", "K/V store type: f16 or f32")
	page := fs.Int("page-size", 16, "tokens per KV page")
	maxTok := fs.Int("max-tokens", 0, "skip cases longer than this many teacher-forced tokens (0: none)")
	greedyTie := fs.Float64("greedy-tie", 0.05, "free-running greedy must match up to the first step whose reference top-1/top-2 margin is below this")
	ggml := fs.Bool("ggml", true, "run the free-running greedy check with llama.cpp's x86 CPU arithmetic (GGML mode: slower, batch-dependent attention) so that it follows the reference token for token; false uses oengine's own kernels")
	ggml512 := fs.Bool("ggml-avx512", true, "in GGML mode, use the summation orders of an AVX-512 build of llama.cpp (the shared reference data was written by one); false: AVX2")
	ggmlAll := fs.Bool("ggml-forced", false, "also teacher-force in GGML mode, feeding the prompt as llama.cpp did (default: oengine's own kernels, chunked)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *ref == "" {
		return errors.New("verify: --model and --ref are required")
	}
	opts := verify.Options{Threads: *threads, PageSize: *page, MaxTokens: *maxTok, GreedyTie: *greedyTie, GGML: *ggml, GGMLForced: *ggmlAll, GGMLAVX512: *ggml512}
	switch *kv {
	case "f16":
		opts.KV = llama.KVF16
	case "f32":
		opts.KV = llama.KVF32
	default:
		return fmt.Errorf("verify: --kv must be f16 or f32, got %q", *kv)
	}
	rep, err := verify.Run(*model, *ref, opts)
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
