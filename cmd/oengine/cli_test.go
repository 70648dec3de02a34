package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"oengine/ggml"
	"oengine/model/llama"
	"oengine/model/verify"
)

// engineValues is engineFlags with the pointers followed, for comparisons.
type engineValues struct {
	model, kvType, kvMemory, device, stepLatency       string
	threads, kvPages, pageSize, maxBatched, maxRunning int
	defaultTemp                                        float64
	mmap                                               bool
}

func valuesOf(ef *engineFlags) engineValues {
	return engineValues{model: *ef.model, kvType: *ef.kvType, kvMemory: *ef.kvMemory,
		threads: *ef.threads, kvPages: *ef.kvPages, pageSize: *ef.pageSize, maxBatched: *ef.maxBatched,
		maxRunning: *ef.maxRunning, defaultTemp: *ef.defaultTemp, mmap: *ef.mmap, device: *ef.device,
		stepLatency: *ef.stepLatency}
}

// defaults is what the engine flags hold when none is given.
var defaults = engineValues{kvType: "f16", kvMemory: "auto", pageSize: 16, defaultTemp: 1, device: "auto", stepLatency: "auto"}

func with(f func(*engineValues)) engineValues {
	v := defaults
	f(&v)
	return v
}

// wantErr checks err against a wanted message fragment ("" = no error).
func wantErr(t *testing.T, err error, want string) bool {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
	return true
}

func TestParseServe(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		err    string
		engine engineValues
		check  func(t *testing.T, c *serveConfig)
	}{
		{name: "defaults", args: nil, engine: defaults, check: func(t *testing.T, c *serveConfig) {
			if c.grpcAddr == "" || c.sseTemp != -1 || c.sessionRetention != time.Hour {
				t.Errorf("defaults %+v", c)
			}
		}},
		{name: "positional model then flags", args: []string{"m.gguf", "--grpc-addr", ":1", "--kv-memory", "2GiB", "--http-addr", ""},
			engine: with(func(v *engineValues) { v.model, v.kvMemory = "m.gguf", "2GiB" }),
			check: func(t *testing.T, c *serveConfig) {
				if c.grpcAddr != ":1" || c.httpAddr != "" {
					t.Errorf("addresses %q %q", c.grpcAddr, c.httpAddr)
				}
			}},
		{name: "device and kv-memory auto", args: []string{"m.gguf", "--device", "cuda:1", "--kv-memory", "AUTO"},
			engine: with(func(v *engineValues) { v.model, v.device, v.kvMemory = "m.gguf", "cuda:1", "AUTO" })},
		{name: "flags then positional", args: []string{"--threads", "3", "m.gguf", "--mmap"},
			engine: with(func(v *engineValues) { v.model, v.threads, v.mmap = "m.gguf", 3, true })},
		{name: "after --", args: []string{"--page-size", "32", "--", "-odd.gguf"},
			engine: with(func(v *engineValues) { v.model, v.pageSize = "-odd.gguf", 32 })},
		{name: "same model twice", args: []string{"m.gguf", "--model", "m.gguf"},
			engine: with(func(v *engineValues) { v.model = "m.gguf" })},
		{name: "single dash and = forms", args: []string{"-kv-pages=100", "-max-running", "4", "--max-batched-tokens=256", "-default-temperature", "0"},
			engine: with(func(v *engineValues) { v.kvPages, v.maxRunning, v.maxBatched, v.defaultTemp = 100, 4, 256, 0 })},
		{name: "repeatable and durations", args: []string{"--alias", "a", "--alias", "b", "--cors-origin", "*", "--drain-grace", "5s",
			"--session-lease", "1m", "--sse-temperature", "-1", "--log-level", "debug", "--served-model-name", "qwen"},
			engine: defaults, check: func(t *testing.T, c *serveConfig) {
				if !reflect.DeepEqual([]string(c.aliases), []string{"a", "b"}) || c.corsOrigins[0] != "*" ||
					c.grace != 5*time.Second || c.sessionLease != time.Minute || c.logLevel.String() != "DEBUG" || c.name != "qwen" {
					t.Errorf("parsed %+v", c)
				}
			}},
		{name: "consumer timeout", args: []string{"--consumer-timeout", "5s"}, engine: defaults, check: func(t *testing.T, c *serveConfig) {
			if consumerTimeout(c.engine) != 5*time.Second {
				t.Errorf("consumer timeout %v, want 5s", consumerTimeout(c.engine))
			}
		}},
		{name: "max step latency", args: []string{"--max-step-latency", "250ms"}, engine: with(func(v *engineValues) { v.stepLatency = "250ms" }),
			check: func(t *testing.T, c *serveConfig) {
				if d, err := c.engine.maxStepLatency(); err != nil || d != 250*time.Millisecond {
					t.Errorf("max step latency %v %v, want 250ms", d, err)
				}
			}},
		{name: "max step latency off", args: []string{"--max-step-latency", "OFF"}, engine: with(func(v *engineValues) { v.stepLatency = "OFF" }),
			check: func(t *testing.T, c *serveConfig) {
				if d, _ := c.engine.maxStepLatency(); d != -1 {
					t.Errorf("max step latency %v, want -1 (off)", d)
				}
			}},
		{name: "max step latency bad", args: []string{"--max-step-latency", "0s"}, err: `serve: --max-step-latency must be a duration above 0 (e.g. 300ms), auto or off, got "0s"`},
		{name: "consumer timeout zero", args: []string{"--consumer-timeout", "0s"}, err: "serve: --consumer-timeout must be more than 0, got 0s"},
		{name: "model given twice", args: []string{"a.gguf", "--model", "b.gguf"}, err: `serve: model given twice: "a.gguf" as an argument and --model "b.gguf"`},
		{name: "leftover argument", args: []string{"a.gguf", "--grpc-addr", ":1", "b"}, err: `serve: unexpected argument "b"`},
		{name: "unknown flag", args: []string{"--grpc-adr", ":1"}, err: "flag provided but not defined: --grpc-adr"},
		{name: "missing value", args: []string{"--threads"}, err: "flag needs an argument: --threads"},
		{name: "not a number", args: []string{"--threads", "x"}, err: `invalid value "x" for flag --threads`},
		{name: "kv-memory G", args: []string{"--kv-memory", "2G"}, err: "did you mean 2GiB or 2GB?"},
		{name: "kv-memory exponent", args: []string{"--kv-memory", "1e9"}, err: `serve: --kv-memory: bad size "1e9"`},
		{name: "kv-memory zero", args: []string{"--kv-memory", "0"}, err: "--kv-memory must be more than 0 bytes"},
		{name: "kv-memory overflow", args: []string{"--kv-memory", "10000000TB"}, err: "beyond 9223372036854775807 bytes"},
		{name: "bad device", args: []string{"--device", "metal"}, err: `serve: --device: cuda: bad device "metal"`},
		{name: "bad device index", args: []string{"--device", "cuda:x"}, err: "want cuda:N with N a device ordinal"},
		{name: "kv-pages negative", args: []string{"--kv-pages", "-5"}, err: "serve: --kv-pages must not be negative, got -5"},
		{name: "max-running negative", args: []string{"--max-running", "-1"}, err: "--max-running must not be negative"},
		{name: "threads negative", args: []string{"--threads", "-3"}, err: "--threads must not be negative, got -3"},
		{name: "page-size zero", args: []string{"--page-size", "0"}, err: "--page-size must be between 1 and 65536, got 0"},
		{name: "page-size huge", args: []string{"--page-size", "70000"}, err: "--page-size must be between 1 and 65536"},
		{name: "max-batched-tokens negative", args: []string{"--max-batched-tokens", "-1"}, err: "--max-batched-tokens must not be negative"},
		{name: "default-temperature negative", args: []string{"--default-temperature", "-0.5"}, err: "--default-temperature must not be negative"},
		{name: "default-temperature NaN", args: []string{"--default-temperature", "NaN"}, err: "--default-temperature must be a finite number"},
		{name: "drain-grace negative", args: []string{"--drain-grace", "-1s"}, err: "--drain-grace must not be negative"},
		{name: "max-sessions negative", args: []string{"--max-sessions", "-2"}, err: "--max-sessions must not be negative"},
		{name: "sse-max-tokens zero", args: []string{"--sse-max-tokens", "0"}, err: "--sse-max-tokens must be at least 1"},
		{name: "sse-keepalive negative", args: []string{"--sse-keepalive", "-1s"}, err: "--sse-keepalive must not be negative"},
		{name: "kv-type", args: []string{"--kv-type", "f8"}, err: `serve: --kv-type must be f16 or f32, got "f8"`},
		{name: "log-level", args: []string{"--log-level", "loud"}, err: `--log-level must be debug, info, warn or error, got "loud"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseServe(tc.args)
			if wantErr(t, err, tc.err) {
				return
			}
			if got := valuesOf(c.engine); got != tc.engine {
				t.Errorf("engine flags %+v, want %+v", got, tc.engine)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestParseGenerate(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		err    string
		want   generateConfig
		engine engineValues
	}{
		{name: "defaults", want: generateConfig{prompt: "Once upon a time", n: 64}, engine: defaults},
		{name: "positional model anywhere", args: []string{"--prompt", "Hi", "m.gguf", "-n", "8", "--temp", "0.8", "--seed", "7", "--ignore-eos"},
			want:   generateConfig{prompt: "Hi", n: 8, temp: 0.8, seed: 7, ignoreEOS: true},
			engine: with(func(v *engineValues) { v.model = "m.gguf" })},
		{name: "kv", args: []string{"--kv-type", "F32", "--kv-memory", "512 mib"}, want: generateConfig{prompt: "Once upon a time", n: 64},
			engine: with(func(v *engineValues) { v.kvType, v.kvMemory = "F32", "512 mib" })},
		{name: "n zero", args: []string{"-n", "0"}, err: "generate: -n must be at least 1, got 0"},
		{name: "temp negative", args: []string{"--temp", "-1"}, err: "generate: --temp must not be negative"},
		{name: "seed negative", args: []string{"--seed", "-1"}, err: `invalid value "-1" for flag --seed`},
		{name: "two models", args: []string{"a.gguf", "b.gguf"}, err: `generate: unexpected argument "b.gguf"`},
		{name: "page-size", args: []string{"--page-size", "0"}, err: "generate: --page-size must be between 1 and 65536"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseGenerate(tc.args)
			if wantErr(t, err, tc.err) {
				return
			}
			if got := valuesOf(c.engine); got != tc.engine {
				t.Errorf("engine flags %+v, want %+v", got, tc.engine)
			}
			c.engine = nil
			if *c != tc.want {
				t.Errorf("parsed %+v, want %+v", *c, tc.want)
			}
		})
	}
}

func TestParseTokenize(t *testing.T) {
	cases := []struct {
		name string
		args []string
		err  string
		want tokenizeConfig
	}{
		{name: "positional", args: []string{"m.gguf", "--text", "Hello", "--json"}, want: tokenizeConfig{model: "m.gguf", text: "Hello", asJSON: true}},
		{name: "flag form", args: []string{"--model", "m.gguf", "--file", "p.txt", "--no-special", "--parse-special"},
			want: tokenizeConfig{model: "m.gguf", file: "p.txt", noSpecial: true, parseSpecial: true}},
		{name: "synthetic", args: []string{"--text", "x"}, want: tokenizeConfig{text: "x"}},
		{name: "neither text nor file", args: []string{"m.gguf"}, err: "tokenize: give exactly one of --text or --file"},
		{name: "both text and file", args: []string{"--text", "a", "--file", "b"}, err: "exactly one of --text or --file"},
		{name: "leftover", args: []string{"m.gguf", "--text", "a", "extra"}, err: `tokenize: unexpected argument "extra"`},
		{name: "model twice", args: []string{"a.gguf", "--model", "b.gguf", "--text", "x"}, err: "tokenize: model given twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseTokenize(tc.args)
			if wantErr(t, err, tc.err) {
				return
			}
			if *c != tc.want {
				t.Errorf("parsed %+v, want %+v", *c, tc.want)
			}
		})
	}
}

func TestParseVerify(t *testing.T) {
	cases := []struct {
		name string
		args []string
		err  string
		want verifyConfig
	}{
		{name: "positional", args: []string{"m.gguf", "--ref", "r.json"},
			want: verifyConfig{model: "m.gguf", ref: "r.json", device: "auto", opts: verifyOpts(func(o *verify.Options) {})}},
		{name: "cuda", args: []string{"m.gguf", "--ref", "r.json", "--device", "cuda:1", "--cuda-exact"},
			want: verifyConfig{model: "m.gguf", ref: "r.json", device: "cuda:1", opts: verifyOpts(func(o *verify.Options) { o.CUDAExact = true })}},
		{name: "bad device", args: []string{"m.gguf", "--ref", "r.json", "--device", "tpu"}, err: `verify: --device: cuda: bad device "tpu"`},
		{name: "flags", args: []string{"--ref", "r.json", "--model", "m.gguf", "--kv", "f32", "--threads", "2", "--page-size", "32",
			"--max-tokens", "64", "--greedy-tie", "0.1", "--ggml=false", "--ggml-forced", "--device", "cpu"},
			want: verifyConfig{model: "m.gguf", ref: "r.json", device: "cpu", opts: verifyOpts(func(o *verify.Options) {
				o.KV, o.Threads, o.PageSize, o.MaxTokens, o.GreedyTie = llama.KVF32, 2, 32, 64, 0.1
				o.GGML, o.GGMLForced = false, true
			})}},
		{name: "no ref", args: []string{"m.gguf"}, err: "verify: a model (argument or --model) and --ref are required"},
		{name: "no model", args: []string{"--ref", "r.json"}, err: "and --ref are required"},
		{name: "kv", args: []string{"m.gguf", "--ref", "r", "--kv", "q8"}, err: `verify: --kv must be f16 or f32, got "q8"`},
		{name: "threads", args: []string{"m.gguf", "--ref", "r", "--threads", "-1"}, err: "verify: --threads must not be negative"},
		{name: "max-tokens", args: []string{"m.gguf", "--ref", "r", "--max-tokens", "-1"}, err: "verify: --max-tokens must not be negative"},
		{name: "greedy-tie", args: []string{"m.gguf", "--ref", "r", "--greedy-tie", "-0.1"}, err: "verify: --greedy-tie must not be negative"},
		{name: "page-size", args: []string{"m.gguf", "--ref", "r", "--page-size", "0"}, err: "verify: --page-size must be between 1 and 65536"},
		{name: "leftover", args: []string{"m.gguf", "r.json"}, err: `verify: unexpected argument "r.json"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseVerify(tc.args)
			if wantErr(t, err, tc.err) {
				return
			}
			if !reflect.DeepEqual(*c, tc.want) {
				t.Errorf("parsed %+v, want %+v", *c, tc.want)
			}
		})
	}
}

// verifyOpts returns verify's default options changed by f.
func verifyOpts(f func(*verify.Options)) verify.Options {
	o := verify.Options{KV: llama.KVF16, PageSize: 16, GreedyTie: 0.05, GGML: true, GGMLAVX512: true}
	f(&o)
	return o
}

func TestParseInfo(t *testing.T) {
	cases := []struct {
		name string
		args []string
		err  string
		want string
	}{
		{name: "positional", args: []string{"m.gguf"}, want: "m.gguf"},
		{name: "flag", args: []string{"--model", "m.gguf"}, want: "m.gguf"},
		{name: "synthetic", args: nil, want: ""},
		{name: "two files", args: []string{"a.gguf", "b.gguf"}, err: `info: unexpected argument "b.gguf"`},
		{name: "both differ", args: []string{"--model", "a.gguf", "b.gguf"}, err: "info: model given twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseInfo(tc.args)
			if wantErr(t, err, tc.err) {
				return
			}
			if c.model != tc.want {
				t.Errorf("model %q, want %q", c.model, tc.want)
			}
		})
	}
}

func TestParseSynth(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		err   string
		check func(t *testing.T, c *synthConfig)
	}{
		{name: "preset", args: []string{"--preset", "tiny", "--type", "q4_0", "-o", "x.gguf", "--seed", "3", "--ctx", "512", "--arch", "Qwen3"},
			check: func(t *testing.T, c *synthConfig) {
				o := c.opts
				if o.Preset != "tiny" || o.Type != ggml.TypeQ4_0 || c.out != "x.gguf" || o.Seed != 3 || o.CtxLen != 512 || o.Arch != "qwen3" {
					t.Errorf("parsed %+v", c)
				}
			}},
		{name: "dims", args: []string{"--dims", "64,2,4,2,128,256,1024", "-o", "x.gguf"},
			check: func(t *testing.T, c *synthConfig) {
				d := c.opts.Dims
				if d.Dim != 64 || d.Layers != 2 || d.Heads != 4 || d.KVHeads != 2 || d.FFN != 128 || d.Vocab != 256 || d.CtxLen != 1024 {
					t.Errorf("dims %+v", d)
				}
			}},
		{name: "no output", args: []string{"--preset", "tiny"}, err: "synth: -o out.gguf is required"},
		{name: "no shape", args: []string{"-o", "x"}, err: "synth: give --preset NAME or --dims"},
		{name: "both shapes", args: []string{"-o", "x", "--preset", "tiny", "--dims", "1,1,1,1,1,1"}, err: "give --preset or --dims, not both"},
		{name: "bad preset", args: []string{"-o", "x", "--preset", "huge"}, err: `synth: --preset must be bge-small-en, gemma2-2b, gemma3-1b, gpt-oss-20b, llama3-8b, nomic-embed-text, phi3-mini, qwen3-0.6b, qwen3-30b-a3b, tiny or tinyllama-1.1b, got "huge"`},
		{name: "bad dims", args: []string{"-o", "x", "--dims", "1,2"}, err: "synth: --dims wants"},
		{name: "bad type", args: []string{"-o", "x", "--preset", "tiny", "--type", "q9"}, err: "synth: --type:"},
		{name: "bad arch", args: []string{"-o", "x", "--preset", "tiny", "--arch", "gpt2"}, err: `synth: --arch must be llama, qwen2, qwen3, gemma2, gemma3, qwen3moe, phi3, mistral3, gpt-oss, bert, nomic-bert, nomic-bert-moe, jina-bert-v2, modern-bert or gemma-embedding, got "gpt2"`},
		{name: "negative ctx", args: []string{"-o", "x", "--preset", "tiny", "--ctx", "-1"}, err: "synth: --ctx must not be negative"},
		{name: "leftover", args: []string{"-o", "x", "--preset", "tiny", "y.gguf"}, err: `synth: unexpected argument "y.gguf"`},
		{name: "bad yarn", args: []string{"-o", "x", "--preset", "tiny", "--arch", "qwen3", "--yarn", "4"}, err: `synth: --yarn wants factor,original_context[,log_multiplier,beta_fast,beta_slow] (positive), got "4"`},
		{name: "head dim with preset", args: []string{"-o", "x", "--preset", "tiny", "--head-dim", "64"}, err: "synth: --head-dim, --sliding-window, --experts, --softcap, --rope-dims and --tied go with --dims"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseSynth(tc.args)
			if wantErr(t, err, tc.err) {
				return
			}
			tc.check(t, c)
		})
	}
}

func TestParseVersion(t *testing.T) {
	if _, err := parseVersion(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := parseVersion([]string{"x"}); err == nil || !strings.Contains(err.Error(), `version: unexpected argument "x"`) {
		t.Fatalf("leftover argument: %v", err)
	}
}

// TestBenchArguments covers the bench subcommands' argument errors, which
// are reported before anything is loaded or dialled.
func TestBenchArguments(t *testing.T) {
	cases := []struct {
		name string
		args []string
		err  string
	}{
		{"model twice", []string{"bench", "model", "a.gguf", "--model", "b.gguf"}, "bench model: model given twice"},
		{"model leftover", []string{"bench", "model", "a.gguf", "b.gguf"}, `bench model: unexpected argument "b.gguf"`},
		{"model reps", []string{"bench", "model", "--reps", "0"}, "bench model: --reps must be at least 1"},
		{"model pp", []string{"bench", "model", "--pp", "-1"}, "bench model: --pp must not be negative"},
		{"model threads", []string{"bench", "model", "--threads", "-3"}, "bench model: --threads must not be negative"},
		{"serve leftover", []string{"bench", "serve", "x.json"}, `bench serve: unexpected argument "x.json"`},
		{"serve concurrency", []string{"bench", "serve", "--concurrency", "-1"}, "bench serve: --concurrency must not be negative"},
		{"serve cancel fraction", []string{"bench", "serve", "--cancel-fraction", "1.5"}, "--cancel-fraction must be between 0 and 1"},
		{"serve rate", []string{"bench", "serve", "--rate", "-2"}, "bench serve: --rate must not be negative"},
		{"serve duration", []string{"bench", "serve", "--duration", "-1s"}, "bench serve: --duration must not be negative"},
		{"compare count", []string{"bench", "compare", "a.json"}, "bench compare: want two JSON files"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			wantErr(t, dispatch(tc.args, &out, &errb), tc.err)
		})
	}
}

func TestParseBytes(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  string
	}{
		{"4096", 4096, ""},
		{"512B", 512, ""},
		{"2GiB", 2 << 30, ""},
		{"2gib", 2 << 30, ""},
		{"2 GiB", 2 << 30, ""},
		{" 1.5GB ", 1_500_000_000, ""},
		{"1KB", 1000, ""},
		{"1kib", 1024, ""},
		{"3MB", 3_000_000, ""},
		{"3MiB", 3 << 20, ""},
		{"1TB", 1e12, ""},
		{"1TiB", 1 << 40, ""},
		{"0.5KiB", 512, ""},
		{".5KiB", 512, ""},
		{"1.KB", 1000, ""},
		{"0.3KiB", 307, ""}, // fractions of a byte are dropped
		{"8388607TiB", 8388607 << 40, ""},
		{"8388608TiB", 0, "beyond 9223372036854775807 bytes"},
		{"9223372036854775807", 9223372036854775807, ""},
		{"9223372036854775808", 0, "beyond"},
		{"2G", 0, `unknown unit "G"; use B, KB, MB, GB, TB or KiB, MiB, GiB, TiB (did you mean 2GiB or 2GB?)`},
		{"512m", 0, "did you mean 512MiB or 512MB?"},
		{"1PB", 0, `unknown unit "PB"`},
		{"1e9", 0, "want a number and a unit"},
		{"-1GiB", 0, "want a number and a unit"},
		{"+1GiB", 0, "want a number and a unit"},
		{"GiB", 0, "want a number and a unit"},
		{"", 0, "want a number and a unit"},
		{"1  GiB", 0, "want a number and a unit"},
		{"1,5GB", 0, "want a number and a unit"},
		{"0x10", 0, "want a number and a unit"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseBytes(tc.in)
			if wantErr(t, err, tc.err) {
				return
			}
			if got != tc.want {
				t.Errorf("parseBytes(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

// allCommands lists every command and subcommand that takes flags.
func allCommands() [][]string {
	var out [][]string
	for _, n := range commandNames() {
		if n != "bench" {
			out = append(out, []string{n})
		}
	}
	for _, s := range []string{"serve", "model", "compare", "chart"} {
		out = append(out, []string{"bench", s})
	}
	return out
}

var singleDashLong = regexp.MustCompile(`(?m)^\s+-[a-z][a-z]`)

func TestHelpEveryCommand(t *testing.T) {
	for _, cmd := range allCommands() {
		name := strings.Join(cmd, " ")
		c := cmd[:len(cmd):len(cmd)]
		for _, form := range [][]string{append(c, "--help"), append(c, "-h"), append([]string{"help"}, cmd...),
			append(c, "--help", "--no-such-flag"), append(c, "some-argument", "--help")} {
			t.Run(strings.Join(form, "_"), func(t *testing.T) {
				var out, errb bytes.Buffer
				if err := dispatch(form, &out, &errb); err != nil {
					t.Fatalf("%v (stderr %q)", err, errb.String())
				}
				h := out.String()
				for _, want := range []string{"oengine " + name + ": ", "usage: oengine " + name, "example", "\n  oengine " + name} {
					if !strings.Contains(h, want) {
						t.Errorf("help lacks %q:\n%s", want, h)
					}
				}
				if m := singleDashLong.FindString(h); m != "" {
					t.Errorf("help spells a long flag with one dash (%q):\n%s", m, h)
				}
				if helpFor(name).modelArg && !strings.Contains(h, "[MODEL.gguf]") && !strings.Contains(h, "MODEL.gguf --ref") {
					t.Errorf("help does not show the positional model:\n%s", h)
				}
			})
		}
	}
}

func TestHelpListsFlagsWithDoubleDash(t *testing.T) {
	var out bytes.Buffer
	if err := dispatch([]string{"serve", "--help"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n  --grpc-addr ADDRESS\n", "\n  --kv-memory SIZE\n", "\n  --mmap\n", "\n  --alias NAME\n", `(default "auto")`, "\n  --device DEVICE\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve help lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := dispatch([]string{"synth", "--help"}, &out, &out); err != nil || !strings.Contains(out.String(), "\n  -o FILE\n") {
		t.Errorf("synth help lacks -o FILE (%v):\n%s", err, out.String())
	}
}

func TestDispatchWithoutCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if err := dispatch(nil, &out, &errb); err == nil {
		t.Error("no command: nil error (exit status 0)")
	}
	for _, n := range commandNames() {
		if !strings.Contains(errb.String(), "\n  "+n+" ") {
			t.Errorf("command list lacks %s:\n%s", n, errb.String())
		}
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		out.Reset()
		if err := dispatch(args, &out, &errb); err != nil || !strings.Contains(out.String(), "\n  serve ") {
			t.Errorf("%v: %v\n%s", args, err, out.String())
		}
	}
	if err := dispatch([]string{"serv"}, &out, &errb); err == nil || !strings.Contains(err.Error(), `unknown command "serv"`) {
		t.Errorf("unknown command: %v", err)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errb bytes.Buffer
		if err := dispatch(args, &out, &errb); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"oengine " + version + "\n", "\ngo:        go", "\nbuild:", "\ncpu:", "\ncuda:      "} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v lacks %q:\n%s", args, want, out.String())
			}
		}
	}
	got := versionText(buildFacts{module: "oengine", modVersion: "(devel)", commit: "abc123", dirty: true, time: "2026-01-02T03:04:05Z",
		goVersion: "go1.99", settings: []string{"-race=true", "CGO_ENABLED=1"}}, []string{"AVX2", "AVX512-VNNI"}, "avx512", "not found (no driver)")
	for _, want := range []string{"module:    oengine (devel)\n", "commit:    abc123 (dirty: uncommitted changes), 2026-01-02T03:04:05Z\n",
		"build:     -race=true CGO_ENABLED=1\n", "cpu:       AVX2 AVX512-VNNI (kernels: avx512, ", "cuda:      not found (no driver)\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("versionText lacks %q:\n%s", want, got)
		}
	}
}

// TestGenerateEndsWithNewline runs generate on the built-in model.
func TestGenerateEndsWithNewline(t *testing.T) {
	var out, errb bytes.Buffer
	if err := dispatch([]string{"generate", "-n", "3", "--prompt", "ab", "--kv-memory", "8MiB"}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if s := out.String(); !strings.HasPrefix(s, "ab") || !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		t.Errorf("output %q: want the prompt, the text and one final newline", s)
	}
}

// TestSynthWritesReadableFile checks the mode of synth's output.
func TestSynthWritesReadableFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.gguf")
	var out, errb bytes.Buffer
	if err := dispatch([]string{"synth", "--preset", "tiny", "--type", "q8_0", "-o", path}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, err %v; want 0644", st.Mode().Perm(), err)
	}
	var info bytes.Buffer
	if err := dispatch([]string{"info", path}, &info, &errb); err != nil || !strings.Contains(info.String(), "synthetic-tiny") {
		t.Fatalf("info %s: %v\n%s", path, err, info.String())
	}
}

// TestFlagSetRules covers flagSet's rules on a command made for the test.
func TestFlagSetRules(t *testing.T) {
	helpTable["test cmd"] = cmdHelp{summary: "a test", synopsis: "[A] [B]", maxArgs: 2}
	defer delete(helpTable, "test cmd")
	parse := func(args ...string) (*flagSet, *int, *float64, error) {
		fs := newFlags("test cmd", nil)
		n := fs.Int("count", -1, "count (-1: unset)")
		x := fs.Float64("offset", 0, "offset")
		fs.Duration("wait", time.Second, "wait")
		fs.allowNegative("offset")
		fs.limit("count", 2, 10)
		return fs, n, x, fs.Parse(args)
	}
	if _, n, _, err := parse(); err != nil || *n != -1 {
		t.Fatalf("a negative default is refused: %v", err)
	}
	if fs, n, x, err := parse("a", "--count", "3", "b", "--offset", "-2.5"); err != nil || *n != 3 || *x != -2.5 ||
		!reflect.DeepEqual(fs.Args(), []string{"a", "b"}) || fs.NArg() != 2 || fs.Arg(1) != "b" || fs.Arg(2) != "" {
		t.Fatalf("interspersed: %v %v", fs.Args(), err)
	}
	if fs, _, _, err := parse("--count=4", "--", "--offset", "x"); err != nil || !reflect.DeepEqual(fs.Args(), []string{"--offset", "x"}) {
		t.Fatalf("after --: %v %v", fs.Args(), err)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--count", "1"}, "test cmd: --count must be between 2 and 10, got 1"},
		{[]string{"--count", "11"}, "--count must be between 2 and 10"},
		{[]string{"--wait", "-1ms"}, "test cmd: --wait must not be negative, got -1ms"},
		{[]string{"--offset", "+Inf"}, "--offset must be a finite number"},
		{[]string{"a", "b", "c"}, `test cmd: unexpected argument "c" (usage: oengine test cmd [A] [B])`},
	} {
		if _, _, _, err := parse(tc.args...); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
		}
	}
	_, _, _, err := parse("--count", "3", "-h")
	var h *helpRequest
	if !errors.As(err, &h) || !strings.Contains(h.text, "usage: oengine test cmd [A] [B]") || !strings.Contains(h.text, "  --count N\n") ||
		!strings.Contains(h.text, "(default -1)") || !strings.Contains(h.text, "  --wait DURATION\n") {
		t.Fatalf("help: %v\n%v", err, h)
	}
}

// TestSynthReranker: synth --arch bert --rerank writes an encoder with a
// classification head, --arch qwen3 --rerank a causal reranker with its
// prompt, and info says what each serves; a plain decoder says nothing of
// the kind, and --rerank on llama is refused.
func TestSynthReranker(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	rr := filepath.Join(dir, "rr.gguf")
	if err := dispatch([]string{"synth", "--arch", "bert", "--preset", "tiny", "--type", "f16", "--rerank", "--token-types", "1", "-o", rr}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var info bytes.Buffer
	if err := dispatch([]string{"info", rr}, &info, &errb); err != nil ||
		!strings.Contains(info.String(), "serves:        embeddings only (an encoder: no generation); reranking (a classification head on the cls state, outputs: 1; CPU only)") {
		t.Fatalf("info: %v\n%s", err, info.String())
	}
	q3 := filepath.Join(dir, "q3.gguf")
	if err := dispatch([]string{"synth", "--arch", "qwen3", "--preset", "tiny", "--type", "f16", "--rerank", "-o", q3}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	info.Reset()
	if err := dispatch([]string{"info", q3}, &info, &errb); err != nil ||
		!strings.Contains(info.String(), "rerank prompt: yes") ||
		!strings.Contains(info.String(), "serves:        generation and embeddings; reranking (a classification head on the last state, outputs: 1; CPU only)") {
		t.Fatalf("qwen3 reranker info: %v\n%s", err, info.String())
	}
	dec := filepath.Join(dir, "dec.gguf")
	if err := dispatch([]string{"synth", "--preset", "tiny", "--type", "q8_0", "-o", dec}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	info.Reset()
	if err := dispatch([]string{"info", dec}, &info, &errb); err != nil || strings.Contains(info.String(), "serves:") {
		t.Fatalf("a decoder's info: %v\n%s", err, info.String())
	}
	if err := dispatch([]string{"synth", "--preset", "tiny", "--rerank", "-o", dec}, &out, &errb); err == nil {
		t.Fatal("--rerank accepted for llama")
	}
}
