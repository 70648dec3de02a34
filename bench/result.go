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
	Cancelled    bool            `json:"cancelled"` // cancelled on purpose by the workload
	Err          string          `json:"error,omitempty"`
	ErrKind      string          `json:"error_kind,omitempty"`
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
