package sampling

import (
	"math"
	"slices"
	"testing"
)

func TestPenalties(t *testing.T) {
	// Vocabulary of 6; token 0 positive logit, token 1 negative.
	logits := []float32{2, -1, 0.5, 3, 1, -2}
	tests := []struct {
		name string
		p    Params
		h    History
		want []float32
	}{
		{"neutral", Params{RepetitionPenalty: 1}, History{Prompt: []int32{0, 1}, Output: []int32{2}},
			[]float32{2, -1, 0.5, 3, 1, -2}},
		{"repetition on prompt and output", Params{RepetitionPenalty: 2}, History{Prompt: []int32{0, 1}, Output: []int32{2, 5}},
			[]float32{1, -2, 0.25, 3, 1, -4}},
		{"repetition below 1 boosts", Params{RepetitionPenalty: 0.5}, History{Prompt: []int32{0}, Output: []int32{1}},
			[]float32{4, -0.5, 0.5, 3, 1, -2}},
		{"frequency counts output only", Params{RepetitionPenalty: 1, FrequencyPenalty: 0.5}, History{Prompt: []int32{4, 4}, Output: []int32{3, 3, 3, 0}},
			[]float32{1.5, -1, 0.5, 1.5, 1, -2}},
		{"presence once per token", Params{RepetitionPenalty: 1, PresencePenalty: 1}, History{Prompt: []int32{4}, Output: []int32{3, 3, 3, 0}},
			[]float32{1, -1, 0.5, 2, 1, -2}},
		{"negative penalties reward", Params{RepetitionPenalty: 1, FrequencyPenalty: -1, PresencePenalty: -0.5}, History{Output: []int32{5, 5}},
			[]float32{2, -1, 0.5, 3, 1, 0.5}},
		{"all three compose", Params{RepetitionPenalty: 2, FrequencyPenalty: 0.25, PresencePenalty: 0.5}, History{Prompt: []int32{3}, Output: []int32{0, 0}},
			[]float32{2.0/2 - 0.5 - 0.5, -1, 0.5, 1.5, 1, -2}},
		{"ids outside the vocabulary ignored", Params{RepetitionPenalty: 1, PresencePenalty: 1}, History{Prompt: []int32{-1, 99}, Output: []int32{6, -3, 1}},
			[]float32{2, -2, 0.5, 3, 1, -2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.Temperature, tc.p.TopP = 1, 1
			s := New(tc.p, 0)
			z := append([]float32(nil), logits...)
			if s.penalised {
				s.observe(tc.h, len(z))
				s.applyPenalties(z)
			}
			for i := range z {
				if math.Abs(float64(z[i]-tc.want[i])) > 1e-6 {
					t.Fatalf("penalised logits %v, want %v", z, tc.want)
				}
			}
		})
	}
}

func TestPenaltiesIncremental(t *testing.T) {
	p := Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1.3, FrequencyPenalty: 0.4, PresencePenalty: 0.2}
	logits := randomLogits(newRand(9), 50, 1, false)
	prompt := []int32{1, 2, 3, 3, 40}
	out := []int32{}
	inc := New(p, 0)
	for step := range 30 {
		out = append(out, int32((step*7)%50))
		h := History{Prompt: prompt, Output: out}
		inc.observe(h, len(logits))
		fresh := New(p, 0)
		fresh.observe(h, len(logits))
		a, b := append([]float32(nil), logits...), append([]float32(nil), logits...)
		inc.applyPenalties(a)
		fresh.applyPenalties(b)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("step %d token %d: incremental %v, fresh %v", step, i, a[i], b[i])
			}
		}
	}
	// A shorter history (a restarted sequence) is recounted from scratch.
	h := History{Prompt: prompt, Output: out[:3]}
	inc.observe(h, len(logits))
	fresh := New(p, 0)
	fresh.observe(h, len(logits))
	a, b := append([]float32(nil), logits...), append([]float32(nil), logits...)
	inc.applyPenalties(a)
	fresh.applyPenalties(b)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("after shrink, token %d: incremental %v, fresh %v", i, a[i], b[i])
		}
	}
}

func TestPenaltyChangesGreedyChoice(t *testing.T) {
	logits := []float32{2, 1.9, -5}
	tests := []struct {
		name string
		p    Params
		h    History
		want int32
	}{
		{"no penalty", Params{RepetitionPenalty: 1}, History{Output: []int32{0}}, 0},
		{"presence flips", Params{RepetitionPenalty: 1, PresencePenalty: 0.5}, History{Output: []int32{0}}, 1},
		{"frequency flips after two", Params{RepetitionPenalty: 1, FrequencyPenalty: 0.06}, History{Output: []int32{0, 0}}, 1},
		{"frequency too small after one", Params{RepetitionPenalty: 1, FrequencyPenalty: 0.06}, History{Output: []int32{0}}, 0},
		{"repetition from the prompt flips", Params{RepetitionPenalty: 1.1}, History{Prompt: []int32{0}}, 1},
		{"frequency ignores the prompt", Params{RepetitionPenalty: 1, FrequencyPenalty: 2}, History{Prompt: []int32{0}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.TopP = 1
			s := New(tc.p, 0)
			if got := s.Sample(logits, tc.h); got != tc.want {
				t.Fatalf("Sample = %d, want %d", got, tc.want)
			}
			if logits[0] != 2 || logits[1] != 1.9 {
				t.Fatalf("Sample modified the caller's logits: %v", logits)
			}
		})
	}
}

// TestLogitBias: the bias is added after the penalties, forces (+100) or
// bans (-100) a token under greedy and sampling alike, and Distribution
// (speculative verification) sees the same rewritten logits as Sample.
func TestLogitBias(t *testing.T) {
	logits := []float32{2, -1, 0.5, 3, 1, -2}
	p := Params{Temperature: 1, TopP: 1, RepetitionPenalty: 2, LogitBias: []TokenBias{{ID: 0, Bias: 0.5}, {ID: 5, Bias: -1}, {ID: 99, Bias: 7}}}
	s := New(p, 0)
	z := append([]float32(nil), logits...)
	s.rewrite(z, History{Prompt: []int32{0}})
	if want := []float32{2.0/2 + 0.5, -1, 0.5, 3, 1, -3}; !slices.Equal(z, want) {
		t.Fatalf("rewritten logits %v, want %v (penalty, then bias; id 99 outside ignored)", z, want)
	}
	for _, temp := range []float64{0, 1} {
		force := New(Params{Temperature: temp, TopP: 1, RepetitionPenalty: 1, LogitBias: []TokenBias{{ID: 1, Bias: 100}}, HasSeed: true, Seed: 3}, 0)
		ban := New(Params{Temperature: temp, TopP: 1, RepetitionPenalty: 1, LogitBias: []TokenBias{{ID: 3, Bias: -100}}, HasSeed: true, Seed: 3}, 0)
		for range 50 {
			if got := force.Sample(logits, History{}); got != 1 {
				t.Fatalf("temperature %v: +100 on token 1 sampled %d", temp, got)
			}
			if got := ban.Sample(logits, History{}); got == 3 {
				t.Fatalf("temperature %v: -100 on token 3 sampled it", temp)
			}
		}
		d := force.Distribution(logits, History{}, Dist{})
		if d.P(1) < 0.999 {
			t.Fatalf("temperature %v: Distribution gives the forced token %v", temp, d.P(1))
		}
	}
	if got := New(Params{TopP: 1, RepetitionPenalty: 1, LogitBias: []TokenBias{{ID: 3, Bias: -100}}}, 0).Sample(logits, History{}); got != 0 {
		t.Fatalf("greedy with the argmax banned: %d, want the runner-up 0", got)
	}
}
