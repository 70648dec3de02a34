package server

import (
	"context"

	"oengine/engine"
	"oengine/kvcache"
)

// FromEngine adapts an *engine.Engine to Backend.
func FromEngine(e *engine.Engine) Backend { return engineBackend{e} }

type engineBackend struct{ e *engine.Engine }

func (b engineBackend) ModelName() string        { return b.e.ModelName() }
func (b engineBackend) Limits() engine.Limits    { return b.e.Limits() }
func (b engineBackend) Abort(id string) error    { return b.e.Abort(id) }
func (b engineBackend) AbortAll() int            { return b.e.AbortAll() }
func (b engineBackend) Load() engine.LoadFigures { return b.e.Load() }
func (b engineBackend) Stats() engine.Stats      { return b.e.Stats() }
func (b engineBackend) Drain()                   { b.e.Drain() }
func (b engineBackend) SubscribeKV(from uint64, snap bool) (*kvcache.Subscription, error) {
	return b.e.Cache().Subscribe(from, snap)
}

func (b engineBackend) Submit(ctx context.Context, r engine.Request) (Stream, error) {
	st, err := b.e.Submit(ctx, r)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// TokenText decodes one token on its own (a byte-fallback piece that is
// not valid UTF-8 alone comes out as the decoder renders it).
func (b engineBackend) TokenText(id int32) string {
	tok := b.e.Tokenizer()
	if tok == nil || id < 0 || int(id) >= b.e.Limits().Vocab {
		return ""
	}
	d := tok.NewDecoder(false)
	return validUTF8(d.Push(id) + d.Flush())
}
