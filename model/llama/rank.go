package llama

import (
	"fmt"
	"math"

	"oengine/kernels/cpu"
	"oengine/model/gguf"
)

// Classification heads (rerankers). A reranker scores a (query, document)
// input from one pooled final hidden state (Config.RankPooling) through
// its head (Rank), as llama.cpp's rank pooling:
//
//   - BERT and XLM-R cross-encoders (bge-reranker, ms-marco MiniLM): the
//     first position's state, h = tanh(cls·x + b) where the file has cls,
//     then cls.output·h + b (jina-bert-v2's rerankers have cls alone, one
//     row: their score is tanh(cls·x + b), as llama.cpp computes it);
//   - ModernBERT's (gte-reranker-modernbert): the mean of the states, then
//     h = LN(GELU(cls·x + b)) with cls.norm's weight (and bias, if any),
//     then cls.output·h + b;
//   - Qwen3-Reranker, a causal model asked to answer "yes" or "no": the
//     last position's state through cls.output, the rows of the output
//     projection for "yes" and "no". llama.cpp's score is their softmax's
//     first value, P(yes); Rank returns the log-odds ln P(yes)/P(no), one
//     score whose sigmoid is that probability (Config.RankLogOdds).

// readRankHead reads what a file's classification head needs from the
// configuration: its width, the pooled state it reads and its form.
func (c *Config) readRankHead(f *gguf.File) error {
	rows := func(name string) int {
		if t, ok := f.Tensor(name); ok && len(t.Dims) == 2 && t.Dims[1] <= maxDim {
			return int(t.Dims[1])
		}
		return 0
	}
	switch {
	case c.Encoder:
		if c.RankOutputs = rows("cls.output.weight"); c.RankOutputs == 0 {
			c.RankOutputs = rows("cls.weight")
		}
		c.RankPooling = PoolCLS
		if c.PreNorm {
			c.RankPooling = PoolMean
		}
	case c.Arch == "qwen3":
		n := rows("cls.output.weight")
		if n == 0 {
			return nil
		}
		if n != 2 {
			return fmt.Errorf("%w: a qwen3 classification head of %d outputs (a reranker's has two: yes and no)", ErrUnsupported, n)
		}
		c.RankOutputs, c.RankPooling, c.RankLogOdds = 1, PoolLast, true
	}
	return nil
}

// loadRankHead reads the classification head's tensors, if the file has
// one.
func (m *Model) loadRankHead(ld *loader) {
	c, f := &m.cfg, ld.f
	if c.RankOutputs == 0 {
		return
	}
	optional := func(name string, n int) []float32 {
		if _, ok := f.Tensor(name); !ok {
			return nil
		}
		return ld.vector(name, n)
	}
	_, out := f.Tensor("cls.output.weight")
	if _, ok := f.Tensor("cls.weight"); ok && c.Encoder { // a dense layer first
		rows := c.Dim
		if !out { // the whole head (jina-bert-v2's rerankers: one output)
			rows = c.RankOutputs
		}
		m.clsW = ld.matrix("cls.weight", rows, c.Dim)
		m.clsB = optional("cls.bias", rows)
		if c.PreNorm {
			m.clsNormW = ld.vector("cls.norm.weight", c.Dim)
			m.clsNormB = optional("cls.norm.bias", c.Dim)
		}
	}
	if out {
		n := c.RankOutputs
		if c.RankLogOdds {
			n = 2
		}
		m.clsOutW = ld.matrix("cls.output.weight", n, c.Dim)
		m.clsOutB = optional("cls.output.bias", n)
	}
}

// Rank applies the classification head to a pooled final hidden state
// (Config.RankPooling of the input's states), x [Dim], and writes
// Config.RankOutputs scores to dst. The first score of a reranker is its
// relevance logit.
func (m *Model) Rank(dst, x []float32) error {
	c := &m.cfg
	switch {
	case c.RankOutputs == 0:
		return fmt.Errorf("%w: this %s model has no classification head", ErrUnsupported, c.Arch)
	case len(x) != c.Dim || len(dst) < c.RankOutputs:
		return fmt.Errorf("%w: Rank of %d values into %d, want %d into %d", ErrBadBatch, len(x), len(dst), c.Dim, c.RankOutputs)
	}
	h := x
	if m.clsW.Rows > 0 {
		h = make([]float32, m.clsW.Rows)
		m.pool.MatMul(h, m.clsW, x, 1)
		if m.clsB != nil {
			cpu.Add(h, h, m.clsB)
		}
		if c.PreNorm {
			cpu.GELU(h, h)
			cpu.LayerNorm(h, h, m.clsNormW, m.clsNormB, c.NormEps)
		} else {
			for i, v := range h {
				h[i] = float32(math.Tanh(float64(v)))
			}
		}
	}
	if m.clsOutW.Rows == 0 {
		copy(dst, h)
		return nil
	}
	out := make([]float32, m.clsOutW.Rows)
	m.pool.MatMul(out, m.clsOutW, h, 1)
	if m.clsOutB != nil {
		cpu.Add(out, out, m.clsOutB)
	}
	if c.RankLogOdds {
		dst[0] = out[0] - out[1]
		return nil
	}
	copy(dst, out)
	return nil
}
