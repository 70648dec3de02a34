package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"oengine/engine"
	"oengine/kernels/cuda"
	"oengine/loader"
	"oengine/model/llama"
)

// engineFlags are the model and engine settings shared by generate, serve
// and bench.
type engineFlags struct {
	model       *string
	threads     *int
	kvType      *string
	kvMemory    *string
	kvPages     *int
	pageSize    *int
	maxBatched  *int
	maxRunning  *int
	defaultTemp *float64
	mmap        *bool
	device      *string
	stepLatency *string
	pooling     *string
	// consumerTimeout, set by serve, is engine.Config.ConsumerTimeout
	// (nil or 0: the engine's default).
	consumerTimeout *time.Duration
	spec            *specFlags
}

// specFlags configure speculative decoding (docs/api.md "Speculative
// decoding").
type specFlags struct {
	ngram    *bool
	draft    *string
	tokens   *int
	adaptive *bool
}

func addSpecFlags(fs *flagSet) *specFlags {
	sf := &specFlags{
		ngram:    fs.Bool("spec-ngram", false, "speculative decoding with prompt-lookup drafts: the tokens that followed an earlier occurrence of the last 1-3 tokens"),
		draft:    fs.String("draft-model", "", "speculative decoding with this draft GGUF `file` (same vocabulary; smaller or lower precision; runs on the model's device)"),
		tokens:   fs.Int("spec-tokens", 4, "most draft tokens verified per step (K)"),
		adaptive: fs.Bool("spec-adaptive", true, "each step, draft the K (0 to --spec-tokens) that maximises expected tokens per second from measured acceptance and costs (--spec-adaptive=false: always K)"),
	}
	fs.limit("spec-tokens", 1, 64)
	return sf
}

func (sf *specFlags) check(cmd string) error {
	if *sf.ngram && *sf.draft != "" {
		return fmt.Errorf("%s: give --spec-ngram or --draft-model, not both", cmd)
	}
	return nil
}

// config returns the engine's speculation settings (the draft model itself
// is set by the loader).
func (sf *specFlags) config() engine.Speculation {
	if sf == nil {
		return engine.Speculation{}
	}
	return engine.Speculation{NGram: *sf.ngram, Tokens: *sf.tokens, Adaptive: *sf.adaptive}
}

func addEngineFlags(fs *flagSet) *engineFlags {
	ef := &engineFlags{
		model:       fs.String("model", "", "GGUF model `file`, also accepted as the first argument (default: the built-in synthetic model)"),
		threads:     fs.Int("threads", 0, "CPU worker threads (0: all cores)"),
		kvType:      fs.String("kv-type", "f16", "K/V store `type`: f16 or f32"),
		kvMemory:    fs.String("kv-memory", "auto", "`size` of the paged KV cache: a number and B, KB, MB, GB, TB or KiB, MiB, GiB, TiB (e.g. 512MiB, 2GiB, 1.5GB), or auto: the free device memory after the weights on CUDA, 1GiB on the CPU"),
		kvPages:     fs.Int("kv-pages", 0, "KV pages in the pool (overrides --kv-memory; 0: from --kv-memory)"),
		pageSize:    fs.Int("page-size", 16, "tokens per KV page (1 to 65536)"),
		maxBatched:  fs.Int("max-batched-tokens", 0, "token budget of one step (0: engine default)"),
		maxRunning:  fs.Int("max-running", 0, "sequences running at once (0: engine default)"),
		defaultTemp: fs.Float64("default-temperature", 1.0, "temperature for requests that set none (0: greedy)"),
		mmap:        fs.Bool("mmap", false, mmapUsage),
		stepLatency: fs.String("max-step-latency", "auto", "bound on a step that carries decode tokens, met by sizing its prefill chunk from measured step costs: a `duration` (e.g. 300ms), auto (4 decode-only steps, up to twice that while prompts outnumber the decoding sequences) or off (the token budget only)"),
		pooling:     fs.String("pooling", "", "pooling of embedding requests that name none: mean, cls or last (default: the model file's pooling_type, else last)"),
		device:      fs.String("device", "auto", "compute `device`: auto (CUDA when a device, the driver, NVRTC and cuBLAS are found and the CUDA kernels cover the model's weight types, else the CPU), cpu, cuda or cuda:N"),
	}
	fs.limit("page-size", 1, 1<<16)
	ef.spec = addSpecFlags(fs)
	return ef
}

// check validates the flags that are not plain numbers (those fs.Parse has
// checked) for command cmd.
func (ef *engineFlags) check(cmd string) error {
	if err := oneOf(cmd, "kv-type", *ef.kvType, "f16", "f32"); err != nil {
		return err
	}
	if err := ef.spec.check(cmd); err != nil {
		return err
	}
	if _, _, err := cuda.ParseDevice(*ef.device); err != nil {
		return fmt.Errorf("%s: --device: %w", cmd, err)
	}
	if _, err := ef.maxStepLatency(); err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	if _, err := engine.ParsePooling(*ef.pooling); err != nil {
		return fmt.Errorf("%s: --pooling: %w", cmd, err)
	}
	if strings.EqualFold(*ef.kvMemory, "auto") {
		return nil
	}
	n, err := parseBytes(*ef.kvMemory)
	if err != nil {
		return fmt.Errorf("%s: --kv-memory: %w", cmd, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: --kv-memory must be more than 0 bytes", cmd)
	}
	return nil
}

// kvBytes returns the --kv-memory budget in bytes, 0 for auto.
func (ef *engineFlags) kvBytes() (int64, error) {
	if strings.EqualFold(*ef.kvMemory, "auto") {
		return 0, nil
	}
	return parseBytes(*ef.kvMemory)
}

// runtime is a loaded model with its engine.
type runtime struct {
	file  *loadedFile
	draft *loadedFile // --draft-model, nil without
	*loader.Model
}

func (r *runtime) Close() {
	if r.Model != nil {
		r.Model.Close()
	}
	if r.file != nil {
		r.file.File.Close()
	}
	if r.draft != nil {
		r.draft.File.Close()
	}
}

// openRuntime loads the model named by the flags (or the built-in default)
// and starts an engine on it.
//
// hooks, when set, returns the engine hooks for the final model name (the
// served name, or the file's name when none is given).
func openRuntime(ef *engineFlags, name string, hooks func(model string) engine.Hooks, stderr io.Writer, logger *slog.Logger) (*runtime, error) {
	kvt := llama.KVF16
	switch strings.ToLower(*ef.kvType) {
	case "f16":
	case "f32":
		kvt = llama.KVF32
	default:
		return nil, fmt.Errorf("--kv-type must be f16 or f32, got %q", *ef.kvType)
	}
	mem, err := ef.kvBytes()
	if err != nil {
		return nil, err
	}
	lf, err := openModelFile(*ef.model, *ef.mmap, stderr)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = lf.Name
	}
	var h engine.Hooks
	if hooks != nil {
		h = hooks(name)
	}
	var draft *loadedFile
	if ef.spec != nil && *ef.spec.draft != "" {
		if draft, err = openModelFile(*ef.spec.draft, *ef.mmap, stderr); err != nil {
			lf.File.Close()
			return nil, fmt.Errorf("--draft-model: %w", err)
		}
	}
	opts := loader.Options{Name: name, Threads: *ef.threads, KVType: kvt,
		Device: *ef.device, KVMemoryAuto: mem == 0, Logger: logger, Engine: engine.Config{
			PageSize: *ef.pageSize, KVPages: *ef.kvPages, KVMemory: mem,
			MaxBatchedTokens: *ef.maxBatched, MaxRunning: *ef.maxRunning,
			DefaultTemperature: *ef.defaultTemp, GreedyDefault: *ef.defaultTemp == 0, Hooks: h, Logger: logger,
			ConsumerTimeout: consumerTimeout(ef), MaxStepLatency: must(ef.maxStepLatency()),
			Speculation: ef.spec.config(), Pooling: must(engine.ParsePooling(*ef.pooling)),
		}}
	if draft != nil {
		opts.Draft = draft.File
	}
	lm, err := loader.Load(lf.File, opts)
	if err != nil {
		lf.File.Close()
		if draft != nil {
			draft.File.Close()
		}
		return nil, err
	}
	return &runtime{file: lf, draft: draft, Model: lm}, nil
}

// maxStepLatency is engine.Config.MaxStepLatency from --max-step-latency:
// 0 for auto, -1 for off.
func (ef *engineFlags) maxStepLatency() (time.Duration, error) {
	if ef.stepLatency == nil {
		return 0, nil
	}
	switch v := strings.ToLower(*ef.stepLatency); v {
	case "auto":
		return 0, nil
	case "off":
		return -1, nil
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("--max-step-latency must be a duration above 0 (e.g. 300ms), auto or off, got %q", *ef.stepLatency)
		}
		return d, nil
	}
}

// must returns v; err was checked when the flags were validated.
func must[T any](v T, _ error) T { return v }

// consumerTimeout is the engine's consumer timeout the flags ask for (0:
// the engine's default).
func consumerTimeout(ef *engineFlags) time.Duration {
	if ef.consumerTimeout == nil {
		return 0
	}
	return *ef.consumerTimeout
}
