package sessions

import (
	"slices"
	"time"
)

// budget is the pin budget of one model's KV pool.
type budget struct {
	pageSize    int
	maxRetained int // most tokens one sequence (hence one session) can hold
	perSession  int // pages one session may pin
	global      int // pages all sessions of this model may pin together
	maxOutput   int // the engine's cap on one output
}

func (m *Manager) budgetFor(eng Engine) budget {
	lim := eng.Limits()
	b := budget{
		pageSize:    max(lim.PageSize, 1),
		maxRetained: lim.MaxOutputTokens + 1,
		maxOutput:   lim.MaxOutputTokens,
	}
	b.perSession = b.pages(b.maxRetained)
	if m.cfg.MaxPinnedPagesPerSession > 0 {
		b.perSession = min(b.perSession, m.cfg.MaxPinnedPagesPerSession)
	}
	b.maxRetained = min(b.maxRetained, b.perSession*b.pageSize)
	b.global = lim.TotalPages / 2
	if m.cfg.MaxPinnedPages > 0 {
		b.global = m.cfg.MaxPinnedPages
	}
	b.perSession = min(b.perSession, b.global)
	b.maxRetained = min(b.maxRetained, b.perSession*b.pageSize)
	return b
}

// pages is the number of pages n tokens occupy.
func (b budget) pages(n int) int { return (n + b.pageSize - 1) / b.pageSize }

// othersLocked sums the claims of the other live sessions of s's model and
// lists those idle ones that pin pages.
func (m *Manager) othersLocked(s *session) (claims int, idle []*session) {
	for _, o := range m.sessions {
		if o == s || !o.live() || o.eng != s.eng {
			continue
		}
		claims += o.claim()
		if len(o.running) == 0 && o.pinned > 0 {
			idle = append(idle, o)
		}
	}
	return claims, idle
}

// availableLocked returns the pages s may claim now: the per-session
// budget, bounded by what the global budget leaves after the other
// sessions' claims. When that is below want and EvictIdle is on, idle
// sessions are evicted (least recently used first) until it is not.
func (m *Manager) availableLocked(s *session, b budget, want int) int {
	others, idle := m.othersLocked(s)
	avail := func() int { return max(min(b.perSession, b.global-others), 0) }
	if avail() < want && m.cfg.EvictIdle {
		slices.SortFunc(idle, func(a, c *session) int { return a.lastUsed.Compare(c.lastUsed) })
		for _, o := range idle {
			if avail() >= want {
				break
			}
			others -= o.claim()
			m.evictLocked(o)
		}
	}
	return avail()
}

// reserveLocked makes room for s to pin up to need pages when its running
// turn commits (evicting idle sessions first when EvictIdle is on). On
// success s.reserve = need.
func (m *Manager) reserveLocked(s *session, b budget, need int) error {
	if need > b.perSession {
		return errorf(CodeBudget, "session %q would pin %d pages, the per-session limit is %d (%d tokens)",
			s.id, need, b.perSession, b.maxRetained)
	}
	if avail := m.availableLocked(s, b, need); need > avail {
		return errorf(CodeBudget, "session %q would pin %d pages, %d of the %d pages all sessions may pin are free",
			s.id, need, avail, b.global)
	}
	s.reserve = need
	return nil
}

// fitsLocked reports whether s may pin pages pages in all (the global
// budget after the other sessions' claims).
func (m *Manager) fitsLocked(s *session, b budget, pages int) bool {
	others, _ := m.othersLocked(s)
	return pages <= b.perSession && others+pages <= b.global
}

// evictLocked drops an idle session's pins; it keeps its tokens and its
// next turn recomputes what is no longer cached.
func (m *Manager) evictLocked(s *session) {
	s.eng.Cache().Unpin(s.owner)
	s.pinned, s.resident = 0, 0
	s.evicted = true
	m.log.Info("sessions: evicted idle session under pin pressure", "session", s.id)
}

// EvictIdle drops the pins of idle sessions of model, least recently used
// first, until at least pages pages were unpinned or none is left; it
// returns the pages unpinned. The server may call it under memory
// pressure when Config.EvictIdle is on; it does nothing otherwise.
func (m *Manager) EvictIdle(model string, pages int) int {
	if !m.cfg.EvictIdle {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var idle []*session
	for _, s := range m.sessions {
		if s.live() && s.model == model && len(s.running) == 0 && s.pinned > 0 {
			idle = append(idle, s)
		}
	}
	slices.SortFunc(idle, func(a, c *session) int { return a.lastUsed.Compare(c.lastUsed) })
	freed := 0
	for _, s := range idle {
		if freed >= pages {
			break
		}
		freed += s.pinned
		m.evictLocked(s)
	}
	return freed
}

// Capabilities are the figures advertised in ModelInfo.sessions; each is
// what the manager enforces for that model.
type Capabilities struct {
	Modes                 []Mode
	DefaultLease          time.Duration
	MaxLease              time.Duration
	MaxSessions           int
	MaxRetainedTokens     int // per session
	MaxPinnedPages        int // all sessions of the model together
	OwnerAffinityRequired bool
	MigrationSupported    bool
}

// Capabilities reports the session figures for model (false: unknown model).
func (m *Manager) Capabilities(model string) (Capabilities, bool) {
	eng, ok := m.cfg.Models(model)
	if !ok {
		return Capabilities{}, false
	}
	b := m.budgetFor(eng)
	return Capabilities{
		Modes:                 slices.Clone(m.cfg.Modes),
		DefaultLease:          m.cfg.DefaultLease,
		MaxLease:              m.cfg.MaxLease,
		MaxSessions:           m.cfg.MaxSessions,
		MaxRetainedTokens:     b.maxRetained,
		MaxPinnedPages:        b.global,
		OwnerAffinityRequired: true,
		MigrationSupported:    false,
	}, true
}
