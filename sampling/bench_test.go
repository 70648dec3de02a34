package sampling

import (
	"fmt"
	"testing"
)

var benchConfigs = []struct {
	name string
	p    Params
}{
	{"greedy", Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1}},
	{"temp1", Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}},
	{"topk40", Params{Temperature: 0.8, TopK: 40, TopP: 1, RepetitionPenalty: 1}},
	{"topp0.9", Params{Temperature: 0.8, TopP: 0.9, RepetitionPenalty: 1}},
	{"minp0.05", Params{Temperature: 0.8, TopP: 1, MinP: 0.05, RepetitionPenalty: 1}},
	{"all+penalties", Params{Temperature: 0.7, TopK: 50, TopP: 0.95, MinP: 0.02, RepetitionPenalty: 1.1, FrequencyPenalty: 0.3, PresencePenalty: 0.2}},
}

// benchLogits imitates an LM head: mostly N(0, 2²) noise with a few strong
// candidates, so the distribution has a head and a long tail.
func benchLogits(vocab int) []float32 {
	r := newRand(42)
	z := randomLogits(r, vocab, 2, false)
	for i := range 20 {
		z[r.IntN(vocab)] = float32(12 - i/2)
	}
	return z
}

func BenchmarkSample(b *testing.B) {
	for _, vocab := range []int{32000, 151936} {
		z := benchLogits(vocab)
		for _, cfg := range benchConfigs {
			b.Run(fmt.Sprintf("vocab=%d/%s", vocab, cfg.name), func(b *testing.B) {
				s := seeded(cfg.p, 1, 0)
				prompt := make([]int32, 512)
				for i := range prompt {
					prompt[i] = int32(i * 37 % vocab)
				}
				out := make([]int32, 0, 4096)
				b.ReportAllocs()
				for b.Loop() {
					tok := s.Sample(z, History{Prompt: prompt, Output: out})
					if len(out) < cap(out) {
						out = append(out, tok)
					}
				}
			})
		}
	}
}

func BenchmarkComputeLogprobs(b *testing.B) {
	for _, vocab := range []int{32000, 151936} {
		z := benchLogits(vocab)
		for _, c := range []struct {
			name string
			c    Candidates
		}{
			{"chosen", Candidates{}},
			{"top5", Candidates{Mode: CandidatesTopN, TopN: 5}},
			{"ids8", Candidates{Mode: CandidatesTokenIDs, TokenIDs: []int32{1, 2, 3, 4, 5, 6, 7, 8}}},
		} {
			b.Run(fmt.Sprintf("vocab=%d/%s", vocab, c.name), func(b *testing.B) {
				var dst Logprobs
				b.ReportAllocs()
				for b.Loop() {
					ComputeLogprobs(z, 3, c.c, &dst)
				}
			})
		}
	}
}
