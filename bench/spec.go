package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"oengine/engine"
	"oengine/kernels/cuda"
	"oengine/model/gguf"
	"oengine/model/gpu"
	"oengine/model/llama"
	"oengine/model/tokenizer"
	"oengine/sampling"
)

// RepeatPrompt is the default prompt of the speculative benchmark: it asks
// the model to repeat a long passage, the case prompt-lookup drafting is
// for (a model that follows it copies tokens from the prompt).
const RepeatPrompt = "Repeat the following passage exactly, word for word.\n\nPassage:\n" + repeatPassage +
	"\n\nRepeated passage:\n"

const repeatPassage = "The lighthouse keeper climbed the spiral stairs every evening at dusk, carrying a small brass lamp " +
	"and a notebook in which he recorded the weather, the ships that passed, and the colour of the sea. " +
	"Over forty years the notebooks filled three shelves of his cottage, and the villagers came to him when " +
	"they wanted to know whether a storm would arrive before the fishing boats returned. He never claimed to " +
	"predict anything; he only said that the sea repeats itself, and that a careful reader of old pages " +
	"can often guess the next line. When the lighthouse was automated, he gave the notebooks to the school, " +
	"where children still read them aloud on winter afternoons, one entry after another, as the wind rattles the windows."

// SpecBenchConfig configures BenchSpec.
type SpecBenchConfig struct {
	NGram    bool       // prompt-lookup drafts
	Draft    *gguf.File // draft model (same vocabulary); nil: NGram
	Tokens   int        // K, most draft tokens per step (0: engine default)
	Adaptive bool       // adaptive K
	Prompt   string     // "": RepeatPrompt
	TG       int        // tokens generated per run
	Reps     int        // measured runs of each engine (after one warm-up)
	Threads  int        // CPU worker threads (0: all cores)
	KVType   llama.KVType
	// CUDA, when set, runs the target and the draft model on this device
	// (model/gpu); nil: both on the CPU.
	CUDA *cuda.Device
}

// SpecBenchResult compares greedy batch-1 decoding with and without
// speculation on the same weights. Throughputs count generated tokens
// after the first, over the time from the first token to the last.
type SpecBenchResult struct {
	Model           string  `json:"model"`
	Type            string  `json:"type"`
	DraftModel      string  `json:"draft_model,omitempty"`
	DraftType       string  `json:"draft_type,omitempty"`
	Mode            string  `json:"mode"`
	SpecTokens      int     `json:"spec_tokens"`
	Adaptive        bool    `json:"adaptive"`
	Threads         int     `json:"threads"`
	Device          string  `json:"device"` // "cpu" or the CUDA device's description
	PromptTokens    int     `json:"prompt_tokens"`
	TG              int     `json:"tg"`
	Reps            int     `json:"reps"`
	PlainTokensPerS float64 `json:"plain_tokens_per_s"`
	PlainStd        float64 `json:"plain_tokens_per_s_std"`
	SpecTokensPerS  float64 `json:"spec_tokens_per_s"`
	SpecStd         float64 `json:"spec_tokens_per_s_std"`
	Speedup         float64 `json:"speedup"`
	DraftTokens     uint64  `json:"draft_tokens"`
	AcceptedTokens  uint64  `json:"accepted_tokens"`
	AcceptanceRate  float64 `json:"acceptance_rate"`
	// SameOutput: the speculative runs generated exactly the plain runs'
	// tokens (greedy decoding must).
	SameOutput bool `json:"same_output"`
}

// BenchSpec measures batch-1 greedy decode with and without speculative
// decoding on f's model (on cfg.CUDA when set, else the CPU), alternating
// the two engines run by run.
func BenchSpec(f *gguf.File, cfg SpecBenchConfig) (SpecBenchResult, error) {
	if !cfg.NGram && cfg.Draft == nil {
		return SpecBenchResult{}, errors.New("bench: speculative benchmark needs n-gram or a draft model")
	}
	if cfg.Threads <= 0 {
		cfg.Threads = runtime.NumCPU()
	}
	cfg.Reps = max(cfg.Reps, 1)
	if cfg.TG <= 1 {
		cfg.TG = 64
	}
	if cfg.Prompt == "" {
		cfg.Prompt = RepeatPrompt
	}
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		return SpecBenchResult{}, err
	}
	res := SpecBenchResult{Type: DominantType(f), Threads: cfg.Threads, TG: cfg.TG, Reps: cfg.Reps, Adaptive: cfg.Adaptive, Device: "cpu"}
	res.Model, _ = f.String("general.name")
	prompt := tk.Encode(cfg.Prompt, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	res.PromptTokens = len(prompt)
	k := max(cfg.Tokens, engine.DefaultSpecTokens)
	pages := (len(prompt)+cfg.TG+k+16)/16 + 2
	target, closeTarget, err := specModel(f, cfg, pages)
	if err != nil {
		return res, err
	}
	defer closeTarget()
	if cfg.CUDA != nil {
		res.Device = cfg.CUDA.Info().String()
	}
	spec := engine.Speculation{NGram: cfg.NGram, Tokens: cfg.Tokens, Adaptive: cfg.Adaptive}
	if cfg.Draft != nil {
		dt, _ := cfg.Draft.Strings("tokenizer.ggml.tokens")
		tt, _ := f.Strings("tokenizer.ggml.tokens")
		if !slices.Equal(dt, tt) || len(tt) == 0 {
			return res, errors.New("bench: the draft model's vocabulary differs from the target's")
		}
		draft, closeDraft, err := specModel(cfg.Draft, cfg, pages)
		if err != nil {
			return res, fmt.Errorf("bench: draft model: %w", err)
		}
		defer closeDraft()
		spec.Draft = draft
		res.DraftModel, _ = cfg.Draft.String("general.name")
		res.DraftType = DominantType(cfg.Draft)
	}
	mk := func(s engine.Speculation) (*engine.Engine, error) {
		return engine.New(engine.Config{PageSize: 16, KVPages: pages, MaxRunning: 1, Speculation: s,
			Logger: discardLogger()}, target, engine.WrapTokenizer(tk))
	}
	plainE, err := mk(engine.Speculation{})
	if err != nil {
		return res, err
	}
	defer plainE.Close()
	specE, err := mk(spec)
	if err != nil {
		return res, err
	}
	defer specE.Close()
	res.Mode, res.SpecTokens = specE.Limits().Speculation, specE.Limits().SpecTokens

	var plainRates, specRates []float64
	var want []int32
	res.SameOutput = true
	before := specE.Stats()
	for rep := 0; rep <= cfg.Reps; rep++ { // rep 0 warms up
		toks, rate, err := decodeRun(plainE, prompt, cfg.TG)
		if err != nil {
			return res, err
		}
		if want == nil {
			want = toks
		}
		stoks, srate, err := decodeRun(specE, prompt, cfg.TG)
		if err != nil {
			return res, err
		}
		if !slices.Equal(stoks, want) || !slices.Equal(toks, want) {
			res.SameOutput = false
		}
		if rep > 0 {
			plainRates, specRates = append(plainRates, rate), append(specRates, srate)
		}
	}
	after := specE.Stats()
	res.PlainTokensPerS, res.PlainStd = meanStd(plainRates)
	res.SpecTokensPerS, res.SpecStd = meanStd(specRates)
	if res.PlainTokensPerS > 0 {
		res.Speedup = res.SpecTokensPerS / res.PlainTokensPerS
	}
	res.DraftTokens = after.SpecDraftTokens - before.SpecDraftTokens
	res.AcceptedTokens = after.SpecAcceptedTokens - before.SpecAcceptedTokens
	if res.DraftTokens > 0 {
		res.AcceptanceRate = float64(res.AcceptedTokens) / float64(res.DraftTokens)
	}
	return res, nil
}

// specModel loads f's forward pass for the speculative benchmark: on
// cfg.CUDA when set (contexts of pages 16-position pages), else on the CPU.
// Both of the benchmark's engines share it (one runs at a time).
func specModel(f *gguf.File, cfg SpecBenchConfig, pages int) (engine.Model, func(), error) {
	if cfg.CUDA != nil {
		m, err := gpu.Load(cfg.CUDA, f, gpu.Options{MaxTokens: 512, Context: pages * 16})
		if err != nil {
			return nil, nil, err
		}
		return engine.FromGPU(m), m.Close, nil
	}
	w, err := llama.Load(f, llama.Options{Threads: cfg.Threads})
	if err != nil {
		return nil, nil, err
	}
	return engine.FromLlama(w, cfg.KVType), w.Close, nil
}

// decodeRun generates n greedy tokens after prompt and returns them with
// the decode rate: tokens after the first over first-to-last token time.
func decodeRun(e *engine.Engine, prompt []int32, n int) ([]int32, float64, error) {
	zero := 0.0
	st, err := e.Submit(context.Background(), engine.Request{TokenIDs: prompt, MaxTokens: n,
		Sampling: sampling.Options{Temperature: &zero}, Stop: engine.StopParams{IgnoreEOS: true}})
	if err != nil {
		return nil, 0, err
	}
	var toks []int32
	var first, last time.Time
	for {
		ev, err := st.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		if ev.Kind == engine.EventError {
			return nil, 0, ev.Err
		}
		for _, t := range ev.Tokens {
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			last = now
			toks = append(toks, t.ID)
		}
	}
	if len(toks) < 2 {
		return toks, 0, fmt.Errorf("bench: generated %d tokens", len(toks))
	}
	return toks, float64(len(toks)-1) / last.Sub(first).Seconds(), nil
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
