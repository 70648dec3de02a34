package sessions

import (
	"context"
	"log/slog"
	"time"

	"oengine/engine"
	"oengine/kvcache"
)

// State is a session's lifecycle state (wire GenerationSessionState).
type State int

const (
	StateUnspecified State = iota
	StateIdle              // live, no turn running, pins held
	StateRunning           // live, a turn (mutating or branch) is running
	StateExpired           // tombstone: the lease ran out
	StateClosed            // tombstone: closed by a client or at shutdown
	StateEvicted           // live, idle, pins dropped under memory pressure
)

func (s State) String() string {
	return [...]string{"UNSPECIFIED", "IDLE", "RUNNING", "EXPIRED", "CLOSED", "EVICTED"}[s]
}

// Live reports whether the session can still be used.
func (s State) Live() bool { return s == StateIdle || s == StateRunning || s == StateEvicted }

// Mode is a continuation mode (wire ContinuationMode; same numbers).
type Mode int

const (
	ModeUnspecified Mode = iota // treated as ModeAppend
	ModeAppend                  // retained + input; retain input and output
	ModeDropOutput              // retained + input; retain input only
	ModeBranch                  // retained[:from] + input; retain nothing
	ModeReplace                 // retained[:from] + input; retain that, input and output
)

func (m Mode) String() string {
	switch m {
	case ModeUnspecified:
		return "UNSPECIFIED"
	case ModeAppend:
		return "APPEND"
	case ModeDropOutput:
		return "DROP_OUTPUT"
	case ModeBranch:
		return "BRANCH"
	case ModeReplace:
		return "REPLACE"
	}
	return "UNKNOWN"
}

// mutating reports whether a turn of this mode changes the session.
func (m Mode) mutating() bool { return m != ModeBranch }

// AllModes are the modes this implementation supports.
var AllModes = []Mode{ModeAppend, ModeDropOutput, ModeBranch, ModeReplace}

// CloseStatus is the outcome of Close (wire CloseStatus).
type CloseStatus int

const (
	CloseUnspecified   CloseStatus = iota
	CloseClosed                    // closed now
	CloseAlreadyClosed             // was closed before (tombstone)
	CloseExpired                   // had expired (tombstone)
)

// Engine is what the manager needs of one model's engine; *engine.Engine
// implements it.
type Engine interface {
	Submit(ctx context.Context, r engine.Request) (*engine.Stream, error)
	Cache() *kvcache.Cache
	Tokenizer() engine.Tokenizer
	Limits() engine.Limits
}

// Clock gives the time; tests inject a fake one.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Defaults of Config.
const (
	DefaultLease       = 10 * time.Minute
	DefaultMaxLease    = time.Hour
	DefaultRetention   = time.Hour // docs/design.md §2 --session-retention
	DefaultMaxSessions = 1024
	DefaultReap        = time.Second
)

// Config configures a Manager. Zero values take the defaults above.
type Config struct {
	// InstanceID is this server's instance_id: every ref must name it.
	InstanceID string
	// Models resolves a (canonical) model name to its engine.
	Models func(model string) (Engine, bool)

	DefaultLease time.Duration // lease when the request has none
	MaxLease     time.Duration // longer requests are clamped to this
	Retention    time.Duration // how long closed/expired tombstones answer
	MaxSessions  int           // live sessions at once

	// MaxRetainedTokens caps the tokens one session retains (0: the
	// model's context length). A turn's default max_tokens is cut to what
	// the session can still retain.
	MaxRetainedTokens int
	// MaxPinnedPages caps the pages all sessions pin together (0: half
	// the pool of each model); MaxPinnedPagesPerSession caps one session
	// (0: what MaxRetainedTokens needs). Counted as reservations before
	// a turn is accepted, so the pins of a finished turn always fit.
	MaxPinnedPages           int
	MaxPinnedPagesPerSession int

	// EvictIdle lets a request that would exceed MaxPinnedPages drop the
	// pins of idle sessions (least recently used first; state EVICTED).
	EvictIdle bool
	// Modes offered (nil: AllModes). Others answer CodeUnsupported.
	Modes []Mode

	ReapInterval time.Duration // expiry sweep period (the clock is also checked on every access)
	Clock        Clock
	Logger       *slog.Logger
}

func (c *Config) fill() {
	if c.DefaultLease <= 0 {
		c.DefaultLease = DefaultLease
	}
	if c.MaxLease <= 0 {
		c.MaxLease = DefaultMaxLease
	}
	if c.DefaultLease > c.MaxLease {
		c.DefaultLease = c.MaxLease
	}
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.Modes == nil {
		c.Modes = AllModes
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = DefaultReap
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
