package engine

import (
	"time"

	"oengine/grammar"
	"oengine/kvcache"
	"oengine/sampling"
)

// Request is one generation request, already decoded from its transport.
type Request struct {
	// ID is unique among live requests (a live duplicate is refused with
	// CodeDuplicateRequest); empty: the engine mints one.
	ID string
	// Prompt is text, tokenized with the model's BOS rule and special tokens
	// parsed (docs/design.md §2). Ignored when TokenIDs is set.
	Prompt string
	// TokenIDs are used exactly as given.
	TokenIDs []int32
	// OpenInput: more input follows through Stream.AppendInput until
	// Stream.CloseInput; tokens are prefilled as they arrive and sampling
	// starts after CloseInput. The initial input may be empty.
	OpenInput bool

	N         int // output sequences; 0 means 1
	MaxTokens int // per output; 0: up to the context limit
	MinTokens int // EOS, stop ids and stop strings are ignored before this many tokens

	Sampling sampling.Options // nil fields take the defaults of docs/design.md §2
	Stop     StopParams
	// SpecialText renders generated control tokens in EventTokens.Text
	// (and to stop strings) as their text, e.g. gpt-oss's <|channel|>,
	// which the OpenAI chat route parses; by default they have no text.
	SpecialText bool
	// Constraint, when set, restricts every output to the strings it
	// accepts (structured outputs, docs/api.md "Structured outputs"): each
	// step's logits are masked to the tokens its Guide allows, and an
	// output whose guide is Done finishes with FinishStop/StopGrammar. Its
	// vocabulary must be the model's.
	Constraint grammar.Constraint
	// Logprobs of output tokens: nil = none; Mode CandidatesNone = the chosen
	// token's logprob only; otherwise with top-n / listed ids / all candidates.
	Logprobs *sampling.Candidates
	// PromptLogprobs: per prompt token (the first has none). Asking for them
	// disables prefix-cache reuse for the request (every logit is needed).
	PromptLogprobs *sampling.Candidates

	// Prefix, when set, holds the K/V of the first Prefix.Len() tokens of
	// TokenIDs, computed earlier in this engine's cache (a session's
	// retained pages: kvcache.Cache.PinnedTable). They are reused instead
	// of recomputed, a partly filled last page included (copied before it
	// is written), up to all known tokens but the last at admission (its
	// logits are needed). The engine owns Prefix from Submit on, whatever
	// the outcome, and releases it. BypassPrefixCache and PromptLogprobs
	// disable the reuse.
	Prefix *kvcache.Table

	// NoSpeculation opts this request out of speculative decoding
	// (Config.Speculation); its outputs decode one token per step.
	// Constrained requests never speculate.
	NoSpeculation bool

	// Embed, when set, makes this an embedding request (EmbedOptions): the
	// prompt is pooled into one vector and nothing is generated.
	Embed *EmbedOptions

	Priority          int32 // higher is admitted and kept first
	CacheSalt         string
	BypassPrefixCache bool // do not reuse cached pages (they are still stored)

	// OnRetain, when set, is called from the engine's step loop when output
	// 0 finishes normally (not cancelled or failed; N must be 1), before
	// its pages are released: Tokens are every token of the sequence
	// (input, then output including a final EOS/stop token), Table holds
	// the K/V of the first Computed of them. A session pins Table there
	// (kvcache.Cache.Repin) to retain the turn. It must not block and must
	// not keep Table after Repin.
	OnRetain func(Retained)
}

// Retained is what OnRetain receives.
type Retained struct {
	Tokens   []int32        // owned by the callee
	Computed int            // tokens whose K/V is in Table (len(Tokens) - 1 usually)
	Table    *kvcache.Table // valid during the call only
}

// StopParams are the stop conditions besides max_tokens and the context.
type StopParams struct {
	TokenIDs            []int32  // stop when one of these is sampled
	Strings             []string // stop when the text contains one of these
	IncludeStopInOutput bool     // the matched stop string is part of the text
	IgnoreEOS           bool     // do not stop on end-of-generation tokens
}

// EventKind tells which fields of an Event are set.
type EventKind int

const (
	// EventPrompt: once, before the first tokens: Prompt.
	EventPrompt EventKind = iota
	// EventTokens: new tokens of one output: Output, Tokens, Text.
	EventTokens
	// EventFinished: one output finished: Output, Finish.
	EventFinished
	// EventDone: terminal, success: Usage.
	EventDone
	// EventError: terminal, failure or cancellation: Err, Usage. Outputs
	// that had produced tokens got an EventFinished with FinishCancelled
	// (or FinishError) first.
	EventError
)

func (k EventKind) String() string {
	switch k {
	case EventPrompt:
		return "prompt"
	case EventTokens:
		return "tokens"
	case EventFinished:
		return "finished"
	case EventDone:
		return "done"
	case EventError:
		return "error"
	}
	return "unknown"
}

// Event is one element of a request's stream.
type Event struct {
	Kind   EventKind
	Output int         // output index (EventTokens, EventFinished)
	Tokens []Token     // new tokens only
	Text   string      // new text only: stop-string holdback applied, never half a UTF-8 character
	Finish *Finish     // EventFinished
	Prompt *PromptInfo // EventPrompt
	Usage  *Usage      // EventDone, EventError
	Err    *Error      // EventError
	// Embedding is an embedding request's pooled vector (EventDone only;
	// not normalized).
	Embedding []float32
}

// Terminal reports whether e ends the stream.
func (e Event) Terminal() bool { return e.Kind == EventDone || e.Kind == EventError }

// Token is one sampled token.
type Token struct {
	ID       int32
	Logprobs *sampling.Logprobs // nil unless asked for
}

// PromptInfo describes the prompt once it is computed.
type PromptInfo struct {
	Tokens       []int32             // the prompt's token ids
	CachedTokens int                 // tokens whose K/V came from the prefix cache
	Logprobs     []sampling.Logprobs // per prompt token when asked for; entry 0 is empty
}

// FinishReason says why an output ended.
type FinishReason int

const (
	FinishStop      FinishReason = iota // a stop condition matched (see StopMatch)
	FinishLength                        // max_tokens or the context limit
	FinishCancelled                     // cancel, deadline, Abort, consumer gone
	FinishError                         // the request failed
)

func (r FinishReason) String() string {
	switch r {
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishCancelled:
		return "cancelled"
	case FinishError:
		return "error"
	}
	return "unknown"
}

// StopKind says which stop condition matched.
type StopKind int

const (
	StopNone      StopKind = iota
	StopEOS                // an end-of-generation token
	StopTokenID            // one of StopParams.TokenIDs
	StopString             // one of StopParams.Strings
	StopMaxTokens          // FinishLength: max_tokens reached
	StopContext            // FinishLength: the context (or pool) limit reached
	StopGrammar            // the constraint's output is complete and cannot be extended
)

var stopKindNames = [...]string{"none", "eos", "token_id", "string", "max_tokens", "context", "grammar"}

func (k StopKind) String() string {
	if k >= 0 && int(k) < len(stopKindNames) {
		return stopKindNames[k]
	}
	return "unknown"
}

// Finish is how one output ended.
type Finish struct {
	Reason  FinishReason
	Kind    StopKind
	TokenID int32  // StopEOS, StopTokenID: the token
	Text    string // StopString: the stop string
	Index   int    // StopString: its index in StopParams.Strings
	Tokens  int    // tokens generated by this output
}

// Usage counts tokens of the whole request.
type Usage struct {
	PromptTokens       int // every token attended to before generating
	CompletionTokens   int // sum over outputs
	CachedPromptTokens int // prompt tokens whose K/V was reused
}

// Limits are the engine's fixed figures.
type Limits struct {
	ContextLen       int // model context
	MaxOutputTokens  int // effective cap of one output (context and pool)
	Vocab            int
	PageSize         int
	TotalPages       int
	MaxBatchedTokens int
	MaxRunning       int
	MaxWaiting       int
	MaxLogprobs      int
	// MaxPromptLogprobEntries and MaxTokenCandidates bound logprobs
	// (Config); 0: unknown.
	MaxPromptLogprobEntries int
	MaxTokenCandidates      int
	// Speculation is the drafter of speculative decoding ("ngram",
	// "draft_model"; "": off), SpecTokens its most draft tokens per step,
	// SpecAdaptive whether K adapts, DraftModel the draft model's name.
	Speculation  string
	SpecTokens   int
	SpecAdaptive bool
	DraftModel   string
	// Device names where the model runs: "cpu", or the CUDA device
	// ("cuda:0 NVIDIA H200 (sm_90, ...)") for a model on one.
	Device string
	// EmbeddingDim is the length of an embedding (the model's hidden
	// width); 0 when the model serves none (it is no HiddenModel).
	// Pooling is the pooling of requests that leave it to the engine.
	EmbeddingDim int
	Pooling      Pooling
	// EmbeddingsOnly: the model is an encoder (ModelInfo.Encoder); it
	// generates nothing, and an embedding input holds at most
	// MaxOutputTokens+1 tokens (its context and one step's budget,
	// MaxBatchedTokens).
	EmbeddingsOnly bool
	// RankOutputs is the width of the model's classification head (a
	// reranker: PoolingRank); 0: none.
	RankOutputs int
}

// LoadFigures is a live snapshot for GetLoad and metrics.
type LoadFigures struct {
	Running       int // requests with a running sequence
	Waiting       int // requests waiting for admission
	Paused        int // sequences held back by their consumer
	Sequences     int // running sequences
	TokensRunning int
	TokensWaiting int
	Pages         kvcache.Stats
}

// StepStats describe one executed step (Hooks.OnStep).
type StepStats struct {
	Sequences     int
	PrefillTokens int // tokens computed that were not the last known token
	DecodeTokens  int // sampled tokens
	SpecDrafted   int // draft tokens verified (speculative decoding)
	SpecAccepted  int // of those, accepted by verification
	Preemptions   int
	Duration      time.Duration
}

// RequestStats describe one ended request (Hooks.OnRequestDone).
type RequestStats struct {
	ID                 string
	Queue              time.Duration // accepted to first scheduled
	TTFT               time.Duration // accepted to first token (0 when none)
	E2E                time.Duration // accepted to the terminal event
	PromptTokens       int
	CachedPromptTokens int
	CompletionTokens   int
	Finishes           []Finish // per output
	Err                *Error   // nil on success
	Preemptions        int
}

// Hooks receive figures for metrics. They are called from the step loop:
// they must be quick and must not call back into the engine.
type Hooks struct {
	OnStep        func(StepStats)
	OnRequestDone func(RequestStats)
	OnInterToken  func(time.Duration) // time between two tokens of one output
	OnPause       func(requestID string)
}

// Stats are cumulative counters.
type Stats struct {
	Steps            uint64
	Preemptions      uint64
	PrefixQueries    uint64 // prompt tokens looked up
	PrefixHits       uint64 // tokens found
	PromptTokens     uint64 // tokens prefilled (including recomputation)
	GenerationTokens uint64
	// SpecDraftTokens are draft tokens verified, SpecAcceptedTokens those
	// accepted (speculative decoding; acceptance rate = their ratio).
	SpecDraftTokens    uint64
	SpecAcceptedTokens uint64
	Pauses             uint64 // times a request was paused by its consumer
	ConsumerTimeouts   uint64
	Requests           uint64 // accepted
}
