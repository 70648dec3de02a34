package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"oengine/engine"
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
}

func addEngineFlags(fs *flag.FlagSet) *engineFlags {
	return &engineFlags{
		model:       fs.String("model", "", "GGUF model file (default: the built-in synthetic model)"),
		threads:     fs.Int("threads", 0, "CPU worker threads (0: all cores)"),
		kvType:      fs.String("kv-type", "f16", "K/V store type: f16 or f32"),
		kvMemory:    fs.String("kv-memory", "1GiB", "memory for the paged KV cache (e.g. 512MiB, 2GiB)"),
		kvPages:     fs.Int("kv-pages", 0, "KV pages in the pool (overrides --kv-memory)"),
		pageSize:    fs.Int("page-size", 16, "tokens per KV page"),
		maxBatched:  fs.Int("max-batched-tokens", 0, "token budget of one step (0: engine default)"),
		maxRunning:  fs.Int("max-running", 0, "sequences running at once (0: engine default)"),
		defaultTemp: fs.Float64("default-temperature", 1.0, "temperature for requests that set none"),
		mmap:        fs.Bool("mmap", false, mmapUsage),
	}
}

// runtime is a loaded model with its engine.
type runtime struct {
	file *loadedFile
	*loader.Model
}

func (r *runtime) Close() {
	if r.Model != nil {
		r.Model.Close()
	}
	if r.file != nil {
		r.file.File.Close()
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
	mem, err := parseBytes(*ef.kvMemory)
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
	lm, err := loader.Load(lf.File, loader.Options{Name: name, Threads: *ef.threads, KVType: kvt, Engine: engine.Config{
		PageSize: *ef.pageSize, KVPages: *ef.kvPages, KVMemory: mem,
		MaxBatchedTokens: *ef.maxBatched, MaxRunning: *ef.maxRunning,
		DefaultTemperature: *ef.defaultTemp, Hooks: h, Logger: logger,
	}})
	if err != nil {
		lf.File.Close()
		return nil, err
	}
	return &runtime{file: lf, Model: lm}, nil
}

// parseBytes reads sizes such as 2GiB, 512MiB, 1e9 or 4096.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			mult = u.mult
			s = strings.TrimSuffix(s, u.suffix)
			break
		}
	}
	var v float64
	if _, err := fmt.Sscanf(s, "%g", &v); err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q (want e.g. 2GiB, 512MiB)", s)
	}
	return int64(v * float64(mult)), nil
}
