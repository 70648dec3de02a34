package loader

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"oengine/engine"
	"oengine/ggml"
	"oengine/kernels/cuda"
	"oengine/kernels/cuda/cudaemu"
	"oengine/kvcache"
	"oengine/model/gguf"
	"oengine/model/gpu"
	"oengine/model/llama"
	"oengine/model/synth"
	"oengine/sampling"
)

// tinyFile opens tiny-llama-f16 of shared/testdata (beside the repository).
func tinyFile(t *testing.T) *gguf.File {
	t.Helper()
	path := filepath.Join("..", "..", "shared", "testdata", "models", "tiny-llama-f16.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("shared testdata missing: %v", err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestLoadServesGreedyTokens(t *testing.T) {
	f := tinyFile(t)
	m, err := Load(f, Options{Threads: 1, Engine: engine.Config{PageSize: 16, KVPages: 32}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	name, _ := f.String("general.name")
	if got := m.Engine.ModelName(); got != name || name == "" {
		t.Fatalf("engine name %q, want general.name %q", got, name)
	}
	if m.Tokenizer.VocabSize() != m.Engine.Limits().Vocab {
		t.Fatalf("tokenizer vocabulary %d, engine %d", m.Tokenizer.VocabSize(), m.Engine.Limits().Vocab)
	}
	zero := 0.0
	st, err := m.Engine.Submit(context.Background(), engine.Request{Prompt: "Hello", MaxTokens: 4,
		Sampling: sampling.Options{Temperature: &zero}, MinTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		ev, err := st.Next(context.Background())
		if err != nil {
			break
		}
		n += len(ev.Tokens)
	}
	if n != 4 {
		t.Fatalf("generated %d tokens, want 4", n)
	}
	m.Close()
	m.Close() // safe twice
}

func TestLoadRejects(t *testing.T) {
	if _, err := Load(nil, Options{}); err == nil {
		t.Fatal("Load accepted no file")
	}
	f := tinyFile(t)
	if _, err := Load(f, Options{Threads: -1}); err == nil {
		t.Fatal("Load accepted a negative thread count")
	}
	if _, err := Load(f, Options{Name: "x", Engine: engine.Config{PageSize: -3}}); err == nil {
		t.Fatal("Load accepted a negative page size")
	}
}

// On the emulated CUDA device the loader builds the CUDA model: K/V in
// device memory sized by --kv-memory auto, greedy tokens equal to the CPU
// model's, and Close frees every device allocation.
func TestLoadOnEmulatedCUDA(t *testing.T) {
	f := tinyFile(t)
	open, emu := emuOpener()
	tokens := func(m *Model) []int32 { return greedyTokens(t, m, "Hello there, said the", 8) }
	cpuM, err := Load(f, Options{Threads: 1, Device: "cpu", Engine: engine.Config{PageSize: 16, KVPages: 32}})
	if err != nil {
		t.Fatal(err)
	}
	want := tokens(cpuM)
	cpuM.Close()

	m, err := Load(f, Options{Device: "auto", KVMemoryAuto: true, OpenCUDA: open, Engine: engine.Config{PageSize: 16, MaxRunning: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	if m.GPU == nil || m.Weights != nil || !strings.Contains(m.Device.String(), "Fake H200") {
		t.Fatalf("not on the CUDA model: %s", m.Device)
	}
	if md := m.Engine.Cache().Medium(); md != kvcache.MediumGPU {
		t.Fatalf("KV events report medium %v, want GPU", md)
	}
	// --kv-memory auto on a device with 100 GiB free: the pool is capped by
	// 1024 running sequences at full context (4 GiB), not by the 1 GiB CPU
	// default.
	if lim := m.Engine.Limits(); int64(lim.TotalPages)*m.GPU.Config().KVBytesPerPage(16) <= 1<<30 {
		t.Fatalf("KV pool of %d pages: not sized from device memory", lim.TotalPages)
	}
	got := tokens(m)
	if len(want) != 8 || !slices.Equal(got, want) {
		t.Fatalf("CUDA model tokens %v, CPU %v", got, want)
	}
	m.Close()
	if n := (*emu).Live(); n != 0 {
		t.Fatalf("%d device allocations left after Close", n)
	}
	// An explicit budget that does not fit the device fails Load.
	if _, err := Load(f, Options{Device: "cuda", OpenCUDA: open, Engine: engine.Config{KVMemory: 1 << 50}}); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("oversized --kv-memory: %v", err)
	}
	// --device cuda without a driver fails; auto falls back to the CPU.
	noDriver := func(int, *slog.Logger) (*cuda.Device, error) { return nil, cuda.ErrNoDriver }
	if _, err := Load(f, Options{Device: "cuda", OpenCUDA: noDriver}); err == nil || !strings.Contains(err.Error(), "no CUDA driver") {
		t.Fatalf("--device cuda without a driver: %v", err)
	}
	fb, err := Load(f, Options{Threads: 1, Device: "auto", OpenCUDA: noDriver, Engine: engine.Config{PageSize: 16, KVPages: 32}})
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if fb.Weights == nil || !strings.Contains(fb.Device.String(), "auto: no CUDA driver") {
		t.Fatalf("auto fallback: %s", fb.Device)
	}
}

// TestLoadDraftModel: a draft model with the same vocabulary (the q4_0
// file of the same tiny llama) loads and speculative greedy decoding gives
// the tokens plain decoding gives; a model with another vocabulary is
// refused with a clear error.
func TestLoadDraftModel(t *testing.T) {
	f := tinyFile(t)
	open := func(name string) *gguf.File {
		d, err := gguf.Open(filepath.Join("..", "..", "shared", "testdata", "models", name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	if _, err := Load(f, Options{Threads: 1, Draft: open("tiny-qwen2-q8_0.gguf"), Engine: engine.Config{KVPages: 32}}); err == nil || !strings.Contains(err.Error(), "same vocabulary") {
		t.Fatalf("mismatched draft: %v", err)
	}
	gen := func(m *Model) []int32 { return greedyTokens(t, m, "Once upon a time", 24) }
	plain, err := Load(f, Options{Threads: 1, Engine: engine.Config{KVPages: 32}})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	spec, err := Load(f, Options{Threads: 1, Draft: open("tiny-llama-q4_0.gguf"), Engine: engine.Config{KVPages: 32,
		Speculation: engine.Speculation{Tokens: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	defer spec.Close()
	if lim := spec.Engine.Limits(); lim.Speculation != "draft_model" || lim.SpecTokens != 3 || lim.DraftModel == "" {
		t.Fatalf("limits %+v", lim)
	}
	want, got := gen(plain), gen(spec)
	if !slices.Equal(got, want) || len(got) != 24 {
		t.Fatalf("speculative %v, plain %v", got, want)
	}
	if st := spec.Engine.Stats(); st.SpecDraftTokens == 0 {
		t.Fatalf("no speculation: %+v", st)
	}
	t.Logf("drafted %d accepted %d", spec.Engine.Stats().SpecDraftTokens, spec.Engine.Stats().SpecAcceptedTokens)
}

// greedyTokens generates n tokens of prompt greedily, ignoring EOS.
func greedyTokens(t *testing.T, m *Model, prompt string, n int) []int32 {
	t.Helper()
	zero := 0.0
	st, err := m.Engine.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: n,
		Sampling: sampling.Options{Temperature: &zero}, Stop: engine.StopParams{IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for {
		ev, err := st.Next(context.Background())
		if err != nil {
			break
		}
		for _, tk := range ev.Tokens {
			out = append(out, tk.ID)
		}
	}
	return out
}

// embedVector is the pooled embedding of prompt (an encoder's output).
func embedVector(m *Model, prompt string) ([]float32, error) {
	st, err := m.Engine.Submit(context.Background(), engine.Request{Prompt: prompt, Embed: &engine.EmbedOptions{}})
	if err != nil {
		return nil, err
	}
	for {
		ev, err := st.Next(context.Background())
		if err != nil {
			return nil, err
		}
		if ev.Err != nil {
			return nil, ev.Err
		}
		if ev.Kind == engine.EventDone {
			return ev.Embedding, nil
		}
	}
}

// TestLoadDraftModelOnEmulatedCUDA: with the model on a CUDA device the
// draft model is loaded on the same device (not the CPU), its K/V pages
// are counted in the KV budget beside the model's, speculative greedy
// decoding gives the plain tokens, and Close frees every allocation.
func TestLoadDraftModelOnEmulatedCUDA(t *testing.T) {
	f := tinyFile(t)
	draft, err := gguf.Open(filepath.Join("..", "..", "shared", "testdata", "models", "tiny-llama-q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer draft.Close()
	open, emu := emuOpener()
	gen := func(m *Model) []int32 { return greedyTokens(t, m, "Once upon a time", 16) }
	plain, err := Load(f, Options{Device: "cuda", OpenCUDA: open, Engine: engine.Config{PageSize: 16, KVPages: 32}})
	if err != nil {
		t.Fatal(err)
	}
	want := gen(plain)
	plain.Close()

	const budget = 64 << 20
	spec, err := Load(f, Options{Device: "cuda", OpenCUDA: open, Draft: draft,
		Engine: engine.Config{PageSize: 16, KVMemory: budget, Speculation: engine.Speculation{Tokens: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if spec.DraftGPU == nil || spec.Draft != nil {
		t.Fatalf("draft not on the device: gpu %v cpu %v", spec.DraftGPU != nil, spec.Draft != nil)
	}
	per := spec.GPU.Config().KVBytesPerPage(16) + spec.DraftGPU.Config().KVBytesPerPage(16)
	if pages := spec.Engine.Limits().TotalPages; pages < 1 || int64(pages)*per > budget {
		t.Fatalf("%d pages of %d bytes (both models) for a %d-byte budget", pages, per, budget)
	}
	got := gen(spec)
	if !slices.Equal(got, want) || len(got) != 16 {
		t.Fatalf("speculative %v, plain %v", got, want)
	}
	if st := spec.Engine.Stats(); st.SpecDraftTokens == 0 {
		t.Fatalf("no speculation: %+v", st)
	}
	spec.Close()
	if n := (*emu).Live(); n != 0 {
		t.Fatalf("%d device allocations left after Close", n)
	}
	// A draft whose pages do not fit beside the model's fails Load.
	if _, err := Load(f, Options{Device: "cuda", OpenCUDA: open, Draft: draft,
		Engine: engine.Config{PageSize: 16, KVPages: 1 << 30}}); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("oversized pages with a draft: %v", err)
	}
}

// emuOpener opens an emulated CUDA device for Options.OpenCUDA and points
// *last at the latest one opened (for its live allocation count).
func emuOpener() (open gpu.Opener, last **cudaemu.Device) {
	last = new(*cudaemu.Device)
	open = func(int, *slog.Logger) (*cuda.Device, error) {
		d, err := cudaemu.Open(nil)
		*last = d
		if err != nil {
			return nil, err
		}
		return d.Device, nil
	}
	return open, last
}

// TestLoadAutoFallsBackForTypes: with --device auto, a model or draft
// whose weight types have no CUDA kernel (IQ4_NL here), or a gemma3 or
// qwen3moe model (no CUDA kernels for their blocks), or a reranker (its
// head has none; on the GPU it would lose /v1/rerank), runs on the CPU and
// says why; the opened device is released. --device cuda refuses it.
func TestLoadAutoFallsBackForTypes(t *testing.T) {
	buildOpts := func(o synth.Options) *gguf.File {
		b, err := synth.Build(o)
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	build := func(arch string, typ ggml.Type) *gguf.File {
		return buildOpts(synth.Options{Arch: arch, Preset: "tiny", Type: typ, Seed: 3})
	}
	iq4, f16 := build("llama", ggml.TypeIQ4_NL), build("llama", ggml.TypeF16)
	gemma, moe, phi := build("gemma3", ggml.TypeF16), build("qwen3moe", ggml.TypeQ8_0), build("phi3", ggml.TypeQ8_0)
	oss, bert := build("gpt-oss", ggml.TypeMXFP4), build("bert", ggml.TypeF16)
	egemma := build("gemma-embedding", ggml.TypeF16)
	yarn := buildOpts(synth.Options{Arch: "qwen3", Preset: "tiny", Type: ggml.TypeQ8_0, Seed: 3, YarnFactor: 4, YarnOrigCtx: 512})
	temp := buildOpts(synth.Options{Arch: "mistral3", Preset: "tiny", Type: ggml.TypeQ8_0, Seed: 3, AttnTempScale: 0.1})
	rerank := buildOpts(synth.Options{Arch: "qwen3", Preset: "tiny", Type: ggml.TypeQ8_0, Seed: 3, Rerank: true})
	open, emu := emuOpener()
	cfg := engine.Config{PageSize: 16, KVPages: 32}
	for _, c := range []struct {
		name        string
		model, drft *gguf.File
		reason      string
		cudaErr     string // in --device cuda's error
	}{
		{"model", iq4, nil, "cpu (auto: no CUDA kernel for IQ4_NL (tensor token_embd.weight))", "no CUDA kernel for IQ4_NL"},
		{"draft", f16, iq4, "cpu (auto: draft model: no CUDA kernel for IQ4_NL (tensor token_embd.weight))", "no CUDA kernel for IQ4_NL"},
		{"arch", gemma, nil, "cpu (auto: no CUDA kernels for the gemma3 architecture)", "no CUDA kernels for the gemma3 architecture"},
		{"experts", moe, nil, "cpu (auto: no CUDA kernels for the qwen3moe architecture)", "no CUDA kernels for the qwen3moe architecture"},
		{"fused projections", phi, nil, "cpu (auto: no CUDA kernels for the phi3 architecture)", "no CUDA kernels for the phi3 architecture"},
		{"sinks and MXFP4 experts", oss, nil, "cpu (auto: no CUDA kernels for the gpt-oss architecture)", "no CUDA kernels for the gpt-oss architecture"},
		{"encoder", bert, nil, "cpu (auto: no CUDA kernels for the bert architecture)", "no CUDA kernels for the bert architecture"},
		{"EmbeddingGemma", egemma, nil, "cpu (auto: no CUDA kernels for the gemma-embedding architecture)", "no CUDA kernels for the gemma-embedding architecture"},
		{"yarn", yarn, nil, "cpu (auto: no CUDA kernels for YaRN rope scaling)", "no CUDA kernels for YaRN rope scaling"},
		{"query temperature", temp, nil, "cpu (auto: no CUDA kernels for attention temperature scaling)", "no CUDA kernels for attention temperature scaling"},
		{"reranker head", rerank, nil, "cpu (auto: no CUDA kernels for a reranker's classification head)", "no CUDA kernels for a reranker's classification head"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := Load(c.model, Options{Threads: 1, Device: "auto", OpenCUDA: open, Draft: c.drft, Engine: cfg})
			if err != nil {
				t.Fatal(err)
			}
			if m.GPU != nil || m.Weights == nil || m.Device.String() != c.reason {
				t.Fatalf("device %q, GPU model %v", m.Device, m.GPU != nil)
			}
			if n := (*emu).Live(); n != 0 {
				t.Fatalf("%d device allocations left by the fallback", n)
			}
			if m.Engine.Limits().EmbeddingsOnly {
				if vec, err := embedVector(m, "hello world"); err != nil || len(vec) != m.Weights.Config().Dim {
					t.Fatalf("embedding: %v, %d values", err, len(vec))
				}
			} else if got := greedyTokens(t, m, "hello world", 4); len(got) != 4 {
				t.Fatalf("tokens %v", got)
			}
			m.Close()
			_, err = Load(c.model, Options{Device: "cuda", OpenCUDA: open, Draft: c.drft, Engine: cfg})
			if err == nil || !strings.Contains(err.Error(), c.cudaErr) ||
				!errors.Is(err, gpu.ErrNoKernel) || !errors.Is(err, llama.ErrUnsupported) {
				t.Fatalf("--device cuda: %v", err)
			}
		})
	}
}
