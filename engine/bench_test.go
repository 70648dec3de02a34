package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"oengine/ggml"
	"oengine/model/gguf"
	"oengine/model/llama"
	"oengine/model/synth"
	"oengine/model/tokenizer"
)

var benchModel struct {
	once sync.Once
	m    Model
	tok  Tokenizer
	err  error
}

// synthTinyLlama builds the synthetic tinyllama-1.1b preset (Q8_0) once.
func synthTinyLlama(b *testing.B) (Model, Tokenizer) {
	benchModel.once.Do(func() {
		data, err := synth.Build(synth.Options{Arch: "llama", Preset: "tinyllama-1.1b", Type: ggml.TypeQ8_0, Seed: 1})
		if err != nil {
			benchModel.err = err
			return
		}
		f, err := gguf.Parse(data)
		if err != nil {
			benchModel.err = err
			return
		}
		tok, err := tokenizer.FromGGUF(f)
		if err != nil {
			benchModel.err = err
			return
		}
		m, err := llama.Load(f, llama.Options{})
		if err != nil {
			benchModel.err = err
			return
		}
		benchModel.m, benchModel.tok = FromLlama(m, llama.KVF16), WrapTokenizer(tok)
	})
	if benchModel.err != nil {
		b.Skipf("synthetic tinyllama-1.1b unavailable: %v", benchModel.err)
	}
	return benchModel.m, benchModel.tok
}

// BenchmarkDecode reports aggregate decode throughput with 1, 4, 16 and 64
// concurrent sequences on the synthetic tinyllama-1.1b preset: each
// iteration runs that many requests (16-token prompts, 16 output tokens,
// EOS ignored). tok/s is generated tokens over wall time; decode_tok/s
// counts only steps without prefill.
func BenchmarkDecode(b *testing.B) {
	m, tok := synthTinyLlama(b)
	for _, conc := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("seqs=%d", conc), func(b *testing.B) {
			var dec decodeSteps
			e, err := New(Config{MaxRunning: 64, MaxBatchedTokens: 1024, KVPages: 64 * 4,
				Hooks: Hooks{OnStep: dec.observe}}, m, tok)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			const outTokens = 16
			b.ResetTimer()
			start := time.Now()
			for it := 0; it < b.N; it++ {
				runGreedyRequests(b, e, conc, it, outTokens, nil)
			}
			el := time.Since(start)
			b.ReportMetric(float64(b.N*conc*outTokens)/el.Seconds(), "tok/s")
			if dec.busy > 0 {
				b.ReportMetric(float64(dec.tokens)/dec.busy.Seconds(), "decode_tok/s")
			}
		})
	}
}

// runGreedyRequests submits conc requests of round it (16-token prompts
// that differ per request and round, outTokens greedy tokens, EOS ignored,
// no prefix cache; edit, when set, changes each request) and drains their
// streams until every one has ended.
func runGreedyRequests(b *testing.B, e *Engine, conc, it, outTokens int, edit func(*Request)) {
	var wg sync.WaitGroup
	for i := 0; i < conc; i++ {
		prompt := make([]int32, 16)
		for j := range prompt {
			prompt[j] = int32(100 + ((it*conc+i)*16+j)%30000)
		}
		req := Request{TokenIDs: prompt, MaxTokens: outTokens, Sampling: greedy(),
			Stop: StopParams{IgnoreEOS: true}, BypassPrefixCache: true}
		if edit != nil {
			edit(&req)
		}
		submitDrained(b, e, req, &wg)
	}
	wg.Wait()
}

// submitDrained submits req and drains its stream on a goroutine counted
// in wg; an error event fails the benchmark.
func submitDrained(b *testing.B, e *Engine, req Request, wg *sync.WaitGroup) {
	s, err := e.Submit(context.Background(), req)
	if err != nil {
		b.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			ev, err := s.Next(context.Background())
			if err != nil || ev.Terminal() {
				if ev.Kind == EventError {
					b.Error(ev.Err)
				}
				return
			}
		}
	}()
}

// decodeSteps totals the steps without prefill tokens an engine runs (its
// OnStep hook, observe): how many, their decode tokens and their time.
type decodeSteps struct {
	mu            sync.Mutex
	steps, tokens int
	busy          time.Duration
}

func (d *decodeSteps) observe(s StepStats) {
	if s.PrefillTokens != 0 {
		return
	}
	d.mu.Lock()
	d.steps++
	d.tokens += s.DecodeTokens
	d.busy += s.Duration
	d.mu.Unlock()
}

// BenchmarkEmbed reports embedding throughput on the synthetic
// tinyllama-1.1b preset (Q8_0): each iteration runs 16 concurrent
// requests of 128 distinct tokens, pooled by last or mean, beside the same
// prompts as generation requests of one token ("prefill"). tok/s is prompt
// tokens over wall time.
func BenchmarkEmbed(b *testing.B) {
	m, tok := synthTinyLlama(b)
	const conc, n = 16, 128
	for _, mode := range []string{"last", "mean", "prefill"} {
		b.Run(mode, func(b *testing.B) {
			e, err := New(Config{MaxRunning: 64, KVPages: conc * n / 16 * 2}, m, tok)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			b.ResetTimer()
			start := time.Now()
			for it := 0; it < b.N; it++ {
				var wg sync.WaitGroup
				for i := 0; i < conc; i++ {
					prompt := make([]int32, n)
					for j := range prompt {
						prompt[j] = int32(100 + ((it*conc+i)*n+j)%30000)
					}
					req := Request{TokenIDs: prompt, BypassPrefixCache: true}
					switch mode {
					case "prefill":
						req.MaxTokens, req.Sampling = 1, greedy()
					default:
						p, _ := ParsePooling(mode)
						req.Embed = &EmbedOptions{Pooling: p}
					}
					submitDrained(b, e, req, &wg)
				}
				wg.Wait()
			}
			b.ReportMetric(float64(b.N*conc*n)/time.Since(start).Seconds(), "tok/s")
		})
	}
}
