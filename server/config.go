package server

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"
)

// Config configures a Server. DefaultConfig gives the documented defaults.
type Config struct {
	// GRPCAddr is the gRPC listener (Inference, Control, grpc.health.v1,
	// reflection), e.g. ":50051" or "127.0.0.1:0".
	GRPCAddr string
	// HTTPAddr is the HTTP listener (/metrics, /healthz, /readyz and routes
	// added with HandleHTTP); empty: no HTTP listener.
	HTTPAddr string
	// AdvertiseHost is the host announced by GetKvEventSources. Empty: the
	// gRPC listener's host if it is not a wildcard, else the hostname.
	AdvertiseHost string

	// EngineName and EngineVersion are reported by GetServerInfo.
	EngineName    string
	EngineVersion string
	// InstanceID identifies this process; empty: a random id per process.
	InstanceID string

	// DrainGrace is how long running requests may finish after a shutdown
	// starts before they are cancelled.
	DrainGrace time.Duration
	// MaxPromptBytes caps GenerateRequest.prompt (PAYLOAD_TOO_LARGE);
	// 0: only gRPC's message size limit applies.
	MaxPromptBytes int
	// ModelDegraded, when set, reports the model health check as DEGRADED
	// with this message (e.g. a --fast-model that failed to load).
	ModelDegraded string

	// HTTP hardening (docs/api.md, "Limits"): a whole request (headers and
	// body) must arrive within HTTPReadTimeout; a non-streaming response
	// must be written within HTTPWriteTimeout (streaming routes set their
	// own deadline per write); idle keep-alive connections close after
	// HTTPIdleTimeout; headers are capped at HTTPMaxHeaderBytes; at most
	// HTTPMaxConns connections are open at once (more wait to be
	// accepted). Zero: no limit (DefaultConfig sets them all).
	HTTPReadTimeout    time.Duration
	HTTPWriteTimeout   time.Duration
	HTTPIdleTimeout    time.Duration
	HTTPMaxHeaderBytes int
	HTTPMaxConns       int

	// TLS, when set, serves both listeners over TLS (HTTP/2 by ALPN on
	// HTTP); its ClientCAs and ClientAuth make it mutual TLS.
	TLS *tls.Config
	// AllowUnauthenticated lets a server without keys listen on a
	// non-loopback address (--allow-unauthenticated); without it Listen
	// refuses (protected mode, docs/design.md §8).
	AllowUnauthenticated bool

	// HTTPConnContext, when set, is the HTTP server's ConnContext (tests
	// use it to shrink socket buffers).
	HTTPConnContext func(ctx context.Context, c net.Conn) context.Context

	// Keys are the API keys (--api-key, --api-key-file, --admin-key); nil
	// or empty: no authentication, one anonymous principal (loopback
	// development). SetKeys replaces them at run time.
	Keys *Keys

	// Metrics collects the Prometheus metrics; nil: New makes one.
	Metrics *Metrics
	// Logger; nil: slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults of `oengine serve`.
func DefaultConfig() Config {
	return Config{
		GRPCAddr:       "127.0.0.1:50051",
		HTTPAddr:       "127.0.0.1:8080",
		EngineName:     "oengine",
		EngineVersion:  "dev",
		DrainGrace:     30 * time.Second,
		MaxPromptBytes: 1 << 20,

		HTTPReadTimeout:    30 * time.Second,
		HTTPWriteTimeout:   60 * time.Second,
		HTTPIdleTimeout:    2 * time.Minute,
		HTTPMaxHeaderBytes: 64 << 10,
		HTTPMaxConns:       1024,
	}
}

// MaxRecvMsgBytes is the largest gRPC request message the server accepts
// (grpc-go's default, stated so it is documented and advertised); a larger
// one fails in the transport with RESOURCE_EXHAUSTED.
const MaxRecvMsgBytes = 4 << 20
