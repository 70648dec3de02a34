package sessions

import (
	"slices"
	"time"
)

// Ref names a session on the wire (GenerationSessionRef).
type Ref struct {
	SessionID string
	Owner     string // owner_instance_id: must be this server's instance id
}

// Info is a snapshot of a session, what every session RPC reports.
type Info struct {
	Ref        Ref
	Model      string
	LoRA       string
	State      State
	Lease      time.Duration // granted
	ExpiresAt  time.Time     // LastUsedAt + Lease (zero for tombstones past their lease)
	CreatedAt  time.Time
	LastUsedAt time.Time

	RetainedTokens int // tokens a continuation sees (0 on tombstones)
	ResidentTokens int // retained tokens whose K/V sits in pinned pages
	PinnedPages    int // distinct pages pinned by the session
	Turns          int // retained turns (len(TurnOffsets))

	// Only with includeTokens: the retained token ids and the start offset
	// of each retained turn's input in them.
	Tokens      []int32
	TurnOffsets []int
}

// session is one entry of the manager. Every field is protected by
// Manager.mu.
type session struct {
	id, model, lora string
	eng             Engine
	owner           string // pin owner key in the cache

	lease    time.Duration
	created  time.Time
	lastUsed time.Time // end of the last activity: the lease counts from here

	// Tombstone: ended is StateExpired or StateClosed, at endedAt.
	ended   State
	endedAt time.Time

	tokens      []int32 // retained tokens
	turnOffsets []int   // start of each retained turn's input in tokens
	resident    int     // retained tokens whose K/V is in the pinned pages
	pinned      int     // pages pinned (the cache's count after the last Repin)
	evicted     bool    // pins dropped under pressure; tokens kept

	mutating *Turn              // the running mutating turn, if any
	running  map[*Turn]struct{} // every running turn (mutating and branches)
	reserve  int                // pages the running mutating turn may pin when it commits
}

func (s *session) live() bool { return s.ended == StateUnspecified }

func (s *session) state() State {
	switch {
	case !s.live():
		return s.ended
	case len(s.running) > 0:
		return StateRunning
	case s.evicted:
		return StateEvicted
	}
	return StateIdle
}

func (s *session) expiresAt() time.Time { return s.lastUsed.Add(s.lease) }

// claim is the pages the session counts against the global budget: what it
// pins now, or what its running turn may pin, whichever is larger.
func (s *session) claim() int { return max(s.pinned, s.reserve) }

func (s *session) info(self Ref, includeTokens bool) Info {
	in := Info{
		Ref:            self,
		Model:          s.model,
		LoRA:           s.lora,
		State:          s.state(),
		Lease:          s.lease,
		CreatedAt:      s.created,
		LastUsedAt:     s.lastUsed,
		RetainedTokens: len(s.tokens),
		ResidentTokens: s.resident,
		PinnedPages:    s.pinned,
		Turns:          len(s.turnOffsets),
	}
	if s.live() {
		in.ExpiresAt = s.expiresAt()
	}
	if s.evicted {
		in.ResidentTokens = 0
	}
	if includeTokens {
		in.Tokens = slices.Clone(s.tokens)
		in.TurnOffsets = slices.Clone(s.turnOffsets)
		if in.Tokens == nil {
			in.Tokens = []int32{}
		}
	}
	return in
}
