package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"oengine/ggml"
	"oengine/model/llama"
)

func init() {
	register("info", "describe a GGUF model (architecture, shapes, tensor types, vocabulary)", runInfo)
	helpTable["info"] = cmdHelp{synopsis: "[MODEL.gguf] [flags]", modelArg: true,
		notes:    "Without a model it describes the built-in synthetic model. The file is mapped, not read.",
		examples: []string{"oengine info ~/models/qwen2.5-0.5b-instruct-q8_0.gguf", "oengine info --model m.gguf"}}
}

// infoConfig is the parsed command line of info.
type infoConfig struct{ model string }

func parseInfo(args []string) (*infoConfig, error) {
	c := &infoConfig{}
	fs := newFlags("info", nil)
	fs.StringVar(&c.model, "model", "", "GGUF `file`, also accepted as the argument (default: the built-in synthetic model)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return c, nil
}

func runInfo(args []string, stdout, stderr io.Writer) error {
	c, err := parseInfo(args)
	if err != nil {
		return err
	}
	lf, err := openModelFile(c.model, true, stderr)
	if err != nil {
		return err
	}
	defer lf.File.Close()
	describe(stdout, lf)
	return nil
}

func describe(w io.Writer, lf *loadedFile) {
	f := lf.File
	arch, _ := f.String("general.architecture")
	name, _ := f.String("general.name")
	fmt.Fprintf(w, "model:         %s\n", lf.Label)
	fmt.Fprintf(w, "name:          %s\n", name)
	fmt.Fprintf(w, "gguf version:  %d (alignment %d)\n", f.Version, f.Alignment)
	fmt.Fprintf(w, "architecture:  %s\n", arch)
	u := func(k string) string {
		if v, ok := f.Uint(arch + "." + k); ok {
			return fmt.Sprint(v)
		}
		return "-"
	}
	fmt.Fprintf(w, "context:       %s\n", u("context_length"))
	fmt.Fprintf(w, "embedding:     %s\n", u("embedding_length"))
	fmt.Fprintf(w, "layers:        %s\n", u("block_count"))
	fmt.Fprintf(w, "heads:         %s (kv %s, head dim %s)\n", u("attention.head_count"), u("attention.head_count_kv"), u("attention.key_length"))
	fmt.Fprintf(w, "ffn:           %s\n", u("feed_forward_length"))
	if v, ok := f.Float(arch + ".rope.freq_base"); ok {
		fmt.Fprintf(w, "rope base:     %g\n", v)
	}
	tm, _ := f.String("tokenizer.ggml.model")
	pre, _ := f.String("tokenizer.ggml.pre")
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	fmt.Fprintf(w, "vocabulary:    %d tokens (%s, pre %q)\n", len(toks), tm, pre)
	if _, ok := f.String("tokenizer.chat_template"); ok {
		fmt.Fprintf(w, "chat template: yes\n")
	}
	if _, ok := f.String("tokenizer.chat_template.rerank"); ok {
		fmt.Fprintf(w, "rerank prompt: yes\n")
	}
	if c, err := llama.ConfigFromGGUF(f); err == nil && (c.Encoder || c.RankOutputs > 0) {
		serves := "generation and embeddings"
		if c.Encoder {
			serves = "embeddings only (an encoder: no generation)"
		}
		if c.RankOutputs > 0 {
			serves += fmt.Sprintf("; reranking (a classification head on the %s state, outputs: %d; CPU only)", c.RankPooling, c.RankOutputs)
		}
		fmt.Fprintf(w, "serves:        %s\n", serves)
	}
	counts := map[ggml.Type]int{}
	bytes := map[ggml.Type]int64{}
	var params uint64
	var total int64
	for _, t := range f.Tensors {
		counts[t.Type]++
		bytes[t.Type] += int64(len(t.Data))
		total += int64(len(t.Data))
		params += t.Elements()
	}
	fmt.Fprintf(w, "parameters:    %.3fB\n", float64(params)/1e9)
	fmt.Fprintf(w, "size:          %s (tensor data %s)\n", humanBytes(f.Size()), humanBytes(total))
	types := make([]ggml.Type, 0, len(counts))
	for t := range counts {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return types[i] < types[j] })
	var parts []string
	for _, t := range types {
		parts = append(parts, fmt.Sprintf("%s x%d (%s)", t, counts[t], humanBytes(bytes[t])))
	}
	fmt.Fprintf(w, "tensor types:  %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "tensors:       %d\n", len(f.Tensors))
	for i, t := range f.Tensors {
		if i >= 12 && len(f.Tensors) > 14 {
			fmt.Fprintf(w, "  ... %d more\n", len(f.Tensors)-i)
			break
		}
		fmt.Fprintf(w, "  %-28s %-5s %v\n", t.Name, t.Type, t.Dims)
	}
}
