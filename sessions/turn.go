package sessions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"oengine/engine"
	"oengine/kvcache"
	"oengine/model/tokenizer"
)

// OpenRequest opens a session.
type OpenRequest struct {
	ID    string         // empty: minted (128 random bits)
	Model string         // canonical model name, required
	LoRA  string         // adapter name; must be empty (no LoRA support yet)
	Lease *time.Duration // nil: default; <= 0: invalid; above max: clamped
	// Initial input, prefilled and pinned before Open returns: Prompt is
	// tokenized with the BOS rule (it starts the sequence), TokenIDs are
	// used as given (they win when non-nil).
	Prompt   string
	TokenIDs []int32
}

// Continuation is a Generate request's session part.
type Continuation struct {
	Ref       Ref
	Mode      Mode
	FromToken *int   // BRANCH / REPLACE only: cut point in the retained tokens (nil: the end)
	Model     string // the request's canonical model: must be the session's
	LoRA      string // must be the session's
}

// Open creates a session. With initial input it is prefilled and pinned
// before Open returns; if that fails (ctx, budget, engine) no session is
// left behind and the id stays free. Engine errors are returned as they
// are (*engine.Error).
func (m *Manager) Open(ctx context.Context, r OpenRequest) (Info, error) {
	if r.Model == "" {
		return Info{}, errorf(CodeInvalid, "model is required")
	}
	eng, ok := m.cfg.Models(r.Model)
	if !ok {
		return Info{}, errorf(CodeModelNotFound, "model %q not found", r.Model)
	}
	if r.LoRA != "" {
		return Info{}, errorf(CodeUnsupported, "LoRA adapters are not supported (lora_name %q)", r.LoRA)
	}
	lease, err := m.grantLease(r.Lease)
	if err != nil {
		return Info{}, err
	}
	if r.ID != "" {
		if err := checkID(r.ID); err != nil {
			return Info{}, err
		}
	}

	m.mu.Lock()
	s, err := m.createLocked(r.ID, r.Model, eng, lease)
	if err != nil {
		m.mu.Unlock()
		return Info{}, err
	}
	if len(r.TokenIDs) == 0 && r.Prompt == "" {
		in := s.info(m.ref(s), false)
		m.mu.Unlock()
		return in, nil
	}
	greedy := 0.0 // the one sampled token is discarded: make it cheap and deterministic
	req := engine.Request{Prompt: r.Prompt, TokenIDs: r.TokenIDs, MaxTokens: 1}
	req.Sampling.Temperature = &greedy
	t, err := m.beginLocked(ctx, s, ModeDropOutput, nil, req, true)
	m.mu.Unlock()
	if err != nil {
		m.remove(s)
		return Info{}, err
	}
	ev := t.Wait()
	if ev.Kind != engine.EventDone {
		m.remove(s)
		if ev.Err != nil {
			return Info{}, ev.Err
		}
		return Info{}, errorf(CodeInternal, "initial prefill of session %q failed", s.id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return s.info(m.ref(s), false), nil
}

func (m *Manager) createLocked(id, model string, eng Engine, lease time.Duration) (*session, error) {
	if m.closed {
		return nil, errorf(CodeInternal, "session manager closed")
	}
	now := m.cfg.Clock.Now()
	m.purgeLocked(now)
	if id != "" {
		if old := m.sessions[id]; old != nil {
			return nil, errorf(CodeDuplicate, "session %q already exists (state %s)", id, old.state())
		}
	} else {
		for id == "" || m.sessions[id] != nil {
			var err error
			if id, err = mintID(); err != nil {
				return nil, err
			}
		}
	}
	if m.liveN >= m.cfg.MaxSessions {
		return nil, errorf(CodeBudget, "%d sessions are open, the limit is %d", m.liveN, m.cfg.MaxSessions)
	}
	s := &session{
		id: id, model: model, eng: eng, owner: "session:" + id,
		lease: lease, created: now, lastUsed: now,
		running: make(map[*Turn]struct{}),
	}
	m.sessions[id] = s
	m.liveN++
	return s, nil
}

// remove deletes a session whose opening failed (it never existed for
// clients). A session closed meanwhile stays a tombstone.
func (m *Manager) remove(s *session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions[s.id] != s || !s.live() {
		return
	}
	for t := range s.running {
		t.stream.Cancel()
	}
	s.eng.Cache().Unpin(s.owner)
	delete(m.sessions, s.id)
	m.liveN--
}

// Begin starts a continuation turn: it validates the ref (owner, state),
// the binding, the mode and the busy rule, reserves pins, and submits r
// with TokenIDs = the retained tokens (up to FromToken for BRANCH and
// REPLACE) + r's input. r's input is its TokenIDs, or its Prompt
// tokenized without BOS and with special tokens (with the BOS rule when
// the session retains nothing). Errors before acceptance are *Error or
// the engine's *engine.Error. The caller must drive the Turn to its
// terminal event (Next) or call Close.
func (m *Manager) Begin(ctx context.Context, c Continuation, r engine.Request) (*Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.liveLocked(c.Ref)
	if err != nil {
		return nil, err
	}
	mode := c.Mode
	if mode == ModeUnspecified {
		mode = ModeAppend
	}
	if mode < ModeAppend || mode > ModeReplace {
		return nil, errorf(CodeInvalid, "unknown continuation mode %d", int(c.Mode))
	}
	if !slices.Contains(m.cfg.Modes, mode) {
		return nil, errorf(CodeUnsupported, "continuation mode %s is not supported", mode)
	}
	switch {
	case c.Model != s.model:
		return nil, errorf(CodeInvalid, "session %q is bound to model %q, the request names %q", s.id, s.model, c.Model)
	case c.LoRA != s.lora:
		return nil, errorf(CodeInvalid, "session %q is bound to LoRA %q, the request names %q", s.id, s.lora, c.LoRA)
	case r.N > 1 && mode != ModeBranch:
		return nil, errorf(CodeInvalid, "num_sequences > 1 is only allowed in BRANCH mode")
	case r.CacheSalt != "":
		return nil, errorf(CodeInvalid, "cache_salt cannot be set on a session continuation")
	case c.FromToken != nil && mode != ModeBranch && mode != ModeReplace:
		return nil, errorf(CodeInvalid, "from_token is only allowed in BRANCH and REPLACE mode")
	case c.FromToken != nil && (*c.FromToken < 0 || *c.FromToken > len(s.tokens)):
		return nil, errorf(CodeInvalid, "from_token %d outside the %d retained tokens", *c.FromToken, len(s.tokens))
	case mode.mutating() && s.mutating != nil:
		return nil, errorf(CodeBusy, "session %q is busy: a %s turn is running", s.id, s.mutating.mode)
	}
	return m.beginLocked(ctx, s, mode, c.FromToken, r, false)
}

// beginLocked builds and submits a turn of s (checks done by the caller).
func (m *Manager) beginLocked(ctx context.Context, s *session, mode Mode, from *int, r engine.Request, initial bool) (*Turn, error) {
	base := s.tokens
	if from != nil {
		base = base[:*from]
	}
	input := r.TokenIDs
	if input == nil && r.Prompt != "" {
		input = s.eng.Tokenizer().Encode(r.Prompt, tokenizer.EncodeOptions{AddSpecial: len(base) == 0, ParseSpecial: true})
	}
	b := m.budgetFor(s.eng)
	if mode.mutating() {
		if err := m.budgetTurnLocked(s, b, len(base)+len(input), &r); err != nil {
			return nil, err
		}
	}
	t := &Turn{m: m, s: s, mode: mode, initial: initial, baseLen: len(base), b: b, maxTokens: r.MaxTokens}
	t.inputLen.Store(int64(len(input)))
	r.TokenIDs = append(slices.Clone(base), input...)
	r.Prompt = ""
	r.OnRetain = nil
	if mode.mutating() {
		r.OnRetain = t.onRetain
	}
	r.Prefix = m.prefixLocked(s, len(base), r)
	st, err := s.eng.Submit(ctx, r) // owns r.Prefix, whatever the outcome
	if err != nil {
		if mode.mutating() {
			s.reserve = 0
		}
		return nil, err
	}
	t.stream = st
	s.running[t] = struct{}{}
	if mode.mutating() {
		s.mutating = t
	}
	return t, nil
}

// prefixLocked returns a table over the session's pinned pages holding the
// K/V of the first min(resident, n) retained tokens, for the engine to
// reuse, the partly filled last page included (docs/api.md, sessions:
// cached_prompt_tokens). nil when nothing is resident (no pins, evicted)
// or the request computes every position anyway.
func (m *Manager) prefixLocked(s *session, n int, r engine.Request) *kvcache.Table {
	n = min(n, s.resident)
	if n <= 0 || s.evicted || r.BypassPrefixCache || r.PromptLogprobs != nil {
		return nil
	}
	t, err := s.eng.Cache().PinnedTable(s.owner, kvcache.Namespace{Salt: r.CacheSalt}, n)
	if err != nil {
		m.log.Warn("sessions: retained K/V not reusable", "session", s.id, "err", err)
		return nil
	}
	return t
}

// Turn is one running continuation. Next, AppendInput, CloseInput, Wait
// and Close belong to one goroutine; Cancel is safe from any.
type Turn struct {
	m       *Manager
	s       *session
	mode    Mode
	initial bool // the open's initial input: retained, not counted as a turn
	baseLen int  // retained tokens the request starts with
	b       budget
	// maxTokens is the request's output cap (0: the engine's); streamed
	// input grows the reservation to base + input + maxTokens.
	maxTokens int
	stream    *engine.Stream

	inputLen atomic.Int64 // new input tokens so far

	mu        sync.Mutex // protects the retained result below (written on the engine's step loop)
	fork      *kvcache.Table
	retTokens []int32
	resident  int
	retErr    error

	finished bool // terminal event seen (the consumer's goroutine)
}

// ID returns the engine request id.
func (t *Turn) ID() string { return t.stream.ID() }

// Mode returns the turn's (resolved) mode.
func (t *Turn) Mode() Mode { return t.mode }

// BaseLen returns how many retained tokens the request starts with.
func (t *Turn) BaseLen() int { return t.baseLen }

// Prefilled returns how many of the turn's new input tokens have their K/V
// computed (for input acknowledgements).
func (t *Turn) Prefilled() int { return max(0, t.stream.Prefilled()-t.baseLen) }

// Cancel aborts the turn; the session stays as it was.
func (t *Turn) Cancel() { t.stream.Cancel() }

// AppendInput adds streamed input (the request was begun with OpenInput).
// A mutating turn refuses input beyond what the session can retain.
func (t *Turn) AppendInput(ids []int32) error {
	if t.mode.mutating() {
		if err := t.grow(len(ids)); err != nil {
			return err
		}
	}
	if err := t.stream.AppendInput(ids); err != nil {
		return err
	}
	t.inputLen.Add(int64(len(ids)))
	return nil
}

// grow extends a streamed mutating turn's reservation to cover n more
// input tokens (and its max_tokens of output).
func (t *Turn) grow(n int) error {
	in := t.baseLen + int(t.inputLen.Load()) + n
	if in > t.b.maxRetained {
		return errorf(CodeBudget, "session input of %d tokens exceeds the %d tokens a session retains", in, t.b.maxRetained)
	}
	m, s := t.m, t.s
	m.mu.Lock()
	defer m.mu.Unlock()
	if !s.live() || s.mutating != t {
		return errorf(CodeClosed, "session %q is no longer running this turn", s.id)
	}
	need := min(t.b.pages(in+t.maxTokens), t.b.perSession)
	if need <= s.reserve {
		return nil
	}
	return m.reserveLocked(s, t.b, need)
}

// CloseInput ends streamed input.
func (t *Turn) CloseInput() error { return t.stream.CloseInput() }

// onRetain runs on the engine's step loop when output 0 finished normally:
// it keeps a fork of the pages to retain until the terminal event decides.
func (t *Turn) onRetain(rt engine.Retained) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(rt.Tokens)
	if t.mode == ModeDropOutput {
		n = min(n, t.baseLen+int(t.inputLen.Load()))
	}
	keep := min(n, rt.Computed, rt.Table.Len())
	fork, err := t.s.eng.Cache().ForkPrefix(rt.Table, keep)
	if err != nil {
		t.retErr = err
		return
	}
	t.fork, t.retTokens, t.resident = fork, rt.Tokens[:n], keep
}

// Next returns the turn's next engine event. At the terminal event the
// turn ends: a successful mutating turn commits its tokens and pins
// (if that fails, the event becomes an error event and the session is
// unchanged); any other outcome leaves the session as it was.
func (t *Turn) Next(ctx context.Context) (engine.Event, error) {
	ev, err := t.stream.Next(ctx)
	if err != nil || !ev.Terminal() {
		return ev, err
	}
	return t.finish(ev), nil
}

// Wait drains the turn to its terminal event and returns it.
func (t *Turn) Wait() engine.Event {
	for {
		ev, err := t.Next(context.Background())
		if err != nil {
			return engine.Event{Kind: engine.EventError, Err: &engine.Error{Code: engine.CodeInternal, Message: err.Error()}}
		}
		if ev.Terminal() {
			return ev
		}
	}
}

// Close ends a turn whose consumer stops early: it cancels it and drains
// it to its terminal event (within one engine step). Idempotent.
func (t *Turn) Close() {
	if t.finished {
		return
	}
	t.stream.Cancel()
	t.Wait()
}

func (t *Turn) finish(ev engine.Event) engine.Event {
	if t.finished {
		return ev
	}
	t.finished = true
	t.mu.Lock()
	fork, tokens, resident, retErr := t.fork, t.retTokens, t.resident, t.retErr
	t.fork = nil
	t.mu.Unlock()

	m, s := t.m, t.s
	cache := s.eng.Cache()
	defer cache.Release(fork)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(s.running, t)
	if s.mutating == t {
		s.mutating, s.reserve = nil, 0
	}
	if !s.live() {
		return ev
	}
	s.lastUsed = m.cfg.Clock.Now()
	if ev.Kind != engine.EventDone || !t.mode.mutating() {
		return ev
	}
	var err error
	switch {
	case retErr != nil:
		err = errorf(CodeInternal, "retaining the turn: %v", retErr)
	case fork == nil:
		err = errorf(CodeInternal, "the turn finished without its tokens being retained")
	case t.b.pages(fork.Len()) > t.b.perSession || len(tokens) > t.b.maxRetained:
		err = errorf(CodeBudget, "the turn's %d tokens exceed the %d tokens a session retains", len(tokens), t.b.maxRetained)
	case !m.fitsLocked(s, t.b, t.b.pages(fork.Len())):
		err = errorf(CodeBudget, "the turn's %d pages do not fit in the %d pages all sessions may pin", t.b.pages(fork.Len()), t.b.global)
	default:
		if perr := cache.Repin(s.owner, fork); perr != nil {
			err = errorf(CodeBudget, "pinning the turn: %v", perr)
			if !errors.Is(perr, kvcache.ErrPinBudget) {
				err = errorf(CodeInternal, "pinning the turn: %v", perr)
			}
		}
	}
	if err != nil {
		m.log.Warn("sessions: turn not retained", "session", s.id, "err", err)
		code := engine.CodeInternal
		if CodeOf(err) == CodeBudget {
			code = engine.CodeOverloaded
		}
		return engine.Event{Kind: engine.EventError, Usage: ev.Usage,
			Err: &engine.Error{Code: code, Message: err.Error(), Err: err}}
	}
	if !t.initial {
		offs := s.turnOffsets
		if t.mode == ModeReplace {
			offs = slices.DeleteFunc(offs, func(o int) bool { return o >= t.baseLen })
		}
		s.turnOffsets = append(offs, t.baseLen)
	}
	s.tokens = tokens
	s.resident = resident
	s.pinned = cache.PinnedPages(s.owner)
	s.evicted = false
	return ev
}

// budgetTurnLocked checks a mutating turn of total known tokens against the
// pin budgets and reserves its pages. A unary turn without max_tokens gets
// an output cap where the session's pins would reach the budget; with
// max_tokens beyond it, it is refused. A streamed turn reserves its base
// and max_tokens now and grows the reservation as input arrives.
func (m *Manager) budgetTurnLocked(s *session, b budget, total int, r *engine.Request) error {
	if r.OpenInput {
		return m.reserveLocked(s, b, b.pages(total+r.MaxTokens))
	}
	avail := m.availableLocked(s, b, b.pages(total+max(r.MaxTokens, 1)))
	room := min(avail*b.pageSize, b.maxRetained) - total
	limit := func() string {
		if avail < b.perSession {
			return fmt.Sprintf("%d tokens fit in the %d free pages of the %d pages all sessions may pin", total+room, avail, b.global)
		}
		return fmt.Sprintf("a session retains at most %d tokens", b.maxRetained)
	}
	switch {
	case room <= 0:
		return errorf(CodeBudget, "session %q would retain %d tokens: %s", s.id, total+1, limit())
	case r.MaxTokens == 0 && room < b.maxOutput:
		r.MaxTokens = room // the default output stops where the budget ends
	case r.MaxTokens > room:
		return errorf(CodeBudget, "session %q would retain %d tokens + max_tokens %d: %s", s.id, total, r.MaxTokens, limit())
	}
	out := r.MaxTokens
	if out == 0 {
		out = b.maxOutput
	}
	s.reserve = min(b.pages(total+out), b.perSession)
	return nil
}
