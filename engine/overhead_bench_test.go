package engine

import (
	"fmt"
	"testing"
	"time"

	"oengine/internal/refdata"
	"oengine/model/gguf"
	"oengine/model/tokenizer"
	"oengine/sampling"
)

// nullModel computes nothing: ForwardGreedy answers a fixed function of
// each position at once, Forward leaves the logits as they are. With it a
// step costs only the engine's own work on the host (planning, pages,
// sampling and stop checks, events), the part of a step that a GPU does
// not shorten.
type nullModel struct{ vocab, ctx int }

type nullKV struct{}

func (nullKV) CopyPage(dst, src int32) {}

func (m nullModel) Info() ModelInfo                     { return ModelInfo{Vocab: m.vocab, ContextLen: m.ctx} }
func (nullModel) KVBytesPerPage(pageSize int) int64     { return int64(pageSize) * 64 }
func (nullModel) NewKV(pages, pageSize int) (KV, error) { return nullKV{}, nil }
func (nullModel) Forward(KV, *Batch, []float32) error   { return nil }

func (m nullModel) ForwardGreedy(_ KV, b *Batch, out []int32) error {
	for i, r := range b.Logits {
		out[i] = 1 + (b.Pos[r]*7)%int32(m.vocab-1)
	}
	return nil
}

// BenchmarkStepOverhead reports the engine's host time per decode step
// (us/step, wall; us/decode_step, the step loop's own time) with a model
// that computes nothing and tiny-llama's tokenizer (32000 tokens), for 1,
// 16 and 64 sequences decoding greedily (the device-greedy path, as on the
// CUDA model) and for one sequence whose logprobs, or whose sampling at
// temperature 1 over the whole vocabulary, need the logits row on the
// host. On a GPU a decode step takes a few milliseconds, so this is
// the share of a step the engine adds.
func BenchmarkStepOverhead(b *testing.B) {
	f, err := gguf.Open(refdata.Dir(b, "models", "tiny-llama-q4_0.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		seqs int
		mode string
	}{{1, "greedy"}, {16, "greedy"}, {64, "greedy"}, {1, "logprobs"}, {1, "temperature"}} {
		b.Run(fmt.Sprintf("seqs=%d/%s", c.seqs, c.mode), func(b *testing.B) {
			var dec decodeSteps
			e, err := New(Config{MaxRunning: 64, MaxBatchedTokens: 1024, KVPages: 64 * 40,
				Hooks: Hooks{OnStep: dec.observe}}, nullModel{vocab: 32000, ctx: 4096}, WrapTokenizer(tk))
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			const outTokens = 256
			b.ResetTimer()
			start := time.Now()
			var edit func(*Request)
			switch c.mode {
			case "logprobs": // the chosen token's logprob: the logits row comes back
				edit = func(r *Request) { r.Logprobs = &sampling.Candidates{} }
			case "temperature": // sampled on the host from the whole vocabulary
				edit = func(r *Request) { r.Sampling = sampling.Options{Temperature: ptr(1.0), Seed: ptr(uint64(7))} }
			}
			for it := 0; it < b.N; it++ {
				runGreedyRequests(b, e, c.seqs, it, outTokens, edit)
			}
			el := time.Since(start)
			b.ReportMetric(float64(el.Microseconds())/float64(b.N*outTokens), "us/step")
			if dec.steps > 0 {
				b.ReportMetric(float64(dec.busy.Microseconds())/float64(dec.steps), "us/decode_step")
			}
		})
	}
}
