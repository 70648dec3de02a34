// Package scheduler decides, step by step, which sequences run and how many
// of their tokens are computed: decode tokens of running sequences first,
// then prefill chunks of waiting ones, under a token budget and a limit on
// running sequences, with preemption by recomputation when pages run out.
//
// It knows sequences (two counters: tokens known, tokens computed), their
// priority and their page tables through the Allocator interface; it knows
// no tensors and no protocols. One goroutine owns a Scheduler: it is not
// safe for concurrent use.
package scheduler

import (
	"errors"
	"fmt"
	"slices"
)

// Config bounds one step.
type Config struct {
	// MaxBatchedTokens is the token budget of one step (decode tokens plus
	// prefill chunk tokens). Default 512.
	MaxBatchedTokens int
	// MaxRunning is the most sequences holding pages at once. Default 64.
	MaxRunning int
	// PrefillLimit, when set, caps the other tokens (prefill chunks,
	// streamed input, recomputation) of a step that holds decode tokens:
	// it gets the StepLoad (the Work of the step's decode tokens, how many
	// sequences decode, how many wait for prompt tokens) and returns the
	// function that sizes each further chunk (nil: no cap beyond
	// MaxBatchedTokens). That function gets the chunk's first position
	// and the tokens wanted and returns how many to take (0: none); it
	// keeps the step's remaining allowance, so the scheduler asks once
	// per chunk in plan order. A step without decode tokens is never
	// capped, so a request alone prefills at full speed. The engine sizes
	// it from measured step costs (docs/design.md §10).
	PrefillLimit func(StepLoad) func(start, n int) int
}

// Defaults for zero Config fields.
const (
	DefaultMaxBatchedTokens = 512
	DefaultMaxRunning       = 64
)

// Work is what a step computes, as a step-cost model prices it: tokens,
// and the key positions their attention reads (a token at position p
// attends to p+1 positions, so a chunk deep into a long prompt costs more
// than one at its start).
type Work struct {
	Tokens int
	Keys   int
}

// StepLoad is what Config.PrefillLimit is told about a step once its
// decode tokens are planned.
type StepLoad struct {
	Decode   Work // the decode tokens (drafts included)
	Decoding int  // sequences decoding in the step
	Prompts  int  // sequences, running or waiting, with more than one token left to compute (not paused)
}

// ChunkWork is the Work of computing positions [start, start+n) of one
// sequence.
func ChunkWork(start, n int) Work {
	return Work{Tokens: n, Keys: n*start + n*(n+1)/2}
}

// Add returns w plus o.
func (w Work) Add(o Work) Work { return Work{w.Tokens + o.Tokens, w.Keys + o.Keys} }

// ErrNeverFits rejects a sequence that could not fit in the whole pool even
// if it ran alone.
var ErrNeverFits = errors.New("scheduler: sequence can never fit in the KV pool")

// ErrState reports an operation on a sequence in the wrong state.
var ErrState = errors.New("scheduler: sequence in wrong state")

// Stats are cumulative counters for metrics.
type Stats struct {
	Steps         uint64 // plans with at least one item
	Preemptions   uint64 // sequences preempted
	PrefixQueries uint64 // prompt tokens looked up in the prefix cache
	PrefixHits    uint64 // of those, tokens found
	Admitted      uint64 // admissions (first ones and after preemption)
}

// Load is a snapshot of the queues.
type Load struct {
	Running       int // sequences holding pages
	Waiting       int // sequences queued
	Paused        int // running sequences held back by their consumer
	TokensRunning int // known tokens of running sequences
	TokensWaiting int // known tokens of waiting sequences
}

// Scheduler owns the queues. Not safe for concurrent use.
type Scheduler struct {
	cfg         Config
	alloc       Allocator
	nextID      SeqID
	nextArrival uint64
	waiting     []*Seq // sorted by Seq.before at Plan time
	running     []*Seq // sorted by Seq.before at Plan time
	stats       Stats
}

// New returns a scheduler drawing pages from a.
func New(cfg Config, a Allocator) (*Scheduler, error) {
	if a == nil {
		return nil, errors.New("scheduler: nil allocator")
	}
	if cfg.MaxBatchedTokens == 0 {
		cfg.MaxBatchedTokens = DefaultMaxBatchedTokens
	}
	if cfg.MaxRunning == 0 {
		cfg.MaxRunning = DefaultMaxRunning
	}
	if cfg.MaxBatchedTokens < 1 || cfg.MaxRunning < 1 {
		return nil, fmt.Errorf("scheduler: invalid config %+v", cfg)
	}
	if a.PageSize() < 1 || a.TotalPages() < 1 {
		return nil, fmt.Errorf("scheduler: allocator with page size %d and %d pages", a.PageSize(), a.TotalPages())
	}
	return &Scheduler{cfg: cfg, alloc: a}, nil
}

// Config returns the effective configuration.
func (sc *Scheduler) Config() Config { return sc.cfg }

// Fits reports whether a sequence of total tokens could ever be held by the
// pool (running alone, every page free).
func (sc *Scheduler) Fits(total int) bool {
	ps := sc.alloc.PageSize()
	return (total+ps-1)/ps <= sc.alloc.TotalPages()
}

// Add queues a new sequence.
func (sc *Scheduler) Add(o SeqOptions) (*Seq, error) {
	w := max(o.Width, 1)
	var err error
	switch {
	case !sc.Fits(len(o.Tokens)):
		err = ErrNeverFits
	case w > sc.cfg.MaxRunning:
		err = fmt.Errorf("scheduler: %d outputs exceed max running %d", w, sc.cfg.MaxRunning)
	case o.Prefix != nil && (o.PrefixLen < 0 || o.PrefixLen > len(o.Tokens)):
		err = fmt.Errorf("scheduler: prefix of %d tokens for a sequence of %d", o.PrefixLen, len(o.Tokens))
	case o.Whole && (o.Open || o.Prefix != nil || w > 1 || len(o.Tokens) > sc.cfg.MaxBatchedTokens):
		err = fmt.Errorf("scheduler: a whole sequence of %d tokens must be closed, without prefix or fork, and fit one step of %d tokens", len(o.Tokens), sc.cfg.MaxBatchedTokens)
	}
	if err != nil {
		if o.Prefix != nil {
			sc.alloc.Release(o.Prefix)
		}
		return nil, err
	}
	sc.nextID++
	sc.nextArrival++
	s := &Seq{
		id:         sc.nextID,
		priority:   o.Priority,
		arrival:    sc.nextArrival,
		tokens:     slices.Clone(o.Tokens),
		open:       o.Open,
		state:      Waiting,
		width:      w,
		salt:       o.Salt,
		bypass:     o.Bypass || o.Whole,
		whole:      o.Whole,
		prefix:     o.Prefix,
		prefixLen:  o.PrefixLen,
		LogitsFrom: NoLogits,
		Data:       o.Data,
	}
	if o.PromptLogits {
		s.LogitsFrom = 0
	}
	sc.waiting = append(sc.waiting, s)
	return s, nil
}

// Append adds known tokens to a waiting or running sequence (a sampled
// token, or streamed input).
func (sc *Scheduler) Append(s *Seq, toks ...int32) error {
	if s.state == Finished {
		return ErrState
	}
	s.tokens = append(s.tokens, toks...)
	return nil
}

// ErrNoDraft refuses a Propose on a sequence that cannot speculate now.
var ErrNoDraft = errors.New("scheduler: sequence cannot take draft tokens now")

// Propose appends draft tokens to a running sequence that is about to
// decode one token (input closed, exactly its last token to compute, no
// drafts pending). The next plan computes the last token and the drafts
// in one item (Item.Draft) or, when budget or pages are short, drops the
// drafts and decodes plainly. After the step the engine calls Accept.
// Draft positions are never published to the prefix cache before Accept
// verifies them.
func (sc *Scheduler) Propose(s *Seq, drafts []int32) error {
	if s.state != Running || s.open || s.draft != 0 || s.todo() != 1 || len(drafts) == 0 || s.LogitsFrom != NoLogits {
		return ErrNoDraft
	}
	s.tokens = append(s.tokens, drafts...)
	s.draft = len(drafts)
	return nil
}

// Accept settles a speculating sequence after its step: the first n draft
// tokens are kept (their K/V was computed and is now verified), the rest
// are removed with their K/V slots, and pages wholly beyond the kept
// positions are released through the allocator's release path; newly full
// verified pages are offered to the prefix cache. n is clamped to
// [0, Draft()]. A sequence without drafts is unchanged.
func (sc *Scheduler) Accept(s *Seq, n int) {
	if s.draft == 0 {
		return
	}
	n = max(0, min(n, s.draft))
	keep := len(s.tokens) - s.draft + n
	s.tokens = s.tokens[:keep]
	s.draft = 0
	if s.computed <= keep {
		return // not computed (preempted or finished): nothing to roll back
	}
	s.computed = keep
	if s.state != Running || s.table == nil {
		return
	}
	sc.alloc.Truncate(s.table, keep)
	sc.alloc.Commit(s.table, s.tokens[:keep])
}

// CloseInput marks the end of streamed input: the sequence may now sample.
func (sc *Scheduler) CloseInput(s *Seq) { s.open = false }

// SetPaused holds a sequence back (consumer backlog) or lets it run again.
// A paused sequence keeps its pages.
func (sc *Scheduler) SetPaused(s *Seq, paused bool) { s.paused = paused }

// Finish removes a sequence in any state and releases its pages (its table
// and its Prefix). It is the one release path and is safe to call twice.
func (sc *Scheduler) Finish(s *Seq) {
	switch s.state {
	case Finished:
		return
	case Running:
		sc.running = remove(sc.running, s)
	case Waiting:
		sc.waiting = remove(sc.waiting, s)
	}
	sc.releaseTable(s)
	if s.prefix != nil {
		sc.alloc.Release(s.prefix)
		s.prefix = nil
	}
	s.state = Finished
}

// Fork returns a new running sequence sharing s's tokens and pages (n > 1:
// the outputs of a request share the prompt's pages copy-on-write). s must
// be running. The child takes one of the running slots s reserved.
func (sc *Scheduler) Fork(s *Seq, data any) (*Seq, error) {
	if s.state != Running {
		return nil, ErrState
	}
	t, err := sc.alloc.Fork(s.table)
	if err != nil {
		return nil, err
	}
	sc.nextID++
	c := &Seq{
		id:         sc.nextID,
		priority:   s.priority,
		arrival:    s.arrival,
		tokens:     slices.Clone(s.tokens),
		computed:   s.computed,
		open:       s.open,
		state:      Running,
		table:      t,
		width:      1,
		salt:       s.salt,
		bypass:     s.bypass,
		cached:     s.cached,
		LogitsFrom: NoLogits,
		Data:       data,
	}
	if s.width > 1 {
		s.width--
	}
	sc.running = append(sc.running, c)
	return c, nil
}

// Load returns queue figures.
func (sc *Scheduler) Load() Load {
	var l Load
	for _, s := range sc.running {
		l.Running++
		l.TokensRunning += len(s.tokens)
		if s.paused {
			l.Paused++
		}
	}
	for _, s := range sc.waiting {
		l.Waiting++
		l.TokensWaiting += len(s.tokens)
	}
	return l
}

// Stats returns the cumulative counters.
func (sc *Scheduler) Stats() Stats { return sc.stats }

// Idle reports whether no sequence is queued or running.
func (sc *Scheduler) Idle() bool { return len(sc.running) == 0 && len(sc.waiting) == 0 }

// preempt releases a running sequence's pages and requeues it with every
// token it has (recomputation); its arrival order is kept, so it returns
// ahead of later arrivals of its priority.
func (sc *Scheduler) preempt(s *Seq) {
	s.dropDraft()
	sc.running = remove(sc.running, s)
	sc.releaseTable(s)
	s.state = Waiting
	s.preempted++
	sc.stats.Preemptions++
	sc.waiting = append(sc.waiting, s)
}

func (sc *Scheduler) releaseTable(s *Seq) {
	if s.table != nil {
		sc.alloc.Release(s.table)
		s.table = nil
	}
	s.computed = 0
}

func (sc *Scheduler) slotsUsed() int {
	n := 0
	for _, s := range sc.running {
		n += s.width
	}
	return n
}

func remove(list []*Seq, s *Seq) []*Seq {
	if i := slices.Index(list, s); i >= 0 {
		return slices.Delete(list, i, i+1)
	}
	return list
}
