package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"oengine/ggml"
	"oengine/model/gguf"
	"oengine/model/synth"
)

func init() {
	register("synth", "write a model with seeded random weights and real shapes", runSynth)
}

func runSynth(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("synth", stderr)
	arch := fs.String("arch", "llama", "architecture: llama, qwen2 or qwen3")
	preset := fs.String("preset", "", "shape preset: "+strings.Join(synth.PresetNames(), ", "))
	dims := fs.String("dims", "", "custom shapes: dim,layers,heads,kv_heads,ffn,vocab[,ctx]")
	typ := fs.String("type", "f16", "weight type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, ...")
	vocab := fs.String("vocab", "", "copy the tokenizer of this GGUF file")
	ctx := fs.Int("ctx", 0, "override the context length")
	seed := fs.Uint64("seed", 1, "weight seed")
	out := fs.String("o", "", "output file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("synth: -o out.gguf is required")
	}
	t, err := ggml.ParseType(*typ)
	if err != nil {
		return err
	}
	o := synth.Options{Arch: *arch, Preset: *preset, Type: t, Seed: *seed, CtxLen: *ctx}
	if *dims != "" {
		if *preset != "" {
			return errors.New("synth: give --preset or --dims, not both")
		}
		d, err := parseDims(*dims)
		if err != nil {
			return err
		}
		o.Dims = d
	} else if *preset == "" {
		return errors.New("synth: give --preset NAME or --dims ...")
	}
	if *vocab != "" {
		vf, err := gguf.Open(*vocab)
		if err != nil {
			return err
		}
		defer vf.Close()
		o.Vocab = vf
	}
	start := time.Now()
	if err := synth.WriteFile(o, *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%s %s, %s) in %.1fs\n", *out, *arch, presetLabel(o), t, time.Since(start).Seconds())
	return nil
}

func presetLabel(o synth.Options) string {
	if o.Preset != "" {
		return o.Preset
	}
	return fmt.Sprintf("dims %+v", o.Dims)
}

func parseDims(s string) (synth.Dims, error) {
	parts := strings.Split(s, ",")
	if len(parts) < 6 || len(parts) > 7 {
		return synth.Dims{}, fmt.Errorf("synth: --dims wants dim,layers,heads,kv_heads,ffn,vocab[,ctx], got %q", s)
	}
	v := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n <= 0 {
			return synth.Dims{}, fmt.Errorf("synth: bad number %q in --dims", p)
		}
		v[i] = n
	}
	d := synth.Dims{Dim: v[0], Layers: v[1], Heads: v[2], KVHeads: v[3], FFN: v[4], Vocab: v[5], CtxLen: 2048}
	if len(v) == 7 {
		d.CtxLen = v[6]
	}
	return d, nil
}
