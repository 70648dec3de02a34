package streaming

import (
	"context"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"oengine/engine"
	"oengine/ggml"
	"oengine/model/gguf"
	"oengine/model/llama"
	"oengine/model/synth"
	"oengine/model/tokenizer"
)

var benchLlama struct {
	once sync.Once
	m    engine.Model
	tok  engine.Tokenizer
	err  error
}

// benchModel synthesizes the tinyllama-1.1b preset (Q8_0, context 4096),
// or the synth preset named by OENGINE_BENCH_PRESET.
func benchModel(b *testing.B) (engine.Model, engine.Tokenizer) {
	benchLlama.once.Do(func() {
		preset := os.Getenv("OENGINE_BENCH_PRESET")
		if preset == "" {
			preset = "tinyllama-1.1b"
		}
		data, err := synth.Build(synth.Options{Arch: "llama", Preset: preset, Type: ggml.TypeQ8_0, Seed: 1, CtxLen: 4096})
		if err != nil {
			benchLlama.err = err
			return
		}
		f, err := gguf.Parse(data)
		if err != nil {
			benchLlama.err = err
			return
		}
		tok, err := tokenizer.FromGGUF(f)
		if err != nil {
			benchLlama.err = err
			return
		}
		m, err := llama.Load(f, llama.Options{})
		if err != nil {
			benchLlama.err = err
			return
		}
		benchLlama.m, benchLlama.tok = engine.FromLlama(m, llama.KVF16), engine.WrapTokenizer(tok)
	})
	if benchLlama.err != nil {
		b.Skipf("synthetic model unavailable: %v", benchLlama.err)
	}
	return benchLlama.m, benchLlama.tok
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// sleepySource sends token chunks gap apart, then end_of_input, then
// half-closes; sentEnd receives the time the end frame was handed over.
type sleepySource struct {
	chunks  [][]int32
	gap     time.Duration
	i       int
	sentEnd chan time.Time
}

func (s *sleepySource) Recv() (Frame, error) {
	switch {
	case s.i < len(s.chunks):
		if s.i > 0 {
			time.Sleep(s.gap)
		}
		s.i++
		return Frame{Kind: FrameChunk, Chunk: Chunk{Seq: uint64(s.i), Kind: ChunkTokens, Tokens: s.chunks[s.i-1]}}, nil
	case s.i == len(s.chunks):
		time.Sleep(s.gap)
		s.i++
		s.sentEnd <- time.Now()
		return Frame{Kind: FrameEnd}, nil
	}
	return Frame{}, io.EOF
}

// firstToken returns when the stream's first token arrived, draining it.
func firstToken(b *testing.B, st *engine.Stream) time.Time {
	b.Helper()
	var at time.Time
	for {
		ev, err := st.Next(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if ev.Kind == engine.EventTokens && at.IsZero() {
			at = time.Now()
		}
		if ev.Kind == engine.EventError {
			b.Fatal(ev.Err)
		}
		if ev.Terminal() {
			return at
		}
	}
}

// BenchmarkStreamedInputTTFT measures the time to first token counted from
// the end of input for a prompt (OENGINE_BENCH_PROMPT tokens, default 1536)
// streamed in 16 chunks 50 ms apart (OENGINE_BENCH_GAP_MS) with early
// prefill, against unary Generate of a same-length prompt sent at that
// moment. Reported: both in ms and streamed/unary.
func BenchmarkStreamedInputTTFT(b *testing.B) {
	m, tok := benchModel(b)
	e, err := engine.New(engine.Config{ModelName: "bench", GreedyDefault: true}, m, tok)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	n := envInt("OENGINE_BENCH_PROMPT", 1536)
	gap := time.Duration(envInt("OENGINE_BENCH_GAP_MS", 50)) * time.Millisecond
	vocab := e.Limits().Vocab
	r := rand.New(rand.NewPCG(3, 4))
	prompt := func() []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(100 + r.IntN(vocab-100))
		}
		return out
	}
	var streamed, unary time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := prompt()
		var chunks [][]int32
		for k := 0; k < 16; k++ {
			chunks = append(chunks, p[k*n/16:(k+1)*n/16])
		}
		steps0 := e.Stats().Steps
		st, err := e.Submit(context.Background(), engine.Request{OpenInput: true, TokenIDs: []int32{}, MaxTokens: 1})
		if err != nil {
			b.Fatal(err)
		}
		src := &sleepySource{chunks: chunks, gap: gap, sentEnd: make(chan time.Time, 1)}
		pump := NewPump(PumpConfig{Input: st, Assembler: NewAssembler(nil, false)})
		done := make(chan error, 1)
		go func() { done <- pump.Run(context.Background(), src) }()
		at := firstToken(b, st)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		end := <-src.sentEnd
		streamed += at.Sub(end)
		steps1 := e.Stats().Steps

		t0 := time.Now()
		st, err = e.Submit(context.Background(), engine.Request{TokenIDs: prompt(), MaxTokens: 1})
		if err != nil {
			b.Fatal(err)
		}
		unary += firstToken(b, st).Sub(t0)
		b.Logf("streamed: %d engine steps, first token %v after end of input; unary: %d steps, %v",
			steps1-steps0, at.Sub(end), e.Stats().Steps-steps1, time.Since(t0))
	}
	k := float64(b.N)
	b.ReportMetric(float64(streamed.Milliseconds())/k, "streamed-ms")
	b.ReportMetric(float64(unary.Milliseconds())/k, "unary-ms")
	b.ReportMetric(float64(streamed)/float64(unary), "streamed/unary")
}
