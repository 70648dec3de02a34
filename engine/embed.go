package engine

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"oengine/scheduler"
)

// Pooling says how an embedding request turns its prompt's final hidden
// states (HiddenModel) into one vector (docs/api.md, "Embeddings").
type Pooling int

const (
	// PoolingDefault: the engine's choice, Limits.Pooling (Config.Pooling,
	// else the model file's pooling type, else PoolingLast).
	PoolingDefault Pooling = iota
	// PoolingMean averages the hidden states of every prompt position.
	PoolingMean
	// PoolingCLS takes the first position's hidden state.
	PoolingCLS
	// PoolingLast takes the last position's hidden state (what causal
	// embedding models such as Qwen3-Embedding are trained for).
	PoolingLast
	// PoolingRank takes the pooled state the model's classification head
	// reads (ModelInfo.RankPooling: the first position's, the last's or
	// the mean) through the head (RankModel): Limits.RankOutputs scores, a
	// reranker's relevance logit first.
	PoolingRank
)

var poolingNames = [...]string{"default", "mean", "cls", "last", "rank"}

func (p Pooling) String() string {
	if p >= 0 && int(p) < len(poolingNames) {
		return poolingNames[p]
	}
	return "unknown"
}

// ParsePooling reads "mean", "cls", "last" or "rank" ("" and "default"
// are PoolingDefault).
func ParsePooling(s string) (Pooling, error) {
	if s == "" {
		return PoolingDefault, nil
	}
	for i, n := range poolingNames {
		if s == n {
			return Pooling(i), nil
		}
	}
	return 0, fmt.Errorf("pooling %q: want mean, cls, last or rank", s)
}

// EmbedOptions make a Request an embedding request: its prompt is computed
// and pooled into one vector, and nothing is generated. The stream then
// holds exactly one event: EventDone with Embedding (Limits.EmbeddingDim
// values, not normalized; Limits.RankOutputs scores for PoolingRank) and
// Usage, or EventError.
type EmbedOptions struct {
	Pooling Pooling
	// Pair, when set, is a second text: the input is Request.Prompt and
	// Pair as one pair (a reranker's query and document), tokenized with
	// the vocabulary's pair template ([CLS] a [SEP] b [SEP]), Pair's
	// tokens of token type 1 where the model has two.
	Pair string
	// Truncate: an input longer than the engine takes (Limits.
	// MaxOutputTokens+1) is cut to fit instead of refused: a text keeps
	// its longest prefix whose tokens fit (special tokens added as
	// without the cut), a pair its query and the longest prefix of its
	// document, token ids their first tokens. Usage counts what was
	// computed. A pair whose query alone does not fit is still refused.
	Truncate bool
}

// maxTokenBytes bounds the text one token takes, for fitPrefix's first
// cut (a longer token is possible; the prefix found then is shorter than
// could fit, and still fits).
const maxTokenBytes = 256

// fitPrefix returns the byte length of text's longest prefix, cut at a
// rune boundary, whose encoding has at most limit tokens (a binary search
// over the prefix length: encodings grow with the text, give or take a
// merge, and each candidate is checked). ok false: not even the empty
// prefix fits.
func fitPrefix(text string, limit int, encode func(string) (int, error)) (cut int, ok bool, err error) {
	// A prefix of limit tokens is rarely longer than limit*maxTokenBytes
	// bytes: the search starts there, so a huge text costs a few
	// encodings of that prefix, not of the whole text.
	if end := limit * maxTokenBytes; len(text) > end {
		for end > 0 && !utf8.RuneStart(text[end]) {
			end--
		}
		text = text[:end]
	}
	cuts := make([]int, 0, len(text)+1) // byte offsets of rune starts, and the end
	for i := range text {
		cuts = append(cuts, i)
	}
	cuts = append(cuts, len(text))
	lo, hi := -1, len(cuts)-1 // cuts[lo] fits (-1: none known), cuts[hi+1:] do not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		n, err := encode(text[:cuts[mid]])
		if err != nil {
			return 0, false, err
		}
		if n <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo < 0 {
		return 0, false, nil
	}
	return cuts[lo], true, nil
}

// HiddenModel is a Model that can also return final hidden states: each
// chosen token's state after the last block and the output norm, the
// vector the output projection would turn into logits. Embedding requests
// need one.
type HiddenModel interface {
	Model
	// ForwardHidden runs b like Forward and writes [len(b.Hidden)][Dim]
	// hidden states to hidden (ModelInfo.Dim).
	ForwardHidden(kv KV, b *Batch, logits, hidden []float32) error
}

// RankModel is a HiddenModel with a classification head (a reranker):
// Rank turns a pooled final hidden state (ModelInfo.RankPooling) into
// ModelInfo.RankOutputs scores.
type RankModel interface {
	HiddenModel
	Rank(dst, pooled []float32) error
}

// ProjectModel is a HiddenModel whose pooled embeddings pass through
// dense layers (sentence-transformers' Dense modules, EmbeddingGemma's):
// ProjectPooled maps a pooled vector to the model's embedding, in place.
type ProjectModel interface {
	HiddenModel
	ProjectPooled(v []float32) error
}

// embedState is an embedding request's pooling in progress.
type embedState struct {
	pooling Pooling   // the rows taken: PoolingMean, PoolingCLS or PoolingLast
	rank    bool      // PoolingRank: the pooled row goes through the head
	sum     []float64 // PoolingMean: the sum of the rows seen
	vec     []float32 // PoolingCLS, PoolingLast: the chosen row
}

// resolvePooling is the engine's default pooling of embeddings: cfg's,
// else the model's, else PoolingLast (an encoder's: PoolingMean,
// sentence-transformers' default). A reranker's file says rank: its
// embeddings default to the state its head reads (ranking is asked for by
// name).
func resolvePooling(cfg Pooling, info ModelInfo) Pooling {
	switch {
	case cfg != PoolingDefault:
		return cfg
	case info.Pooling == PoolingRank && info.RankPooling != PoolingDefault:
		return info.RankPooling
	case info.Pooling == PoolingRank:
		return PoolingCLS
	case info.Pooling != PoolingDefault:
		return info.Pooling
	case info.Encoder:
		return PoolingMean
	}
	return PoolingLast
}

// checkEmbed validates an embedding request before acceptance.
func (e *Engine) checkEmbed(r Request) error {
	invalid := func(what string) error {
		return newError(CodeInvalidArgument, "%s cannot be combined with an embedding request", what)
	}
	switch {
	case e.limits.EmbeddingDim == 0:
		return newError(CodeUnsupportedFeature, "this model does not return hidden states, so it serves no embeddings (device %s)", e.limits.Device)
	case r.Embed.Pooling < PoolingDefault || r.Embed.Pooling > PoolingRank:
		return newError(CodeInvalidArgument, "unknown pooling %d", r.Embed.Pooling)
	case r.Embed.Pooling == PoolingRank && e.limits.RankOutputs == 0:
		return newError(CodeUnsupportedFeature, "this model has no classification head: it ranks nothing")
	case r.Embed.Pair != "" && (r.TokenIDs != nil || r.Prompt == ""):
		return newError(CodeInvalidArgument, "a pair needs its first text as the prompt, not token ids")
	case r.OpenInput:
		return invalid("streamed input")
	case r.N > 1:
		return invalid("n > 1")
	case r.MaxTokens != 0 || r.MinTokens != 0:
		return invalid("max_tokens or min_tokens")
	case r.Constraint != nil:
		return invalid("a constraint")
	case r.Logprobs != nil || r.PromptLogprobs != nil:
		return invalid("logprobs")
	case r.Prefix != nil || r.OnRetain != nil:
		return invalid("a session's K/V")
	case len(r.Stop.TokenIDs) > 0 || len(r.Stop.Strings) > 0:
		return invalid("stop conditions")
	}
	return nil
}

// startEmbed prepares the pooling of req, whose sequence is being added:
// mean and cls pooling need rows from position 0 (the prefix cache cannot
// supply them), last pooling only the last row.
func (e *Engine) startEmbed(req *request, opts *scheduler.SeqOptions) {
	opts.Whole = e.limits.EmbeddingsOnly // an encoder's input, computed at once
	p := req.r.Embed.Pooling
	if p == PoolingDefault {
		p = e.limits.Pooling
	}
	req.embed = &embedState{pooling: p}
	if p == PoolingRank {
		req.embed.pooling, req.embed.rank = e.rankPooling, true
	}
	switch req.embed.pooling {
	case PoolingMean:
		req.embed.sum = make([]float64, e.limits.EmbeddingDim)
		opts.PromptLogits = true
	case PoolingCLS:
		opts.PromptLogits = true
	}
}

// embedStep takes one step's hidden rows of an embedding request's item
// and ends the request when its last prompt position was computed.
func (e *Engine) embedStep(o *output, it *scheduler.Item, rows []float32, stepStart time.Time) {
	req := o.req
	if !req.started {
		req.started, req.cached, req.queued = true, it.Seq.Cached(), stepStart.Sub(req.arrived)
	}
	req.prefilled.Store(int64(min(it.End, len(req.prompt))))
	e.embedRows(req, it, rows)
	if it.Sample {
		e.finishEmbed(o)
	}
}

// embedRows takes the hidden rows of it (positions [LogitsStart, End), D
// values each). Positions before the sequence's LogitsFrom were taken by an
// earlier step (a preempted sequence recomputes them), so none is counted
// twice.
func (e *Engine) embedRows(req *request, it *scheduler.Item, rows []float32) {
	D, es := e.limits.EmbeddingDim, req.embed
	for p := it.LogitsStart; p < it.End; p++ {
		r := rows[(p-it.LogitsStart)*D : (p-it.LogitsStart+1)*D]
		switch {
		case es.pooling == PoolingMean && p >= it.Seq.LogitsFrom:
			for j, v := range r {
				es.sum[j] += float64(v)
			}
		case es.pooling == PoolingCLS && p == 0,
			es.pooling == PoolingLast && p == len(req.prompt)-1:
			es.vec = append(es.vec[:0], r...)
		}
	}
	if es.pooling == PoolingMean && it.End < len(req.prompt) {
		// A recomputing item (after a preemption) may end before the
		// rows already taken.
		it.Seq.LogitsFrom = max(it.Seq.LogitsFrom, it.End)
	} else {
		it.Seq.LogitsFrom = scheduler.NoLogits
	}
}

// finishEmbed ends req, whose last prompt position was just computed, with
// its pooled vector.
func (e *Engine) finishEmbed(o *output) {
	req, es := o.req, o.req.embed
	if es.pooling == PoolingMean {
		es.vec = make([]float32, len(es.sum))
		for j, s := range es.sum {
			es.vec[j] = float32(s / float64(len(req.prompt)))
		}
	}
	if len(es.vec) != e.limits.EmbeddingDim {
		e.endRequest(req, newError(CodeInternal, "embedding: no hidden state for the pooled position"))
		return
	}
	if pm, ok := e.model.(ProjectModel); ok && !es.rank {
		if err := pm.ProjectPooled(es.vec); err != nil {
			e.endRequest(req, wrapError(CodeInternal, err, ""))
			return
		}
	}
	if es.rank {
		scores := make([]float32, e.limits.RankOutputs)
		if err := e.model.(RankModel).Rank(scores, es.vec); err != nil {
			e.endRequest(req, wrapError(CodeInternal, err, ""))
			return
		}
		es.vec = scores
	}
	for _, v := range es.vec {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			e.endRequest(req, newError(CodeInternal, "embedding: the model produced a non-finite hidden state"))
			return
		}
	}
	o.finished = true
	o.finish = Finish{Reason: FinishStop}
	e.endRequest(req, nil)
}
