package engine

import (
	"fmt"

	"oengine/model/llama"
)

// llamaModel adapts *llama.Model to Model.
type llamaModel struct {
	m     *llama.Model
	typ   llama.KVType
	batch llama.Batch // reused: only the step loop calls Forward
}

// FromLlama adapts a loaded llama-family model; kvType selects the K/V
// storage (llama.KVF16 is llama.cpp's default).
func FromLlama(m *llama.Model, kvType llama.KVType) Model {
	return &llamaModel{m: m, typ: kvType}
}

func (l *llamaModel) Info() ModelInfo {
	c := l.m.Config()
	return ModelInfo{Vocab: c.Vocab, ContextLen: c.CtxLen, Dim: c.Dim, Pooling: poolings[c.Pooling], Encoder: c.Encoder,
		TokenTypes: c.TokenTypes, RankOutputs: c.RankOutputs, RankPooling: poolings[c.RankPooling]}
}

func (l *llamaModel) KVBytesPerPage(pageSize int) int64 { return l.m.KVBytesPerPage(pageSize, l.typ) }

func (l *llamaModel) NewKV(pages, pageSize int) (KV, error) {
	return l.m.NewKV(pages, pageSize, l.typ)
}

func (l *llamaModel) Forward(kv KV, b *Batch, logits []float32) error {
	lkv, ok := kv.(*llama.KV)
	if !ok {
		return fmt.Errorf("engine: KV of type %T is not a llama KV", kv)
	}
	l.batch = llama.Batch{Tokens: b.Tokens, Pos: b.Pos, Seq: b.Seq, Seqs: b.Seqs, Logits: b.Logits}
	return l.m.Forward(lkv, &l.batch, logits)
}

func (l *llamaModel) ForwardHidden(kv KV, b *Batch, logits, hidden []float32) error {
	lkv, ok := kv.(*llama.KV)
	if !ok {
		return fmt.Errorf("engine: KV of type %T is not a llama KV", kv)
	}
	l.batch = llama.Batch{Tokens: b.Tokens, Pos: b.Pos, Seq: b.Seq, Seqs: b.Seqs, Logits: b.Logits, Hidden: b.Hidden, Types: b.Types}
	return l.m.ForwardHidden(lkv, &l.batch, logits, hidden)
}

func (l *llamaModel) Rank(dst, cls []float32) error { return l.m.Rank(dst, cls) }

func (l *llamaModel) ProjectPooled(v []float32) error { return l.m.ProjectPooled(v) }

// poolings maps a GGUF pooling type to the engine's (none and rank name
// no single vector: the engine's default applies).
var poolings = map[llama.Pooling]Pooling{llama.PoolMean: PoolingMean, llama.PoolCLS: PoolingCLS, llama.PoolLast: PoolingLast,
	llama.PoolRank: PoolingRank}
