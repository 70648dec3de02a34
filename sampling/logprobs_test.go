package sampling

import (
	"errors"
	"math"
	"slices"
	"sort"
	"testing"
)

// refLogprobs is a float64 reference: log(exp(x_i - c) / Σ_j exp(x_j - c))
// with c the mean of the finite logits (a different shift than the code's
// max), summing in sorted order.
func refLogprobs(z []float32) []float64 {
	var c float64
	n := 0
	for _, x := range z {
		if !math.IsInf(float64(x), 0) && !isNaN32(x) {
			c += float64(x)
			n++
		}
	}
	c /= float64(n)
	terms := make([]float64, 0, len(z))
	for _, x := range z {
		if !isNaN32(x) {
			terms = append(terms, math.Exp(float64(x)-c))
		}
	}
	sort.Float64s(terms)
	var sum float64
	for _, t := range terms {
		sum += t
	}
	out := make([]float64, len(z))
	for i, x := range z {
		if isNaN32(x) {
			out[i] = math.Inf(-1)
			continue
		}
		out[i] = math.Log(math.Exp(float64(x)-c) / sum)
	}
	return out
}

// refRank: 1 + tokens with a higher logprob + tokens with an equal one and
// a lower id.
func refRank(z []float32, t int32) int {
	x := key(z[t])
	r := 1
	for j := range z {
		y := key(z[j])
		if y > x || (y == x && int32(j) < t) {
			r++
		}
	}
	return r
}

func TestLogprobsMatchReference(t *testing.T) {
	r := newRand(21)
	for trial := range 20 {
		v := 2 + r.IntN(600)
		z := randomLogits(r, v, 4, true)
		if trial%3 == 0 {
			z[r.IntN(v)] = ninf32
			z[r.IntN(v)] = nan32
		}
		want := refLogprobs(z)
		token := int32(r.IntN(v))
		var lp Logprobs
		ComputeLogprobs(z, token, Candidates{Mode: CandidatesAll}, &lp)
		if lp.Chosen.Token != token || lp.Chosen.Rank != refRank(z, token) {
			t.Fatalf("trial %d: chosen %+v, want token %d rank %d", trial, lp.Chosen, token, refRank(z, token))
		}
		if math.Abs(lp.Chosen.Logprob-want[token]) > 1e-9 && !(math.IsInf(want[token], -1) && math.IsInf(lp.Chosen.Logprob, -1)) {
			t.Fatalf("trial %d: chosen logprob %v, want %v", trial, lp.Chosen.Logprob, want[token])
		}
		if len(lp.Candidates) != v {
			t.Fatalf("trial %d: %d candidates for All, want %d", trial, len(lp.Candidates), v)
		}
		var mass float64
		for i, c := range lp.Candidates {
			if c.Token != int32(i) {
				t.Fatalf("All candidates not in id order at %d: %d", i, c.Token)
			}
			if math.IsInf(want[i], -1) != math.IsInf(c.Logprob, -1) || (!math.IsInf(want[i], -1) && math.Abs(c.Logprob-want[i]) > 1e-9) {
				t.Fatalf("trial %d token %d: logprob %v, want %v", trial, i, c.Logprob, want[i])
			}
			if c.Rank != refRank(z, int32(i)) {
				t.Fatalf("trial %d token %d: rank %d, want %d", trial, i, c.Rank, refRank(z, int32(i)))
			}
			mass += math.Exp(c.Logprob)
		}
		if math.Abs(mass-1) > 1e-9 {
			t.Fatalf("trial %d: probabilities sum to %v", trial, mass)
		}
		// LogSoftmax agrees.
		ls := LogSoftmax(z, nil)
		for i := range ls {
			if ls[i] != lp.Candidates[i].Logprob {
				t.Fatalf("LogSoftmax[%d] = %v, ComputeLogprobs %v", i, ls[i], lp.Candidates[i].Logprob)
			}
		}
	}
}

func TestLogprobCandidates(t *testing.T) {
	z := []float32{1, 3, 3, -2, nan32, 0.5, 3}
	// Order: 1, 2, 6 (ties by id), 0, 5, 3, 4 (NaN last).
	want := refLogprobs(z)
	tests := []struct {
		name  string
		token int32
		c     Candidates
		cands []Logprob // Logprob field filled from want
	}{
		{"none", 0, Candidates{}, nil},
		{"top 0", 0, Candidates{Mode: CandidatesTopN, TopN: 0}, nil},
		{"top 4 best first, ties by id", 5, Candidates{Mode: CandidatesTopN, TopN: 4},
			[]Logprob{{Token: 1, Rank: 1}, {Token: 2, Rank: 2}, {Token: 6, Rank: 3}, {Token: 0, Rank: 4}}},
		{"top n beyond vocab clamps", 3, Candidates{Mode: CandidatesTopN, TopN: 50},
			[]Logprob{{Token: 1, Rank: 1}, {Token: 2, Rank: 2}, {Token: 6, Rank: 3}, {Token: 0, Rank: 4}, {Token: 5, Rank: 5}, {Token: 3, Rank: 6}, {Token: 4, Rank: 7}}},
		{"ids in request order", 2, Candidates{Mode: CandidatesTokenIDs, TokenIDs: []int32{4, 6, 0, 6, 1}},
			[]Logprob{{Token: 4, Rank: 7}, {Token: 6, Rank: 3}, {Token: 0, Rank: 4}, {Token: 6, Rank: 3}, {Token: 1, Rank: 1}}},
		{"ids out of vocabulary", 2, Candidates{Mode: CandidatesTokenIDs, TokenIDs: []int32{9, -1, 3}},
			[]Logprob{{Token: 9, Rank: 0}, {Token: -1, Rank: 0}, {Token: 3, Rank: 6}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := Logprobs{Candidates: make([]Logprob, 3)} // stale content must go
			ComputeLogprobs(z, tc.token, tc.c, &dst)
			if dst.Chosen.Rank != refRank(z, tc.token) || dst.Chosen.Logprob != want[tc.token] && math.Abs(dst.Chosen.Logprob-want[tc.token]) > 1e-9 {
				t.Fatalf("chosen %+v, want rank %d logprob %v", dst.Chosen, refRank(z, tc.token), want[tc.token])
			}
			if len(dst.Candidates) != len(tc.cands) {
				t.Fatalf("candidates %+v, want %+v", dst.Candidates, tc.cands)
			}
			for i, w := range tc.cands {
				g := dst.Candidates[i]
				wl := math.Inf(-1)
				if w.Token >= 0 && int(w.Token) < len(z) {
					wl = want[w.Token]
				}
				if g.Token != w.Token || g.Rank != w.Rank || (g.Logprob != wl && math.Abs(g.Logprob-wl) > 1e-9) {
					t.Fatalf("candidate %d = %+v, want token %d rank %d logprob %v", i, g, w.Token, w.Rank, wl)
				}
			}
		})
	}
}

func TestLogprobsDegenerate(t *testing.T) {
	tests := []struct {
		name   string
		logits []float32
		token  int32
		want   float64
		rank   int
	}{
		{"out of range token", []float32{1, 2}, 5, math.Inf(-1), 0},
		{"negative token", []float32{1, 2}, -1, math.Inf(-1), 0},
		{"all -Inf", []float32{ninf32, ninf32}, 1, math.Inf(-1), 2},
		{"two +Inf share the mass", []float32{inf32, 0, inf32}, 2, -math.Ln2, 2},
		{"finite token beside +Inf", []float32{inf32, 0}, 1, math.Inf(-1), 2},
		{"NaN token", []float32{nan32, 0}, 0, math.Inf(-1), 2},
		{"single token", []float32{-3}, 0, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var lp Logprobs
			ComputeLogprobs(tc.logits, tc.token, Candidates{Mode: CandidatesTopN, TopN: 1}, &lp)
			if lp.Chosen.Logprob != tc.want || lp.Chosen.Rank != tc.rank {
				t.Fatalf("chosen %+v, want logprob %v rank %d", lp.Chosen, tc.want, tc.rank)
			}
			for _, c := range lp.Candidates {
				if math.IsNaN(c.Logprob) {
					t.Fatalf("NaN logprob in %+v", lp.Candidates)
				}
			}
		})
	}
}

func TestRanksOfMatchesBruteForce(t *testing.T) {
	r := newRand(33)
	for trial := range 50 {
		v := 1 + r.IntN(500)
		z := randomLogits(r, v, 1, true)
		ids := make([]int32, r.IntN(20))
		for i := range ids {
			ids[i] = int32(r.IntN(v+4) - 2)
		}
		var lp Logprobs
		ComputeLogprobs(z, 0, Candidates{Mode: CandidatesTokenIDs, TokenIDs: ids}, &lp)
		got := make([]int, len(ids))
		want := make([]int, len(ids))
		for i, id := range ids {
			got[i] = lp.Candidates[i].Rank
			if id >= 0 && int(id) < v {
				want[i] = refRank(z, id)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: ranks %v, want %v (ids %v)", trial, got, want, ids)
		}
	}
}

func TestCandidatesValidate(t *testing.T) {
	tests := []struct {
		name    string
		c       Candidates
		maxTopN int
		field   string
	}{
		{"none", Candidates{}, 0, ""},
		{"all", Candidates{Mode: CandidatesAll}, 20, ""},
		{"top n within limit", Candidates{Mode: CandidatesTopN, TopN: 20}, 20, ""},
		{"top n unlimited", Candidates{Mode: CandidatesTopN, TopN: 5000}, 0, ""},
		{"top n over limit", Candidates{Mode: CandidatesTopN, TopN: 21}, 20, "candidates.top_n"},
		{"top n negative", Candidates{Mode: CandidatesTopN, TopN: -1}, 0, "candidates.top_n"},
		{"ids in vocab", Candidates{Mode: CandidatesTokenIDs, TokenIDs: []int32{0, 99}}, 0, ""},
		{"id = vocab size", Candidates{Mode: CandidatesTokenIDs, TokenIDs: []int32{100}}, 0, "candidates.token_ids"},
		{"negative id", Candidates{Mode: CandidatesTokenIDs, TokenIDs: []int32{-1}}, 0, "candidates.token_ids"},
		{"unknown mode", Candidates{Mode: 9}, 0, "candidates"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate(100, tc.maxTopN)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Field != tc.field || !errors.Is(err, ErrInvalidParams) {
				t.Fatalf("Validate = %v, want a ParamError on %s", err, tc.field)
			}
		})
	}
}
