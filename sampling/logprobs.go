package sampling

import (
	"math"
	"slices"
)

// Logprobs are computed from the RAW logits of the model (before penalties,
// temperature, top-k, top-p, min-p): the model's own distribution, which is
// vLLM's default ("raw_logprobs"). Values are float64 log-softmax.
//
// Rank is the 1-based position of a token when the whole vocabulary is
// ordered by logprob (highest first) with ties broken by the lower token id,
// so the greedy token always has rank 1 and ranks are distinct.

// CandidateMode selects which candidate tokens accompany a chosen token.
type CandidateMode uint8

const (
	CandidatesNone     CandidateMode = iota // only the chosen token
	CandidatesTopN                          // the TopN most likely tokens
	CandidatesTokenIDs                      // the listed TokenIDs, in the order given
	CandidatesAll                           // every token of the vocabulary, by id
)

// Candidates is the caller's candidate selection (the wire's
// CandidateTokenSelection).
type Candidates struct {
	Mode     CandidateMode
	TopN     int     // CandidatesTopN: how many (0 = none)
	TokenIDs []int32 // CandidatesTokenIDs
}

// Count is how many candidates the selection yields per position in a
// vocabulary of vocabSize tokens.
func (c Candidates) Count(vocabSize int) int {
	switch c.Mode {
	case CandidatesAll:
		return vocabSize
	case CandidatesTopN:
		return min(max(c.TopN, 0), vocabSize)
	case CandidatesTokenIDs:
		return len(c.TokenIDs)
	}
	return 0
}

// Validate checks the selection against a vocabulary size. maxTopN <= 0
// means no limit on TopN. Errors wrap ErrInvalidParams.
func (c Candidates) Validate(vocabSize, maxTopN int) error {
	switch c.Mode {
	case CandidatesNone, CandidatesAll:
	case CandidatesTopN:
		if c.TopN < 0 {
			return paramErr("candidates.top_n", "must be >= 0, got %d", c.TopN)
		}
		if maxTopN > 0 && c.TopN > maxTopN {
			return paramErr("candidates.top_n", "must be <= %d, got %d", maxTopN, c.TopN)
		}
	case CandidatesTokenIDs:
		for _, id := range c.TokenIDs {
			if id < 0 || int(id) >= vocabSize {
				return paramErr("candidates.token_ids", "token id %d outside the vocabulary [0, %d)", id, vocabSize)
			}
		}
	default:
		return paramErr("candidates", "unknown selection mode %d", c.Mode)
	}
	return nil
}

// Logprob is one token's log-probability and rank.
type Logprob struct {
	Token   int32
	Logprob float64 // -Inf for a token the model gives no mass (or a NaN logit)
	Rank    int     // 1-based; 0 for a token outside the vocabulary
}

// Logprobs is the result for one position: the chosen (sampled, or for a
// prompt position the actual next) token and the selected candidates.
type Logprobs struct {
	Chosen     Logprob
	Candidates []Logprob // TopN: best first; TokenIDs: request order; All: by id
}

// normalizer turns a raw logit into its log-softmax.
type normalizer struct {
	lse     float64 // log-sum-exp of the finite logits
	posInf  int     // number of +Inf logits (they share all the mass)
	allNone bool    // no logit carries mass
}

// newNormalizer takes logits without NaN (see key).
func newNormalizer(logits []float32) normalizer {
	m := maxValue(logits)
	switch {
	case math.IsInf(float64(m), 1):
		n := 0
		for _, x := range logits {
			if math.IsInf(float64(x), 1) {
				n++
			}
		}
		return normalizer{posInf: n}
	case math.IsInf(float64(m), -1):
		return normalizer{allNone: true}
	}
	fm := float64(m)
	return normalizer{lse: fm + math.Log(sumExpNeg(logits, fm))}
}

// sumExpNegGo is Σ expNeg(float64(x) − m) over z in order: the plain twin
// of sumExpNeg.
func sumExpNegGo(z []float32, m float64) float64 {
	var sum float64
	for _, x := range z {
		sum += expNeg(float64(x) - m)
	}
	return sum
}

func (n normalizer) logprob(x float32) float64 {
	switch {
	case n.allNone:
		return math.Inf(-1)
	case n.posInf > 0:
		if math.IsInf(float64(x), 1) {
			return -math.Log(float64(n.posInf))
		}
		return math.Inf(-1)
	}
	return float64(x) - n.lse
}

// LogSoftmax writes the log-softmax of logits into dst (grown as needed) and
// returns it. NaN logits get -Inf.
func LogSoftmax(logits []float32, dst []float64) []float64 {
	if cap(dst) < len(logits) {
		dst = make([]float64, len(logits))
	}
	dst = dst[:len(logits)]
	sc := getScratch(len(logits))
	defer putScratch(sc)
	z := sanitize(sc.z[:len(logits)], logits)
	n := newNormalizer(z)
	for i, x := range z {
		dst[i] = n.logprob(x)
	}
	return dst
}

// sanitize copies logits into dst with NaN replaced by -Inf.
func sanitize(dst, logits []float32) []float32 {
	for i, x := range logits {
		dst[i] = key(x)
	}
	return dst
}

// rankOf is 1 + the number of tokens ordered before t (z without NaN).
func rankOf(z []float32, t int32) int {
	x := z[t]
	r := 1
	for j, y := range z {
		if y > x || (y == x && int32(j) < t) {
			r++
		}
	}
	return r
}

// ComputeLogprobs fills dst with the logprob and rank of token under logits
// ([vocab] raw scores of one position) and the candidates c selects,
// reusing dst.Candidates. It serves output tokens and prompt positions
// alike (for prompt token i, pass the logits of position i-1). Invalid
// candidate ids (see Candidates.Validate) get Logprob -Inf and Rank 0.
func ComputeLogprobs(logits []float32, token int32, c Candidates, dst *Logprobs) {
	dst.Candidates = dst.Candidates[:0]
	v := len(logits)
	sc := getScratch(v)
	defer putScratch(sc)
	z := sanitize(sc.z[:v], logits)
	n := newNormalizer(z)
	dst.Chosen = Logprob{Token: token, Logprob: math.Inf(-1)}
	if token >= 0 && int(token) < v {
		dst.Chosen.Logprob = n.logprob(z[token])
		dst.Chosen.Rank = rankOf(z, token)
	}
	switch c.Mode {
	case CandidatesTopN:
		k := min(c.TopN, v)
		if k <= 0 {
			return
		}
		ids := iota32(sc.idx[:0], v)
		for i, id := range selectTop(z, ids, k) {
			dst.Candidates = append(dst.Candidates, Logprob{Token: id, Logprob: n.logprob(z[id]), Rank: i + 1})
		}
	case CandidatesTokenIDs:
		ranks := ranksOf(z, c.TokenIDs, sc)
		for i, id := range c.TokenIDs {
			lp := Logprob{Token: id, Logprob: math.Inf(-1)}
			if id >= 0 && int(id) < v {
				lp.Logprob, lp.Rank = n.logprob(z[id]), int(ranks[i])
			}
			dst.Candidates = append(dst.Candidates, lp)
		}
	case CandidatesAll:
		order := iota32(sc.idx[:0], v)
		slices.SortFunc(order, func(a, b int32) int { // full order, best first
			if better(z, a, b) {
				return -1
			}
			if better(z, b, a) {
				return 1
			}
			return 0
		})
		rank := grow32(sc.aux, v)
		sc.aux = rank
		for p, id := range order {
			rank[id] = int32(p + 1)
		}
		for id := range v {
			dst.Candidates = append(dst.Candidates, Logprob{Token: int32(id), Logprob: n.logprob(z[id]), Rank: int(rank[id])})
		}
	}
}

func iota32(dst []int32, n int) []int32 {
	for i := range n {
		dst = append(dst, int32(i))
	}
	return dst
}

func grow32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// ranksOf returns the rank of every id of ids (in order; 0 for an id
// outside the vocabulary) with one pass over the vocabulary:
// O(vocab * log len(ids)). The returned slice lives in sc.
func ranksOf(z []float32, ids []int32, sc *scratch) []int32 {
	v := len(z)
	k := len(ids)
	buf := grow32(sc.aux, 3*k+1)
	sc.aux = buf
	perm, out, before := buf[:0], buf[k:2*k], buf[2*k:3*k+1]
	for i, id := range ids {
		out[i] = 0
		if id >= 0 && int(id) < v {
			perm = append(perm, int32(i))
		}
	}
	// perm: positions of valid ids, ordered best-first by their token.
	slices.SortFunc(perm, func(a, b int32) int {
		switch {
		case better(z, ids[a], ids[b]):
			return -1
		case better(z, ids[b], ids[a]):
			return 1
		}
		return 0
	})
	clear(before[:len(perm)+1])
	if len(perm) > 0 {
		worst := ids[perm[len(perm)-1]]
		for j := range v {
			if !better(z, int32(j), worst) {
				continue // precedes none of them
			}
			// The ids that token j precedes form a suffix of perm; binary
			// search its start.
			lo, hi := 0, len(perm)-1
			for lo < hi {
				mid := int(uint(lo+hi) >> 1)
				if better(z, int32(j), ids[perm[mid]]) {
					hi = mid
				} else {
					lo = mid + 1
				}
			}
			before[lo]++
		}
	}
	var acc int32
	for q, pi := range perm {
		acc += before[q]
		out[pi] = acc + 1
	}
	return out
}
