package engine

import (
	"log/slog"
	"unsafe"

	"oengine/kvcache"
	"oengine/model/tokenizer"
	"oengine/scheduler"
)

// Batch is one forward step (same layout as llama.Batch): any mix of
// prefill chunks and decode tokens of many sequences.
type Batch struct {
	Tokens []int32   // [T] token ids
	Pos    []int32   // [T] position of each token in its sequence
	Seq    []int32   // [T] index into Seqs
	Seqs   [][]int32 // per sequence: page ids covering positions 0..max pos
	Logits []int32   // indices into Tokens whose logits are wanted, in order
	Hidden []int32   // indices into Tokens whose final hidden states are wanted (HiddenModel), in order
	Types  []uint8   // an encoder's token types ([T], below ModelInfo.TokenTypes); nil: all 0
}

// ModelInfo are the model's fixed figures.
type ModelInfo struct {
	Vocab      int
	ContextLen int
	// Dim is the hidden width (the length of a HiddenModel's rows).
	Dim int
	// Pooling is the model file's own pooling for embeddings;
	// PoolingDefault when it names none.
	Pooling Pooling
	// Encoder: the model's tokens attend both ways (BERT and its kin): it
	// serves embeddings only, and Forward must get each sequence whole,
	// positions 0 to n-1 in one batch (scheduler.SeqOptions.Whole).
	Encoder bool
	// TokenTypes is the number of an encoder's token types (BERT's
	// segments; Batch.Types); RankOutputs the width of its classification
	// head (RankModel; 0: none).
	TokenTypes, RankOutputs int
	// RankPooling is the pooled state the head reads (PoolingCLS,
	// PoolingMean or PoolingLast; PoolingDefault: PoolingCLS).
	RankPooling Pooling
}

// Model is the forward pass the engine runs plans on. It is declared here,
// by its user; FromLlama adapts *llama.Model. Tests use a fake.
type Model interface {
	Info() ModelInfo
	// KVBytesPerPage is the memory one page of pageSize positions takes.
	KVBytesPerPage(pageSize int) int64
	// NewKV allocates the paged K/V store.
	NewKV(pages, pageSize int) (KV, error)
	// Forward writes each token's K/V at its position in its sequence's
	// pages, attends causally within the sequence and writes
	// [len(b.Logits)][Vocab] raw logits.
	Forward(kv KV, b *Batch, logits []float32) error
}

// GreedyModel is a Model that can also take each wanted row's argmax
// itself, so the logits never leave it (the CUDA model: only the token ids
// come back from the device). The engine uses it for a step in which every
// sampled output is plain greedy (see Engine.plainGreedy); the choice is
// sampling's argmax: the lowest index among equal maxima.
type GreedyModel interface {
	Model
	// ForwardGreedy runs b like Forward and writes the argmax token of each
	// row of b.Logits to out[i] instead of the logits.
	ForwardGreedy(kv KV, b *Batch, out []int32) error
}

// KV is the model's paged K/V store.
type KV interface {
	CopyPage(dst, src int32)
}

// Tokenizer is what the engine needs of a tokenizer; WrapTokenizer adapts
// *tokenizer.Tokenizer.
type Tokenizer interface {
	// Encode tokenizes text (the signature of *tokenizer.Tokenizer, shared
	// by every tokenizer interface of the project): AddSpecial applies the
	// BOS/EOS rule, ParseSpecial recognises special token texts.
	Encode(text string, opts tokenizer.EncodeOptions) []int32
	// IsEOG reports end-of-generation tokens (EOS, EOT, ...).
	IsEOG(id int32) bool
	// NewDecoder returns an incremental detokenizer; special renders
	// control tokens as their text.
	NewDecoder(special bool) Decoder
}

// PairEncoder is a Tokenizer with a template for two texts (a
// reranker's query and document): ids and the index of the second text's
// first token (tokenizer.Tokenizer.EncodePair).
type PairEncoder interface {
	EncodePair(a, b string, parseSpecial bool) (ids []int32, second int, err error)
}

// Decoder turns tokens into text incrementally, never emitting half a UTF-8
// character; the concatenation of Push results and Flush is the text.
type Decoder interface {
	Push(id int32) string
	Flush() string
}

// kvAlloc adapts *kvcache.Cache to scheduler.Allocator.
type kvAlloc struct {
	c   *kvcache.Cache
	log *slog.Logger
}

// kvTable wraps a kvcache table with a reusable page buffer.
type kvTable struct {
	t   *kvcache.Table
	buf []kvcache.PageID
}

// Pages returns a view valid until the next call.
func (t *kvTable) Pages() []int32 {
	t.buf = t.t.AppendPages(t.buf[:0])
	if len(t.buf) == 0 {
		return nil
	}
	// kvcache.PageID is an int32.
	return unsafe.Slice((*int32)(unsafe.Pointer(&t.buf[0])), len(t.buf))
}

var _ scheduler.Allocator = (*kvAlloc)(nil)

func (a *kvAlloc) PageSize() int   { return a.c.PageSize() }
func (a *kvAlloc) TotalPages() int { return a.c.NumPages() }
func (a *kvAlloc) Available() int  { return a.c.Available() }

func (a *kvAlloc) Match(tokens []int32, salt string, maxTokens int) (scheduler.Table, int) {
	t, n := a.c.Match(tokens, kvcache.Namespace{Salt: salt}, maxTokens)
	return &kvTable{t: t}, n
}

// MatchPrefix forks the pages of prefix's first n tokens (at most
// maxTokens); when the prefix cache may cover more (prefix ends before the
// last whole page within maxTokens), Match's result wins if it is longer.
// A prefix from another namespace, or one that cannot be forked, falls
// back to Match.
func (a *kvAlloc) MatchPrefix(prefix scheduler.Table, n int, tokens []int32, salt string, maxTokens int) (scheduler.Table, int) {
	pt := prefix.(*kvTable).t
	ns := kvcache.Namespace{Salt: salt}
	n = max(min(n, maxTokens, pt.Len()), 0)
	if pt.Namespace() != ns || n == 0 {
		return a.Match(tokens, salt, maxTokens)
	}
	if ps := a.c.PageSize(); maxTokens/ps*ps > n {
		m, mn := a.c.Match(tokens, ns, maxTokens)
		if mn > n {
			return &kvTable{t: m}, mn
		}
		a.c.Release(m)
	}
	f, err := a.c.ForkPrefix(pt, n)
	if err != nil {
		a.log.Error("engine: reusing a K/V prefix", "err", err)
		return a.Match(tokens, salt, maxTokens)
	}
	return &kvTable{t: f}, n
}

func (a *kvAlloc) NewTable(salt string) scheduler.Table {
	return &kvTable{t: a.c.NewTable(kvcache.Namespace{Salt: salt})}
}

func (a *kvAlloc) Fork(t scheduler.Table) (scheduler.Table, error) {
	f, err := a.c.Fork(t.(*kvTable).t)
	if err != nil {
		return nil, err
	}
	return &kvTable{t: f}, nil
}

func (a *kvAlloc) Grow(t scheduler.Table, valid, total int) ([]scheduler.Copy, error) {
	kt := t.(*kvTable).t
	n := total - kt.Len()
	if n <= 0 {
		return nil, nil
	}
	cs, err := a.c.PrepareAppend(kt, n)
	if err != nil {
		return nil, err
	}
	var out []scheduler.Copy
	for _, c := range cs {
		out = append(out, scheduler.Copy{Src: int32(c.Src), Dst: int32(c.Dst)})
	}
	return out, nil
}

func (a *kvAlloc) Commit(t scheduler.Table, tokens []int32) {
	if err := a.c.Commit(t.(*kvTable).t, tokens); err != nil {
		a.log.Error("engine: prefix commit", "err", err)
	}
}

func (a *kvAlloc) Truncate(t scheduler.Table, n int) {
	if err := a.c.Truncate(t.(*kvTable).t, n); err != nil {
		a.log.Error("engine: KV rollback", "err", err)
	}
}

func (a *kvAlloc) Release(t scheduler.Table) { a.c.Release(t.(*kvTable).t) }
