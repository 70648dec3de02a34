// Package loader turns a GGUF file into a runnable model: the weights and
// forward pass, the tokenizer and an engine over them. It is the one place
// that wires them together, for the command line and for the test
// harnesses of the server and the bench tool.
package loader

import (
	"errors"
	"fmt"

	"oengine/engine"
	"oengine/model/gguf"
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
}

// Model is a loaded model with its engine. Close releases the engine and
// the weights; the GGUF file stays the caller's.
type Model struct {
	File      *gguf.File
	Weights   *llama.Model
	Tokenizer *tokenizer.Tokenizer
	Engine    *engine.Engine
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
	if m.Weights, err = llama.Load(f, llama.Options{Threads: o.Threads}); err != nil {
		return nil, err
	}
	cfg := o.Engine
	cfg.ModelName = o.Name
	if cfg.ModelName == "" {
		cfg.ModelName, _ = f.String("general.name")
	}
	if m.Engine, err = engine.New(cfg, engine.FromLlama(m.Weights, o.KVType), engine.WrapTokenizer(m.Tokenizer)); err != nil {
		m.Weights.Close()
		return nil, err
	}
	return m, nil
}

// Close stops the engine and frees the weights; safe to call twice.
func (m *Model) Close() {
	if m.Engine != nil {
		m.Engine.Close()
		m.Engine = nil
	}
	if m.Weights != nil {
		m.Weights.Close()
		m.Weights = nil
	}
}
