package bench

import "time"

// Result is what one request measured.
type Result struct {
	Start        time.Time       `json:"-"`
	TTFT         time.Duration   `json:"ttft"`          // from send (or end of input) to the first output token
	E2E          time.Duration   `json:"e2e"`           // from send to the last event
	ITLs         []time.Duration `json:"-"`             // gaps between successive output tokens
	PromptTokens int             `json:"prompt_tokens"` // as reported by the server when it reports them
	OutputTokens int             `json:"output_tokens"`
	CachedTokens int             `json:"cached_tokens"`
	// What was asked (copied from the Request): new input tokens (0: not
	// set), the conversation history ahead of it, the tolerance on the
	// measured input, and the output length (0: set by the server).
	AskedInput     int  `json:"asked_input_tokens,omitempty"`
	History        int  `json:"history_tokens,omitempty"`
	InputTolerance int  `json:"input_tolerance,omitempty"`
	AskedOutput    int  `json:"asked_output_tokens,omitempty"`
	ExactOutput    bool `json:"exact_output,omitempty"` // ignore_eos: the output must be AskedOutput long
	// Guided: the output was constrained to a JSON Schema; its length is
	// the grammar's (it ends when the value is complete), never exact.
	Guided bool `json:"guided,omitempty"`
	// ContextStop marks a conversation turn that was not sent because it
	// would not fit the server's context; it is neither a request nor an
	// error.
	ContextStop bool   `json:"context_stop,omitempty"`
	Cancelled   bool   `json:"cancelled"` // cancelled on purpose by the workload
	Err         string `json:"error,omitempty"`
	ErrKind     string `json:"error_kind,omitempty"`
}

func (r Result) meanITL() time.Duration {
	if len(r.ITLs) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range r.ITLs {
		sum += d
	}
	return sum / time.Duration(len(r.ITLs))
}

// MeasuredInput is the new input of the request in the server's count: its
// prompt_tokens less the history ahead of it; ok is false when the server
// reported no usage.
func (r Result) MeasuredInput() (n int, ok bool) {
	if r.PromptTokens <= 0 {
		return 0, false
	}
	return r.PromptTokens - r.History, true
}

// InputOff reports whether the measured input misses the asked length by
// more than the tolerance.
func (r Result) InputOff() bool {
	n, ok := r.MeasuredInput()
	return ok && r.AskedInput > 0 && abs(n-r.AskedInput) > r.InputTolerance
}

// OutputOff reports whether the output length differs from what was asked:
// any difference when the request ignored EOS, more tokens than asked
// otherwise. Only finished requests count.
func (r Result) OutputOff() bool {
	if r.AskedOutput <= 0 || r.Err != "" || r.Cancelled || r.ContextStop {
		return false
	}
	if r.ExactOutput {
		return r.OutputTokens != r.AskedOutput
	}
	return r.OutputTokens > r.AskedOutput
}
