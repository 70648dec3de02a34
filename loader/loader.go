// Package loader turns a GGUF file into a runnable model: the weights and
// forward pass, the tokenizer and an engine over them. It is the one place
// that wires them together, for the command line and for the test
// harnesses of the server and the bench tool.
package loader

import (
	"errors"
	"fmt"
	"log/slog"

	"oengine/engine"
	"oengine/kernels/cuda"
	"oengine/kvcache"
	"oengine/model/gguf"
	"oengine/model/gpu"
	"oengine/model/llama"
	"oengine/model/tokenizer"
)

// Options configure Load.
type Options struct {
	// Name is the model name of the engine; "": the GGUF's general.name.
	Name string
	// Threads are the CPU worker threads (0: all cores).
	Threads int
	// KVType is the K/V store type (llama.KVF16 by default).
	KVType llama.KVType
	// Engine configures the engine; its ModelName is set from Name.
	Engine engine.Config
	// Device is --device: "auto", "cpu", "cuda" or "cuda:N"; "" is "cpu".
	// auto runs on CUDA device 0 when the driver, NVRTC, cuBLAS and a
	// device are found and the CUDA kernels cover every weight type of the
	// model and draft, else on the CPU (logged, and said by
	// Model.Device.Reason).
	Device string
	// KVMemoryAuto sizes the KV pool from the device's free memory after
	// the weights, workspace and headroom (gpu.Decoder.KVMemoryAuto) when
	// the model runs on CUDA; on the CPU Engine.KVMemory applies (its
	// default when 0). Without it, an Engine.KVMemory that does not fit the
	// device fails Load.
	KVMemoryAuto bool
	// OpenCUDA opens a CUDA device (nil: gpu.OpenCUDA); tests pass the
	// emulated one.
	OpenCUDA gpu.Opener
	// Logger receives the device choice (nil: Engine.Logger, else slog.Default).
	Logger *slog.Logger
	// Draft, when set, is the draft model of speculative decoding
	// (engine.Speculation.Draft; --draft-model): it must have the same
	// vocabulary (CheckDraftVocab). It runs where the model runs: on the
	// CPU with Threads and KVType, or on the same CUDA device. Its K/V
	// pages come out of the same KV budget (the engine counts both models'
	// bytes per page). The file stays the caller's.
	Draft *gguf.File
}

// Model is a loaded model with its engine. Close releases the engine, the
// weights and the device; the GGUF file stays the caller's.
type Model struct {
	File      *gguf.File
	Weights   *llama.Model // the CPU forward pass (nil on CUDA)
	GPU       *gpu.Decoder // the CUDA forward pass (nil on the CPU)
	Device    gpu.Device   // where the model runs (Device.String() for banners)
	Tokenizer *tokenizer.Tokenizer
	Engine    *engine.Engine
	Draft     *llama.Model // the draft model's weights on the CPU (Options.Draft), nil without
	DraftGPU  *gpu.Decoder // the draft model on the CUDA device, nil without
}

// Load builds the model, tokenizer and engine of f.
func Load(f *gguf.File, o Options) (*Model, error) {
	if f == nil {
		return nil, errors.New("loader: no GGUF file")
	}
	if o.Threads < 0 {
		return nil, fmt.Errorf("loader: negative thread count %d", o.Threads)
	}
	m := &Model{File: f}
	var err error
	if m.Tokenizer, err = tokenizer.FromGGUF(f); err != nil {
		return nil, err
	}
	if o.Draft != nil {
		if err := CheckDraftVocab(f, o.Draft); err != nil {
			return nil, err
		}
	}
	cfg := o.Engine
	cfg.ModelName = o.Name
	if cfg.ModelName == "" {
		cfg.ModelName, _ = f.String("general.name")
	}
	model, err := m.loadModel(f, o, &cfg)
	if err != nil {
		m.Close()
		return nil, err
	}
	if o.Draft != nil && m.GPU == nil {
		if m.Draft, err = llama.Load(o.Draft, llama.Options{Threads: o.Threads}); err != nil {
			m.Close()
			return nil, fmt.Errorf("loader: draft model: %w", err)
		}
		cfg.Speculation.Draft = engine.FromLlama(m.Draft, o.KVType)
	}
	if o.Draft != nil {
		cfg.Speculation.DraftName, _ = o.Draft.String("general.name")
	}
	if m.Engine, err = engine.New(cfg, model, engine.WrapTokenizer(m.Tokenizer)); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// loadModel opens the device o.Device names and loads the forward pass on
// it; on CUDA it also settles the KV budget in cfg.
func (m *Model) loadModel(f *gguf.File, o Options, cfg *engine.Config) (engine.Model, error) {
	spec := o.Device
	if spec == "" {
		spec = "cpu"
	}
	lg := o.Logger
	if lg == nil {
		lg = cfg.Logger
	}
	if lg == nil {
		lg = slog.Default()
	}
	open := o.OpenCUDA
	if open == nil {
		open = gpu.OpenCUDA
	}
	var err error
	if m.Device, err = gpu.OpenWith(spec, lg, open); err != nil {
		return nil, fmt.Errorf("loader: %w", err)
	}
	if kind, _, _ := cuda.ParseDevice(spec); kind == cuda.KindAuto && m.Device.Kind == cuda.KindCUDA {
		// auto: a model (or draft) with weight types the CUDA kernels lack
		// runs on the CPU, which has kernels for every supported type.
		for i, g := range []*gguf.File{f, o.Draft} {
			if g == nil {
				continue
			}
			if err := gpu.KernelsFor(g); err != nil {
				reason := err.Error()
				if i == 1 {
					reason = "draft model: " + reason
				}
				lg.Info("device auto: using the CPU", "reason", reason)
				m.Device.Close()
				m.Device = gpu.Device{Kind: cuda.KindCPU, Reason: reason}
				break
			}
		}
	}
	if m.Device.Kind != cuda.KindCUDA {
		if m.Weights, err = llama.Load(f, llama.Options{Threads: o.Threads}); err != nil {
			return nil, err
		}
		return engine.FromLlama(m.Weights, o.KVType), nil
	}
	if o.KVType == llama.KVF32 {
		return nil, errors.New("loader: the CUDA model keeps K/V in F16 (--kv-type f32 is CPU only)")
	}
	// One device step holds a whole scheduler step up to 2048 tokens
	// (activation and logits buffers scale with it); larger steps split.
	def := cfg.WithDefaults()
	if m.GPU, err = gpu.Load(m.Device.CUDA, f, gpu.Options{MaxTokens: min(def.MaxBatchedTokens, 2048)}); err != nil {
		return nil, fmt.Errorf("loader: %s: %w", m.Device.Info, err)
	}
	pageSize := def.PageSize
	perPage := m.GPU.Config().KVBytesPerPage(pageSize)
	// The draft model's weights go on the device before the KV budget is
	// settled, and its step workspace is set aside; the engine counts its
	// K/V bytes in each page of the budget (one page table serves both).
	var draftPage, draftWS int64
	if o.Draft != nil {
		if m.DraftGPU, err = gpu.Load(m.Device.CUDA, o.Draft, gpu.Options{MaxTokens: min(def.MaxBatchedTokens, 2048)}); err != nil {
			return nil, fmt.Errorf("loader: draft model: %s: %w", m.Device.Info, err)
		}
		draftPage, draftWS = m.DraftGPU.Config().KVBytesPerPage(pageSize), m.DraftGPU.Workspace(pageSize)
		cfg.Speculation.Draft = engine.FromGPU(m.DraftGPU)
	}
	avail, err := m.GPU.KVMemoryAuto(pageSize)
	if err == nil {
		avail -= draftWS
		var want int64 // the KV bytes asked for, both models' pages together
		switch {
		case cfg.KVPages > 0:
			want = int64(cfg.KVPages) * (perPage + draftPage)
		case o.KVMemoryAuto:
			cfg.KVMemory, want = max(avail, 0), avail
		default:
			want = def.KVMemory
		}
		switch {
		case avail < perPage+draftPage:
			err = fmt.Errorf("gpu: no device memory left for the KV cache of the model and its draft: %d MiB after the weights and workspaces", max(avail, 0)>>20)
		case want > avail:
			err = fmt.Errorf("gpu: --kv-memory %d MiB does not fit: %d MiB available on the device", want>>20, avail>>20)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("loader: %w", err)
	}
	cfg.KVMedium = kvcache.MediumGPU // KV events report device pages (docs/design.md §9)
	return engine.FromGPU(m.GPU), nil
}

// CheckDraftVocab reports whether draft can propose tokens for target:
// both GGUF files must list the same tokenizer tokens (same ids, same
// texts). The error names the first difference.
func CheckDraftVocab(target, draft *gguf.File) error {
	tt, ok1 := target.Strings("tokenizer.ggml.tokens")
	dt, ok2 := draft.Strings("tokenizer.ggml.tokens")
	switch {
	case !ok1 || !ok2:
		return errors.New("loader: draft model: a GGUF file lists no tokenizer.ggml.tokens, the vocabularies cannot be compared")
	case len(tt) != len(dt):
		return fmt.Errorf("loader: draft model: its vocabulary has %d tokens, the target's %d: speculative decoding needs the same vocabulary", len(dt), len(tt))
	}
	for i := range tt {
		if tt[i] != dt[i] {
			return fmt.Errorf("loader: draft model: token %d is %q, the target's is %q: speculative decoding needs the same vocabulary", i, dt[i], tt[i])
		}
	}
	return nil
}

// Close stops the engine and frees the weights; safe to call twice.
func (m *Model) Close() {
	if m.Engine != nil {
		m.Engine.Close()
		m.Engine = nil
	}
	if m.Draft != nil {
		m.Draft.Close()
		m.Draft = nil
	}
	if m.DraftGPU != nil {
		m.DraftGPU.Close()
		m.DraftGPU = nil
	}
	if m.Weights != nil {
		m.Weights.Close()
		m.Weights = nil
	}
	if m.GPU != nil {
		m.GPU.Close()
		m.GPU = nil
	}
	m.Device.Close()
	m.Device = gpu.Device{}
}
