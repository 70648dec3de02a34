package server

import (
	"context"

	"oengine/engine"
	"oengine/kvcache"
)

// Backend is what the server needs of one served model's engine. FromEngine
// adapts *engine.Engine; tests use a fake.
type Backend interface {
	// ModelName is the name the model is served under (before aliases).
	ModelName() string
	// Limits are the engine's fixed figures.
	Limits() engine.Limits
	// Submit validates and admits a request. A non-nil error is returned
	// before acceptance (an *engine.Error for validation and admission).
	Submit(ctx context.Context, r engine.Request) (Stream, error)
	// Abort cancels a live request; engine.ErrNotFound or
	// engine.ErrAlreadyFinished (retention window) otherwise.
	Abort(id string) error
	// AbortAll cancels every live request and returns how many.
	AbortAll() int
	// Load is a live snapshot for GetLoad and metrics.
	Load() engine.LoadFigures
	// Stats are cumulative counters for metrics.
	Stats() engine.Stats
	// Drain stops admitting: later submits fail with engine.CodeDraining.
	Drain()
	// TokenText is the text of one token id (for TokenInfo.token), "" if
	// unknown.
	TokenText(id int32) string
	// SubscribeKV subscribes to the KV cache's event feed
	// (kvcache.Cache.Subscribe).
	SubscribeKV(fromSeq uint64, snapshot bool) (*kvcache.Subscription, error)
}

// Stream is an accepted request's event queue (engine.Stream).
type Stream interface {
	ID() string
	// Next blocks for the next event; io.EOF after the terminal one.
	Next(ctx context.Context) (engine.Event, error)
	// Cancel aborts the request; safe to call twice and after the end.
	Cancel()
}
