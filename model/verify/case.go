package verify

import (
	"fmt"
	"math"
	"slices"

	"oengine/model/llama"
)

// runner holds the state reused across the cases of one model.
type runner struct {
	m      model
	opts   Options
	tol    Tolerance
	kv     store
	logits []float32
	// prefillAll: the GGML greedy prefill computes every prompt token's
	// logits (outputBatchDependent).
	prefillAll bool
}

// store returns a page table for tokens positions, growing the K/V store
// when needed. The store is reused across cases: every position is written
// before it is read.
func (r *runner) store(tokens int) ([]int32, error) {
	n := (tokens + r.opts.PageSize - 1) / r.opts.PageSize
	if r.kv == nil || r.kv.Pages() < n {
		kv, err := r.m.newStore(n, r.opts.PageSize)
		if err != nil {
			return nil, err
		}
		r.kv = kv
	}
	// Use the pages in reverse order so that the table is not the identity
	// and positions cross pages in a non-trivial way.
	table := make([]int32, n)
	for i := range table {
		table[i] = int32(r.kv.Pages() - 1 - i)
	}
	return table, nil
}

// runCase teacher-forces case c, compares every position and then decodes
// greedily from the end of the prompt.
func (r *runner) runCase(idx int, c *Case, enc encoder) (CaseReport, error) {
	cr := CaseReport{Index: idx, PromptTokens: len(c.Tokens), Pass: true}
	if enc != nil {
		got, err := enc.Encode(c.Prompt)
		if err != nil {
			return cr, fmt.Errorf("verify: case %d: tokenize: %w", idx, err)
		}
		cr.TokensChecked = true
		cr.TokensMatch = slices.Equal(got, c.Tokens)
		if !cr.TokensMatch {
			cr.fail("tokenization differs: got %d tokens %v, want %d %v", len(got), head(got), len(c.Tokens), head(c.Tokens))
		}
	}
	P := len(c.Tokens)
	seq := append(slices.Clone(c.Tokens), c.Greedy[:max(len(c.Greedy)-1, 0)]...)
	cr.ForcedTokens = len(seq)
	vocab := r.m.config().Vocab
	for _, t := range seq {
		if t < 0 || int(t) >= vocab {
			return cr, fmt.Errorf("verify: case %d: token %d outside vocabulary %d", idx, t, vocab)
		}
	}
	table, err := r.store(len(seq))
	if err != nil {
		return cr, err
	}
	maxChunk := slices.Max(r.opts.Chunks)
	if r.opts.GGMLForced {
		maxChunk = max(maxChunk, min(r.opts.UBatch, P))
	}
	if len(r.logits) < maxChunk*vocab {
		r.logits = make([]float32, maxChunk*vocab)
	}
	var sumErr float64
	lastArg := -1
	b := &llama.Batch{Seqs: [][]int32{table}}
	for pos, k := 0, 0; pos < len(seq); k++ {
		n := min(max(r.opts.Chunks[k%len(r.opts.Chunks)], 1), len(seq)-pos)
		if r.opts.GGMLForced { // as llama.cpp wrote the reference: prompt ubatches, then decode steps
			n = 1
			if pos < P {
				n = min(r.opts.UBatch, P-pos)
			}
		}
		fillBatch(b, seq[pos:pos+n], pos, true)
		if err := r.m.forward(r.kv, b, r.logits); err != nil {
			return cr, fmt.Errorf("verify: case %d: %w", idx, err)
		}
		for j := 0; j < n; j++ {
			i := pos + j
			list := c.PromptTopK[min(i, P-1)]
			if i >= P {
				list = c.GreedyTopK[i-P+1]
			}
			row := r.logits[j*vocab : (j+1)*vocab]
			lse, arg := logSumExp(row)
			posMax := 0.0
			if i == P-1 {
				lastArg = arg
			}
			for _, e := range list {
				if e.Logprob < r.opts.MinLogprob || int(e.Token) >= vocab {
					continue
				}
				d := math.Abs(float64(row[e.Token]) - lse - e.Logprob)
				if math.IsNaN(d) {
					d = math.Inf(1)
				}
				sumErr += d
				posMax = max(posMax, d)
				cr.Compared++
				if d > cr.MaxAbs || cr.Compared == 1 {
					cr.MaxAbs, cr.WorstPos = d, i
				}
			}
			if r.opts.PerPosition {
				cr.PosMaxAbs = append(cr.PosMaxAbs, posMax)
			}
			if margin(list) >= r.tol.ArgmaxMargin {
				cr.ArgmaxChecked++
				if int32(arg) != list[0].Token {
					cr.ArgmaxMismatch++
					if cr.ArgmaxMismatch == 1 {
						cr.FirstMismatch = i
					}
				}
			}
		}
		pos += n
	}
	if cr.Compared > 0 {
		cr.MeanAbs = sumErr / float64(cr.Compared)
	}
	if cr.MaxAbs > r.tol.MaxAbs {
		cr.fail("max abs logprob error %.4f at position %d > %.4g", cr.MaxAbs, cr.WorstPos, r.tol.MaxAbs)
	}
	if cr.MeanAbs > r.tol.MeanAbs {
		cr.fail("mean abs logprob error %.4f > %.4g", cr.MeanAbs, r.tol.MeanAbs)
	}
	if cr.ArgmaxMismatch > 0 {
		cr.fail("argmax differs at %d of %d confident positions (first at %d)", cr.ArgmaxMismatch, cr.ArgmaxChecked, cr.FirstMismatch)
	}
	if err := r.greedy(c, &cr, table, lastArg); err != nil {
		return cr, err
	}
	return cr, nil
}

// greedy decodes free-running from the end of the prompt, one token per
// Forward, and checks the tokens against the reference up to its first
// near-tie. The prompt's K/V pages from teacher forcing are reused; each
// decode step rewrites its own position.
func (r *runner) greedy(c *Case, cr *CaseReport, table []int32, first int) error {
	P, vocab := len(c.Tokens), r.m.config().Vocab
	limit := len(c.Greedy)
	for j := range c.GreedyTopK {
		if margin(c.GreedyTopK[j]) < r.opts.GreedyTie {
			limit = j
			break
		}
	}
	cr.GreedyLimit, cr.GreedyFailStep = limit, -1
	tok := int32(first)
	b := &llama.Batch{Seqs: [][]int32{table}}
	if cm := r.m.cpu(); cm != nil && r.opts.GGML && !r.opts.GGMLForced {
		if r.opts.GGMLAVX512 {
			cm.SetGGMLAVX512(true)
		} else {
			cm.SetGGMLArithmetic(true)
		}
		defer cm.SetGGMLArithmetic(false)
	}
	if (r.opts.GGML || r.opts.GGMLForced) && limit > 0 {
		// llama.cpp's attention arithmetic depends on the batch: rebuild
		// the prompt's K/V as it did (one Forward per ubatch).
		for pos := 0; pos < P; pos += r.opts.UBatch {
			n := min(r.opts.UBatch, P-pos)
			fillBatch(b, c.Tokens[pos:pos+n], pos, r.prefillAll)
			if need := len(b.Logits) * vocab; len(r.logits) < need {
				r.logits = make([]float32, need)
			}
			if err := r.m.forward(r.kv, b, r.logits); err != nil {
				return fmt.Errorf("verify: greedy prefill: %w", err)
			}
		}
		last := (len(b.Logits) - 1) * vocab
		_, arg := logSumExp(r.logits[last : last+vocab])
		tok = int32(arg)
	}
	for j := 0; j < limit; j++ {
		if tok != c.Greedy[j] {
			cr.GreedyFailStep, cr.GreedyFailMargin = j, margin(c.GreedyTopK[j])
			cr.fail("greedy step %d: got token %d, want %d (reference margin %.3f)", j, tok, c.Greedy[j], cr.GreedyFailMargin)
			return nil
		}
		cr.GreedyMatched++
		if j+1 == limit {
			break
		}
		fillBatch(b, []int32{tok}, P+j, true)
		if err := r.m.forward(r.kv, b, r.logits); err != nil {
			return fmt.Errorf("verify: greedy step %d: %w", j, err)
		}
		_, arg := logSumExp(r.logits[:vocab])
		tok = int32(arg)
	}
	return nil
}

// fillBatch sets b to tokens at positions start.. of sequence 0, asking for
// every token's logits when all is true.
func fillBatch(b *llama.Batch, tokens []int32, start int, all bool) {
	n := len(tokens)
	b.Tokens = append(b.Tokens[:0], tokens...)
	b.Pos, b.Seq, b.Logits = b.Pos[:0], b.Seq[:0], b.Logits[:0]
	for i := 0; i < n; i++ {
		b.Pos = append(b.Pos, int32(start+i))
		b.Seq = append(b.Seq, 0)
		if all || i == n-1 {
			b.Logits = append(b.Logits, int32(i))
		}
	}
}

func head(t []int32) []int32 {
	if len(t) > 12 {
		return t[:12]
	}
	return t
}
