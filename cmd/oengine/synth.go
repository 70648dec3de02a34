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
	helpTable["synth"] = cmdHelp{synopsis: "(--preset NAME | --dims D,L,H,KV,FFN,V[,CTX]) -o OUT.gguf [flags]",
		notes: "Shows progress on a terminal while the weights are generated.",
		examples: []string{
			"oengine synth --arch llama --preset tinyllama-1.1b --type q8_0 -o tl.gguf",
			"oengine synth --arch qwen3 --dims 1024,8,16,8,3072,32000,4096 --type q4_0 --vocab real.gguf -o q.gguf",
		}}
}

// synthConfig is the parsed command line of synth.
type synthConfig struct {
	opts  synth.Options
	vocab string // copy the tokenizer of this file
	out   string
}

func parseSynth(args []string) (*synthConfig, error) {
	c := &synthConfig{}
	o := &c.opts
	fs := newFlags("synth", nil)
	fs.StringVar(&o.Arch, "arch", "llama", "architecture: llama, qwen2, qwen3, gemma2, gemma3, qwen3moe, phi3, mistral3, gpt-oss, bert, nomic-bert, nomic-bert-moe, jina-bert-v2, modern-bert or gemma-embedding (EmbeddingGemma)")
	yarn := fs.String("yarn", "", "YaRN rope scaling: `factor,original_context[,log_multiplier,beta_fast,beta_slow]`")
	fs.Func("attn-temp", "mistral3's query temperature (attention.temperature_scale)", func(s string) error {
		v, err := strconv.ParseFloat(s, 32)
		if err != nil || !(v > 0) {
			return fmt.Errorf("want a positive number, got %q", s)
		}
		o.AttnTempScale = float32(v)
		return nil
	})
	fs.IntVar(&o.LongRope, "longrope", 0, "phi3's LongRoPE with this original context `length` (short and long frequency factors, an attention factor)")
	fs.StringVar(&o.Preset, "preset", "", "shape preset: "+strings.Join(synth.PresetNames(), ", "))
	dims := fs.String("dims", "", "custom shapes: `dim,layers,heads,kv_heads,ffn,vocab[,ctx]`")
	typ := fs.String("type", "f16", "weight type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k to q6_k, iq4_nl, iq4_xs, mxfp4 (gpt-oss: experts MXFP4, the rest Q8_0)")
	fs.StringVar(&c.vocab, "vocab", "", "copy the tokenizer of this GGUF `file`")
	fs.IntVar(&o.CtxLen, "ctx", 0, "override the context length (0: the preset's)")
	fs.Uint64Var(&o.Seed, "seed", 1, "weight seed")
	fs.StringVar(&o.Pooling, "pooling", "", "write <arch>.pooling_type, as an embedding model's file does: mean, cls or last")
	fs.BoolVar(&o.Rerank, "rerank", false, "bert, nomic-bert, modern-bert, qwen3: add a reranker's classification head and write pooling_type rank (qwen3: Qwen3-Reranker's yes/no head and prompt)")
	fs.IntVar(&o.TokenTypes, "token-types", 0, "bert, nomic-bert: rows of token_types (0: 2)")
	headDim := fs.Int("head-dim", 0, "attention head width with --dims (0: dim/heads)")
	window := fs.Int("sliding-window", 0, "the sliding window with --dims (gemma3: 0 is 512, gpt-oss: 128)")
	ropeDims := fs.Int("rope-dims", 0, "rotated values per head with --dims (rope.dimension_count; 0: the whole head)")
	tied := fs.Bool("tied", false, "no output.weight: the output projection is the token embedding")
	experts := fs.String("experts", "", "experts with --dims (qwen3moe, gpt-oss): `count,used,ffn` (default 8,2,FFN)")
	softcap := fs.String("softcap", "", "gemma2's soft-capping with --dims: `attention,final` (default 50,30)")
	fs.StringVar(&c.out, "o", "", "output `file` (written with mode 0644)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if c.out == "" {
		return nil, errors.New("synth: -o out.gguf is required")
	}
	if err := oneOf("synth", "arch", o.Arch, "llama", "qwen2", "qwen3", "gemma2", "gemma3", "qwen3moe", "phi3", "mistral3", "gpt-oss", "bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "modern-bert", "gemma-embedding"); err != nil {
		return nil, err
	}
	o.Arch = strings.ToLower(o.Arch)
	if *yarn != "" {
		parts := strings.Split(*yarn, ",")
		var vals []float64
		for _, p := range parts {
			v, err := strconv.ParseFloat(strings.TrimSpace(p), 32)
			if err != nil || !(v > 0) {
				vals = nil
				break
			}
			vals = append(vals, v)
		}
		if (len(vals) != 2 && len(vals) != 5) || vals[1] != float64(int(vals[1])) {
			return nil, fmt.Errorf("synth: --yarn wants factor,original_context[,log_multiplier,beta_fast,beta_slow] (positive), got %q", *yarn)
		}
		o.YarnFactor, o.YarnOrigCtx = float32(vals[0]), int(vals[1])
		if len(vals) == 5 {
			o.YarnLogMul, o.YarnBetaFast, o.YarnBetaSlow = float32(vals[2]), float32(vals[3]), float32(vals[4])
		}
	}
	t, err := ggml.ParseType(*typ)
	if err != nil {
		return nil, fmt.Errorf("synth: --type: %w", err)
	}
	o.Type = t
	switch {
	case *dims != "" && o.Preset != "":
		return nil, errors.New("synth: give --preset or --dims, not both")
	case *dims != "":
		if o.Dims, err = parseDims(*dims); err != nil {
			return nil, err
		}
		o.Dims.HeadDim, o.Dims.SlidingWindow, o.Dims.RopeDims, o.Dims.Tied = *headDim, *window, *ropeDims, *tied
		if *experts != "" {
			var e [3]int
			parts := strings.Split(*experts, ",")
			for i := range e {
				if len(parts) != 3 {
					return nil, fmt.Errorf("synth: --experts wants count,used,ffn, got %q", *experts)
				}
				if e[i], err = strconv.Atoi(strings.TrimSpace(parts[i])); err != nil || e[i] <= 0 {
					return nil, fmt.Errorf("synth: bad number %q in --experts", parts[i])
				}
			}
			o.Dims.Experts, o.Dims.ExpertsUsed, o.Dims.ExpertFFN = e[0], e[1], e[2]
		}
		if *softcap != "" {
			var a, f float64
			if n, err := fmt.Sscanf(*softcap, "%g,%g", &a, &f); n != 2 || err != nil || !(a > 0) || !(f > 0) {
				return nil, fmt.Errorf("synth: --softcap wants attention,final (positive), got %q", *softcap)
			}
			o.Dims.AttnSoftcap, o.Dims.FinalSoftcap = float32(a), float32(f)
		}
	case o.Preset == "":
		return nil, errors.New("synth: give --preset NAME or --dims ...")
	case *headDim != 0 || *window != 0 || *experts != "" || *softcap != "" || *ropeDims != 0 || *tied:
		return nil, errors.New("synth: --head-dim, --sliding-window, --experts, --softcap, --rope-dims and --tied go with --dims")
	default:
		if _, ok := synth.Presets[o.Preset]; !ok {
			return nil, fmt.Errorf("synth: --preset must be %s, got %q", orList(synth.PresetNames()), o.Preset)
		}
	}
	return c, nil
}

func runSynth(args []string, stdout, stderr io.Writer) error {
	c, err := parseSynth(args)
	if err != nil {
		return err
	}
	return c.run(stdout, stderr)
}

func (c *synthConfig) run(stdout, stderr io.Writer) error {
	o := c.opts
	if c.vocab != "" {
		vf, err := gguf.Open(c.vocab)
		if err != nil {
			return err
		}
		defer vf.Close()
		o.Vocab = vf
	}
	start := time.Now()
	var bar *progress
	o.Progress = func(done, total int64) {
		if bar == nil {
			bar = newProgress(stderr, "generating", total)
		}
		bar.set(done)
	}
	w, err := synth.NewWriter(o)
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		return err
	}
	if err := w.WriteFile(c.out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%s %s, %s) in %.1fs\n", c.out, o.Arch, presetLabel(o), o.Type, time.Since(start).Seconds())
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
