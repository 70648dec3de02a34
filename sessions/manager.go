// Package sessions implements application generation sessions (issue 5):
// a Manager keeps each session's retained tokens and pins their KV pages in
// the engine's paged cache under a lease; continuation turns (APPEND,
// DROP_OUTPUT, BRANCH, REPLACE) become ordinary engine requests whose
// retained tokens are committed only when the turn succeeds. The package
// knows nothing of gRPC: errors are typed (*Error with a Code) and the
// server maps them (docs/design.md §1, §4).
package sessions

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxIDBytes bounds caller-supplied session ids (the server's own cap for
// clients is 256 bytes; it prefixes ids with the caller's key name).
const MaxIDBytes = 512

// Manager owns the generation sessions of one server instance: identity,
// lease and expiry, tombstones, the busy rule, pins and their budgets.
// Its methods are safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex          // protects sessions, liveN, tomb and the sessions' fields
	sessions map[string]*session // live sessions and tombstones
	liveN    int                 // live sessions
	tomb     []*session          // tombstones, oldest first (purge order)
	closed   bool

	stop     chan struct{}
	reaperWG sync.WaitGroup
}

// New returns a manager and starts its reaper goroutine (stopped by Close).
func New(cfg Config) (*Manager, error) {
	cfg.fill()
	if cfg.InstanceID == "" {
		return nil, errors.New("sessions: empty instance id")
	}
	if cfg.Models == nil {
		return nil, errors.New("sessions: no model resolver")
	}
	for _, md := range cfg.Modes {
		if md < ModeAppend || md > ModeReplace {
			return nil, fmt.Errorf("sessions: unknown mode %d", md)
		}
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, sessions: make(map[string]*session), stop: make(chan struct{})}
	m.reaperWG.Add(1)
	go m.reaper()
	return m, nil
}

// InstanceID returns the owner id every ref must name.
func (m *Manager) InstanceID() string { return m.cfg.InstanceID }

// Close stops the reaper and closes every live session: running turns are
// cancelled and all pins released. Idempotent.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	close(m.stop)
	now := m.cfg.Clock.Now()
	for _, s := range m.sessions {
		if s.live() {
			m.endLocked(s, StateClosed, now)
		}
	}
	m.mu.Unlock()
	m.reaperWG.Wait()
}

func (m *Manager) reaper() {
	defer m.reaperWG.Done()
	t := time.NewTicker(m.cfg.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.Reap()
		}
	}
}

// Reap expires idle sessions whose lease ran out (releasing their pins)
// and forgets tombstones older than the retention window. The reaper calls
// it periodically; every access also checks the clock, so a lease never
// outlives its deadline by a reap interval.
func (m *Manager) Reap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	for _, s := range m.sessions {
		m.expireLocked(s, now)
	}
	m.purgeLocked(now)
}

// expireLocked ends s if its lease ran out. A running session never expires.
func (m *Manager) expireLocked(s *session, now time.Time) {
	if s.live() && len(s.running) == 0 && !now.Before(s.expiresAt()) {
		m.endLocked(s, StateExpired, now)
	}
}

// endLocked turns a live session into a tombstone: running turns are
// cancelled (they end within one engine step and commit nothing), pins are
// released, the retained tokens dropped.
func (m *Manager) endLocked(s *session, st State, now time.Time) {
	for t := range s.running {
		t.stream.Cancel()
	}
	s.eng.Cache().Unpin(s.owner)
	s.ended, s.endedAt = st, now
	s.tokens, s.turnOffsets = nil, nil
	s.resident, s.pinned, s.reserve = 0, 0, 0
	s.evicted = false
	s.mutating = nil
	s.running = nil
	m.liveN--
	m.tomb = append(m.tomb, s)
	m.log.Debug("sessions: ended", "session", s.id, "state", st.String())
}

// purgeLocked forgets tombstones past the retention window, and the oldest
// ones beyond 16 tombstones per allowed live session (a memory bound).
func (m *Manager) purgeLocked(now time.Time) {
	i := 0
	for ; i < len(m.tomb); i++ {
		t := m.tomb[i]
		if now.Sub(t.endedAt) < m.cfg.Retention && len(m.tomb)-i <= 16*m.cfg.MaxSessions {
			break
		}
		if m.sessions[t.id] == t {
			delete(m.sessions, t.id)
		}
	}
	m.tomb = m.tomb[i:]
}

// lookupLocked resolves a ref to a session (live or tombstone). It checks
// the ref's form and owner first, so nothing runs for a foreign ref.
func (m *Manager) lookupLocked(ref Ref) (*session, error) {
	switch {
	case ref.SessionID == "":
		return nil, errorf(CodeInvalid, "empty session_id in the session ref")
	case ref.Owner == "":
		return nil, errorf(CodeInvalid, "empty owner_instance_id in the session ref")
	case ref.Owner != m.cfg.InstanceID:
		return nil, errorf(CodeOwnerMismatch, "session %q is owned by instance %q, this is %q",
			ref.SessionID, ref.Owner, m.cfg.InstanceID)
	}
	now := m.cfg.Clock.Now()
	m.purgeLocked(now)
	s := m.sessions[ref.SessionID]
	if s == nil {
		return nil, errorf(CodeNotFound, "session %q not found", ref.SessionID)
	}
	m.expireLocked(s, now)
	return s, nil
}

// liveLocked is lookupLocked for operations that need a live session.
func (m *Manager) liveLocked(ref Ref) (*session, error) {
	s, err := m.lookupLocked(ref)
	if err != nil {
		return nil, err
	}
	switch s.ended {
	case StateExpired:
		return nil, errorf(CodeExpired, "session %q expired at %s", s.id, s.endedAt.UTC().Format(time.RFC3339Nano))
	case StateClosed:
		return nil, errorf(CodeClosed, "session %q is closed", s.id)
	}
	return s, nil
}

func (m *Manager) ref(s *session) Ref { return Ref{SessionID: s.id, Owner: m.cfg.InstanceID} }

// Get reports a session; tombstones answer with state CLOSED or EXPIRED.
// With includeTokens the retained ids and turn offsets are included.
func (m *Manager) Get(ref Ref, includeTokens bool) (Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.lookupLocked(ref)
	if err != nil {
		return Info{}, err
	}
	return s.info(m.ref(s), includeTokens), nil
}

// Renew restarts the lease from now, with a new length when lease is set
// (zero: CodeInvalid; above the maximum: clamped), else the length granted
// last time.
func (m *Manager) Renew(ref Ref, lease *time.Duration) (Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.liveLocked(ref)
	if err != nil {
		return Info{}, err
	}
	if lease != nil {
		l, err := m.grantLease(lease)
		if err != nil {
			return Info{}, err
		}
		s.lease = l
	}
	s.lastUsed = m.cfg.Clock.Now()
	return s.info(m.ref(s), false), nil
}

// CloseSession closes a session: a running generation is cancelled first,
// pins are released, and a tombstone answers for the retention window.
// A tombstone answers CloseAlreadyClosed or CloseExpired (no error).
func (m *Manager) CloseSession(ref Ref) (CloseStatus, Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.lookupLocked(ref)
	if err != nil {
		return CloseUnspecified, Info{}, err
	}
	st := CloseClosed
	switch s.ended {
	case StateClosed:
		st = CloseAlreadyClosed
	case StateExpired:
		st = CloseExpired
	default:
		m.endLocked(s, StateClosed, m.cfg.Clock.Now())
	}
	return st, s.info(m.ref(s), false), nil
}

// grantLease applies the lease rule: absent -> default, zero -> invalid,
// above the maximum -> clamped.
func (m *Manager) grantLease(lease *time.Duration) (time.Duration, error) {
	switch {
	case lease == nil:
		return m.cfg.DefaultLease, nil
	case *lease <= 0:
		return 0, errorf(CodeInvalid, "lease must be positive (absent means the default %s)", m.cfg.DefaultLease)
	case *lease > m.cfg.MaxLease:
		return m.cfg.MaxLease, nil
	}
	return *lease, nil
}

// checkID validates a caller-supplied session id.
func checkID(id string) error {
	if len(id) > MaxIDBytes {
		return errorf(CodeInvalid, "session_id is %d bytes, at most %d", len(id), MaxIDBytes)
	}
	if !utf8.ValidString(id) {
		return errorf(CodeInvalid, "session_id is not valid UTF-8")
	}
	for _, r := range id {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return errorf(CodeInvalid, "session_id contains whitespace or a control character")
		}
	}
	return nil
}

// mintID returns "gs-" and 128 random bits in hex.
func mintID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("sessions: minting an id: %w", err)
	}
	return "gs-" + hex.EncodeToString(b[:]), nil
}

// List returns the ids of live sessions, sorted (diagnostics and tests).
func (m *Manager) List() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for id, s := range m.sessions {
		if s.live() {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}
