package scheduler

import "math"

// State is a sequence's place in the scheduler's lifecycle.
type State int

const (
	// Waiting: queued for admission (new or preempted); holds no pages.
	Waiting State = iota
	// Running: admitted; holds a page table.
	Running
	// Finished: removed; its pages were released.
	Finished
)

func (s State) String() string {
	switch s {
	case Waiting:
		return "waiting"
	case Running:
		return "running"
	case Finished:
		return "finished"
	}
	return "unknown"
}

// NoLogits is the LogitsFrom value of a sequence that needs no per-position
// logits besides the one it samples from.
const NoLogits = math.MaxInt

// SeqID identifies a sequence inside one scheduler.
type SeqID uint64

// Seq is one sequence: the tokens known so far and how many of them have
// their K/V computed. Tokens may be appended at any time (sampled tokens,
// streamed input); the scheduler computes min(known - computed, budget) of
// them per step. The fields are owned by the scheduler's goroutine.
type Seq struct {
	id       SeqID
	priority int32
	arrival  uint64 // admission order among equal priorities
	tokens   []int32
	computed int
	open     bool // input still streaming: no output sampling yet
	paused   bool // consumer backlog: not scheduled
	state    State
	table    Table
	width    int // running slots this sequence will occupy (n > 1 before the fork)
	draft    int // trailing tokens that are unverified draft tokens (Propose)

	prefix    Table // K/V of the first prefixLen tokens brought by the caller; released by Finish
	prefixLen int

	salt      string
	bypass    bool // skip prefix-cache reuse (still stores)
	whole     bool // SeqOptions.Whole
	cached    int  // tokens reused from the prefix cache at the last admission
	preempted int  // times preempted

	// LogitsFrom: every position >= LogitsFrom in a step's range also gets
	// logits (prompt logprobs). The engine moves it forward as it consumes
	// them; NoLogits when none are wanted.
	LogitsFrom int
	// Data is the engine's per-sequence payload; the scheduler ignores it.
	Data any
}

// SeqOptions describe a new sequence.
type SeqOptions struct {
	Tokens   []int32 // initial known tokens (the prompt); copied
	Priority int32   // higher runs first
	Open     bool    // more input will be appended; sampling waits for CloseInput
	Width    int     // running slots reserved (number of outputs); 0 means 1
	Salt     string  // prefix-cache salt
	Bypass   bool    // do not reuse cached prefix pages
	// Whole: the sequence's tokens attend to each other both ways (an
	// encoder model), so its known tokens are computed in one item, all
	// at once or not yet, and its K/V, which depends on the whole input,
	// is neither taken from nor offered to the prefix cache. Its tokens
	// must fit one step (Config.MaxBatchedTokens); it is not open.
	Whole bool
	// PromptLogits asks for logits at every position from 0 (prompt
	// logprobs); see Seq.LogitsFrom.
	PromptLogits bool
	// Prefix, when set, holds the K/V of the first PrefixLen tokens (a
	// session's retained pages): every admission, the first and those after
	// a preemption, starts from a table sharing them (Allocator.MatchPrefix)
	// instead of the prefix cache, so a partly filled last page is reused
	// too. The sequence owns Prefix from Add on (also when Add fails, it
	// is released): Finish releases it.
	Prefix    Table
	PrefixLen int
	Data      any
}

// ID returns the sequence's id.
func (s *Seq) ID() SeqID { return s.id }

// State returns the lifecycle state.
func (s *Seq) State() State { return s.state }

// Tokens returns the known tokens; the caller must not modify them.
func (s *Seq) Tokens() []int32 { return s.tokens }

// Known is the number of known tokens.
func (s *Seq) Known() int { return len(s.tokens) }

// Computed is the number of tokens whose K/V is in the table.
func (s *Seq) Computed() int { return s.computed }

// Cached is the number of tokens reused at the most recent admission (from
// the prefix cache or the sequence's own Prefix).
func (s *Seq) Cached() int { return s.cached }

// Preemptions counts how often the sequence was preempted.
func (s *Seq) Preemptions() int { return s.preempted }

// Open reports whether input is still streaming in.
func (s *Seq) Open() bool { return s.open }

// Paused reports whether the sequence is held back by its consumer.
func (s *Seq) Paused() bool { return s.paused }

// Priority returns the sequence's priority.
func (s *Seq) Priority() int32 { return s.priority }

// Table returns the page table (nil unless running).
func (s *Seq) Table() Table { return s.table }

// Draft is the number of trailing known tokens that are unverified draft
// tokens (Scheduler.Propose); 0 when the sequence is not speculating.
func (s *Seq) Draft() int { return s.draft }

// Drafts returns the draft tokens (the last Draft() known tokens). The
// engine may overwrite them until the plan that computes them runs (a
// draft model fills placeholders in after planning).
func (s *Seq) Drafts() []int32 { return s.tokens[len(s.tokens)-s.draft:] }

// dropDraft forgets unverified draft tokens that were never computed.
func (s *Seq) dropDraft() {
	s.tokens = s.tokens[:len(s.tokens)-s.draft]
	s.draft = 0
	s.computed = min(s.computed, len(s.tokens))
}

// todo is the number of tokens the next step may compute. While input is
// open the last known token is held back: it is the one whose logits the
// first output token is sampled from once input closes.
func (s *Seq) todo() int {
	n := len(s.tokens) - s.computed
	if s.open && n > 0 {
		n--
	}
	return n
}

// before orders sequences: higher priority first, then earlier arrival,
// then lower id.
func (s *Seq) before(o *Seq) bool {
	if s.priority != o.priority {
		return s.priority > o.priority
	}
	if s.arrival != o.arrival {
		return s.arrival < o.arrival
	}
	return s.id < o.id
}
