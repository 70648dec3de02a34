package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"oengine/kernels/cuda"
	"oengine/model/gguf"
	"oengine/model/gpu"
	"oengine/model/llama"
)

// ModelBenchConfig configures BenchModel, the in-process llama-bench-like
// measurement (no server, no scheduler).
type ModelBenchConfig struct {
	PP       int // prompt tokens of the prefill test (0: skip)
	TG       int // generated tokens of the decode test (0: skip)
	Reps     int // repetitions of each test (after one warm-up run)
	Threads  int // worker threads (0: all cores)
	Batch    int // prefill chunk size in tokens (the engine's step budget)
	PageSize int // KV page size in tokens
	KVType   llama.KVType
	MemBW    bool // also measure read bandwidth
	Seed     uint64
	RowMajor bool // keep Q4_0, Q5_0, Q5_1, Q8_0 and K-quant weights row-major (llama.Options.RowMajor)
	// CUDA, when set, measures the CUDA forward pass (model/gpu) on this
	// device instead of the CPU one (F16 K/V on the device, the serving
	// arithmetic).
	CUDA *cuda.Device
	// Inputs is, for an encoder (llama.Config.Encoder), how many inputs
	// of PP tokens one forward pass embeds (0: 1); an encoder has no
	// decode test.
	Inputs int
}

// ModelBenchResult is what BenchModel measured. Throughputs are the mean
// over repetitions, spreads their standard deviation (as llama-bench).
type ModelBenchResult struct {
	Model               string       `json:"model"`
	Path                string       `json:"path,omitempty"`
	SizeBytes           int64        `json:"size_bytes"`
	Params              int64        `json:"params"`
	Type                string       `json:"type"`
	Threads             int          `json:"threads"`
	Batch               int          `json:"batch"`
	PP                  int          `json:"pp"`
	TG                  int          `json:"tg"`
	Reps                int          `json:"reps"`
	PPTokensPerS        float64      `json:"pp_tokens_per_s"`
	PPStd               float64      `json:"pp_tokens_per_s_std"`
	TGTokensPerS        float64      `json:"tg_tokens_per_s"`
	TGStd               float64      `json:"tg_tokens_per_s_std"`
	WeightBytesPerToken int64        `json:"weight_bytes_per_token"`
	MemBWGBps           float64      `json:"membw_gbps,omitempty"`
	MemBW               *MemBWResult `json:"membw,omitempty"`
	BandwidthFraction   float64      `json:"bandwidth_fraction,omitempty"`
	Device              string       `json:"device"` // "cpu" or the CUDA device's description
	// EmbedInputs: an encoder's test, EmbedInputs inputs of PP tokens per
	// forward pass (PPTokensPerS counts all their tokens); 0 for a decoder.
	EmbedInputs int `json:"embed_inputs,omitempty"`
}

// WeightBytesPerToken estimates the weight bytes one decode step reads:
// every tensor, except that of the token embedding only one row is read
// unless it doubles as the output matrix (tied embeddings).
func WeightBytesPerToken(f *gguf.File) int64 {
	_, untied := f.Tensor("output.weight")
	var n int64
	for _, t := range f.Tensors {
		b := int64(len(t.Data))
		if t.Name == "token_embd.weight" && untied && t.Rows() > 0 {
			b /= int64(t.Rows())
		}
		n += b
	}
	return n
}

// DominantType names the tensor type holding the most bytes, the way
// llama-bench labels a file ("Q8_0", "F16").
func DominantType(f *gguf.File) string {
	by := map[string]int64{}
	for _, t := range f.Tensors {
		by[t.Type.String()] += int64(len(t.Data))
	}
	best, bn := "", int64(-1)
	names := make([]string, 0, len(by))
	for k := range by {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if by[k] > bn {
			best, bn = k, by[k]
		}
	}
	return best
}

// BenchModel loads f's model and measures prefill (one sequence of PP
// tokens in chunks of Batch) and decode (TG steps of one sequence after a
// one-token prompt), each Reps times after a warm-up.
func BenchModel(f *gguf.File, cfg ModelBenchConfig) (ModelBenchResult, error) {
	if cfg.Threads <= 0 {
		cfg.Threads = runtime.NumCPU()
	}
	cfg.Reps = max(cfg.Reps, 1)
	if cfg.Batch <= 0 {
		cfg.Batch = 512
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 16
	}
	if c, err := llama.ConfigFromGGUF(f); err == nil && c.Encoder {
		return benchEncoder(f, cfg)
	}
	positions := max(cfg.PP, cfg.TG+1)
	pages := (positions + cfg.PageSize - 1) / cfg.PageSize
	fwd, vocab, done, err := loadForward(f, cfg, pages)
	if err != nil {
		return ModelBenchResult{}, err
	}
	defer done()
	res := ModelBenchResult{SizeBytes: f.Size(), Type: DominantType(f), Threads: cfg.Threads, Batch: cfg.Batch,
		PP: cfg.PP, TG: cfg.TG, Reps: cfg.Reps, WeightBytesPerToken: WeightBytesPerToken(f), Device: "cpu"}
	if cfg.CUDA != nil {
		res.Device = cfg.CUDA.Info().String()
	}
	res.Model, _ = f.String("general.name")
	for _, t := range f.Tensors {
		res.Params += int64(t.Elements())
	}
	table := make([]int32, pages)
	for i := range table {
		table[i] = int32(i)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	logits := make([]float32, vocab)
	if cfg.PP > 0 {
		tokens := make([]int32, cfg.PP)
		for i := range tokens {
			tokens[i] = int32(rng.IntN(vocab))
		}
		rates, err := repeat(cfg.Reps, func() (float64, error) { return prefill(fwd, table, tokens, cfg.Batch, logits) })
		if err != nil {
			return res, err
		}
		res.PPTokensPerS, res.PPStd = meanStd(rates)
	}
	if cfg.TG > 0 {
		first := int32(rng.IntN(vocab))
		rates, err := repeat(cfg.Reps, func() (float64, error) { return decode(fwd, table, first, cfg.TG, logits) })
		if err != nil {
			return res, err
		}
		res.TGTokensPerS, res.TGStd = meanStd(rates)
	}
	if cfg.MemBW {
		bw := MemBW(cfg.Threads, 10)
		res.MemBW, res.MemBWGBps = &bw, bw.GBps
		if bw.GBps > 0 && res.TGTokensPerS > 0 {
			res.BandwidthFraction = float64(res.WeightBytesPerToken) * res.TGTokensPerS / (bw.GBps * 1e9)
		}
	}
	return res, nil
}

// benchEncoder is BenchModel for an encoder: each repetition computes
// cfg.Inputs inputs of cfg.PP random tokens in one forward pass with every
// position's hidden state (what mean pooling reads), as the engine batches
// embedding requests.
func benchEncoder(f *gguf.File, cfg ModelBenchConfig) (ModelBenchResult, error) {
	if cfg.CUDA != nil {
		return ModelBenchResult{}, errors.New("bench: encoders run on the CPU only")
	}
	n, ps := max(cfg.Inputs, 1), cfg.PageSize
	if cfg.PP <= 0 {
		return ModelBenchResult{}, errors.New("bench: an encoder's test needs --pp > 0 (tokens per input)")
	}
	m, err := llama.Load(f, llama.Options{Threads: cfg.Threads, RowMajor: cfg.RowMajor})
	if err != nil {
		return ModelBenchResult{}, err
	}
	defer m.Close()
	c := m.Config()
	if cfg.PP > c.CtxLen {
		return ModelBenchResult{}, fmt.Errorf("bench: %d tokens per input exceed the encoder's context of %d", cfg.PP, c.CtxLen)
	}
	perSeq := (cfg.PP + ps - 1) / ps
	kv, err := m.NewKV(n*perSeq, ps, cfg.KVType)
	if err != nil {
		return ModelBenchResult{}, err
	}
	res := ModelBenchResult{SizeBytes: f.Size(), Type: DominantType(f), Threads: cfg.Threads, Batch: n * cfg.PP,
		PP: cfg.PP, Reps: cfg.Reps, WeightBytesPerToken: WeightBytesPerToken(f), Device: "cpu", EmbedInputs: n}
	res.Model, _ = f.String("general.name")
	for _, t := range f.Tensors {
		res.Params += int64(t.Elements())
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	b := &llama.Batch{}
	for s := 0; s < n; s++ {
		table := make([]int32, perSeq)
		for i := range table {
			table[i] = int32(s*perSeq + i)
		}
		b.Seqs = append(b.Seqs, table)
		for p := 0; p < cfg.PP; p++ {
			b.Hidden = append(b.Hidden, int32(len(b.Tokens)))
			b.Tokens = append(b.Tokens, int32(rng.IntN(c.Vocab)))
			b.Pos = append(b.Pos, int32(p))
			b.Seq = append(b.Seq, int32(s))
		}
	}
	hidden := make([]float32, len(b.Tokens)*c.Dim)
	rates, err := repeat(cfg.Reps, func() (float64, error) {
		start := time.Now()
		if err := m.ForwardHidden(kv, b, nil, hidden); err != nil {
			return 0, fmt.Errorf("bench: encode: %w", err)
		}
		return float64(len(b.Tokens)) / time.Since(start).Seconds(), nil
	})
	if err != nil {
		return res, err
	}
	res.PPTokensPerS, res.PPStd = meanStd(rates)
	return res, nil
}

// forwardFunc runs one batch on the benchmarked model's K/V store.
type forwardFunc func(b *llama.Batch, logits []float32) error

// loadForward loads the CPU or the CUDA forward pass with a K/V store of
// pages pages; done frees them.
func loadForward(f *gguf.File, cfg ModelBenchConfig, pages int) (fwd forwardFunc, vocab int, done func(), err error) {
	if cfg.CUDA != nil {
		m, err := gpu.Load(cfg.CUDA, f, gpu.Options{MaxTokens: cfg.Batch, Context: pages * cfg.PageSize})
		if err != nil {
			return nil, 0, nil, err
		}
		kv, err := m.NewKV(pages, cfg.PageSize)
		if err != nil {
			m.Close()
			return nil, 0, nil, err
		}
		var gb gpu.DecoderBatch
		fwd = func(b *llama.Batch, logits []float32) error {
			gb = gpu.DecoderBatch{Tokens: b.Tokens, Pos: b.Pos, Seq: b.Seq, Seqs: b.Seqs, Logits: b.Logits}
			return m.Forward(kv, &gb, logits)
		}
		return fwd, m.Config().Vocab, func() { kv.Close(); m.Close() }, nil
	}
	m, err := llama.Load(f, llama.Options{Threads: cfg.Threads, RowMajor: cfg.RowMajor})
	if err != nil {
		return nil, 0, nil, err
	}
	kv, err := m.NewKV(pages, cfg.PageSize, cfg.KVType)
	if err != nil {
		m.Close()
		return nil, 0, nil, err
	}
	fwd = func(b *llama.Batch, logits []float32) error { return m.Forward(kv, b, logits) }
	return fwd, m.Config().Vocab, m.Close, nil
}

// repeat runs fn once to warm up, then reps times, returning the rates.
func repeat(reps int, fn func() (float64, error)) ([]float64, error) {
	if _, err := fn(); err != nil {
		return nil, err
	}
	out := make([]float64, 0, reps)
	for range reps {
		r, err := fn()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// prefill runs one sequence's prompt from position 0 in chunks of batch
// tokens, asking for the last token's logits, and returns tokens/s.
func prefill(fwd forwardFunc, table []int32, tokens []int32, batch int, logits []float32) (float64, error) {
	start := time.Now()
	for lo := 0; lo < len(tokens); lo += batch {
		hi := min(lo+batch, len(tokens))
		b := &llama.Batch{Tokens: tokens[lo:hi], Pos: make([]int32, hi-lo), Seq: make([]int32, hi-lo), Seqs: [][]int32{table}}
		for i := range b.Pos {
			b.Pos[i] = int32(lo + i)
		}
		var out []float32
		if hi == len(tokens) {
			b.Logits, out = []int32{int32(hi - lo - 1)}, logits
		}
		if err := fwd(b, out); err != nil {
			return 0, fmt.Errorf("bench: prefill: %w", err)
		}
	}
	return float64(len(tokens)) / time.Since(start).Seconds(), nil
}

// decode writes a one-token prompt, then times n single-token steps of
// one sequence with logits (the next token is the argmax, so the steps
// depend on each other as in generation) and returns tokens/s.
func decode(fwd forwardFunc, table []int32, first int32, n int, logits []float32) (float64, error) {
	tok := []int32{first}
	pos := []int32{0}
	b := &llama.Batch{Tokens: tok, Pos: pos, Seq: []int32{0}, Seqs: [][]int32{table}, Logits: []int32{0}}
	if err := fwd(b, logits); err != nil {
		return 0, fmt.Errorf("bench: decode: %w", err)
	}
	start := time.Now()
	for i := 1; i <= n; i++ {
		tok[0], pos[0] = argmax(logits), int32(i)
		if err := fwd(b, logits); err != nil {
			return 0, fmt.Errorf("bench: decode: %w", err)
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func argmax(xs []float32) int32 {
	best := 0
	for i, x := range xs {
		if x > xs[best] {
			best = i
		}
	}
	return int32(best)
}

// meanStd returns the mean and the sample standard deviation.
func meanStd(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	mean := s / float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var v float64
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(v / float64(len(xs)-1))
}

// WriteModelTable prints results as llama-bench does: one row per test.
func WriteModelTable(w io.Writer, rs []ModelBenchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "| model\t| size\t| params\t| type\t| threads\t| test\t| t/s\t| bw frac\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|")
	for _, r := range rs {
		name := r.Model
		if name == "" {
			name = r.Path
		}
		row := func(test string, tps, sd float64, frac string) {
			fmt.Fprintf(tw, "| %s\t| %s\t| %s\t| %s\t| %d\t| %s\t| %.2f ± %.2f\t| %s\t|\n",
				name, sizeString(r.SizeBytes), paramString(r.Params), r.Type, r.Threads, test, tps, sd, frac)
		}
		if r.PP > 0 {
			test := fmt.Sprintf("pp%d", r.PP)
			if r.EmbedInputs > 0 {
				test = fmt.Sprintf("embed %dx%d", r.EmbedInputs, r.PP)
			}
			row(test, r.PPTokensPerS, r.PPStd, "")
		}
		if r.TG > 0 {
			frac := "-"
			if r.BandwidthFraction > 0 {
				frac = fmt.Sprintf("%.2f", r.BandwidthFraction)
			}
			row(fmt.Sprintf("tg%d", r.TG), r.TGTokensPerS, r.TGStd, frac)
		}
	}
	tw.Flush()
	for _, r := range rs {
		if r.Device != "" && r.Device != "cpu" {
			fmt.Fprintf(w, "device: %s\n", r.Device)
		}
		if r.MemBW != nil {
			fmt.Fprintf(w, "memory read bandwidth: %.2f GB/s (%d threads, %s buffer, LLC %s); weights read per token: %s\n",
				r.MemBWGBps, r.MemBW.Threads, sizeString(r.MemBW.BufferBytes), sizeString(r.MemBW.LLCBytes), sizeString(r.WeightBytesPerToken))
		}
	}
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func paramString(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2f K", float64(n)/1e3)
	}
	return strings.TrimSpace(fmt.Sprint(n))
}
