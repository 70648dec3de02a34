// Package sampling turns a row of logits into the next token of one output
// sequence (temperature, top-k, top-p, min-p, repetition / frequency /
// presence penalties, per-sequence seeded RNG) and computes logprobs of a
// chosen token and of candidate tokens.
//
// Order of operations in Sampler.Sample (as vLLM v1 does it):
//
//	penalties -> temperature -> min-p -> top-k -> top-p -> one uniform draw
//
// Penalties follow vLLM's definition: the repetition penalty applies to every
// token that appears in the prompt or in the output so far (divide a positive
// logit by the penalty, multiply a negative one); frequency and presence
// penalties apply to output tokens only (logit -= frequency*count +
// presence*[count > 0]). Temperature 0 (anything below GreedyBelow) means
// greedy: the argmax of the penalised logits, ties to the lowest token id,
// and no random draw.
//
// Logprobs (ComputeLogprobs) describe the model's raw distribution: the
// log-softmax of the logits before penalties, temperature and filters, as
// vLLM reports by default.
package sampling

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalidParams is wrapped by every validation error of this package, so
// callers map it to INVALID_ARGUMENT with errors.Is.
var ErrInvalidParams = errors.New("sampling: invalid parameter")

// ParamError names the offending field (wire name) and why it was rejected.
type ParamError struct {
	Field  string // wire name, e.g. "top_p"
	Reason string // e.g. "must be in (0, 1], got 1.5"
}

func (e *ParamError) Error() string { return "sampling: " + e.Field + " " + e.Reason }

// Unwrap lets errors.Is(err, ErrInvalidParams) hold.
func (e *ParamError) Unwrap() error { return ErrInvalidParams }

func paramErr(field, format string, args ...any) error {
	return &ParamError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Penalty bounds for frequency and presence penalties (OpenAI and vLLM
// accept [-2, 2]).
const (
	MinAdditivePenalty = -2.0
	MaxAdditivePenalty = 2.0
)

// Params are resolved sampling parameters of one request. The zero value is
// not valid (top_p 0, repetition penalty 0): start from Defaults or
// Options.Resolve.
type Params struct {
	Temperature       float64 // >= 0; 0 = greedy
	TopK              int     // <= 0 (or >= vocabulary size): off
	TopP              float64 // (0, 1]; 1 = off
	MinP              float64 // [0, 1]; 0 = off
	RepetitionPenalty float64 // > 0; 1 = neutral
	FrequencyPenalty  float64 // [-2, 2]; 0 = neutral
	PresencePenalty   float64 // [-2, 2]; 0 = neutral
	Seed              uint64  // used when HasSeed
	HasSeed           bool    // false: a random seed per request
	// LogitBias is added to the listed tokens' logits after the penalties
	// (OpenAI's logit_bias); ids are distinct and inside the vocabulary
	// (the engine checks that bound), biases in ±MaxLogitBias.
	LogitBias []TokenBias
}

// TokenBias is one entry of Params.LogitBias.
type TokenBias struct {
	ID   int32
	Bias float32
}

// MaxLogitBias bounds a logit bias (OpenAI's range): ±100 bans or forces a
// token.
const MaxLogitBias = 100

// Defaults returns the neutral parameters of docs/design.md §2 with the given
// default temperature (the server's --default-temperature, 1.0 unless set).
func Defaults(defaultTemperature float64) Params {
	return Params{
		Temperature:       defaultTemperature,
		TopP:              1,
		RepetitionPenalty: 1,
	}
}

// GreedyBelow is the temperature under which sampling is greedy (vLLM's
// rule): dividing by a smaller temperature only risks overflow, and the
// result would be the argmax anyway.
const GreedyBelow = 1e-5

// Greedy reports whether sampling is a deterministic argmax
// (Temperature < GreedyBelow, in particular 0).
func (p Params) Greedy() bool { return p.Temperature < GreedyBelow }

// Penalised reports whether a penalty rewrites the logits before the
// choice (a repetition, frequency or presence penalty is set).
func (p Params) Penalised() bool {
	return p.RepetitionPenalty != 1 || p.FrequencyPenalty != 0 || p.PresencePenalty != 0
}

// RewritesLogits reports whether the logits are rewritten before the
// choice (a penalty or a logit bias), so the choice needs them on the host.
func (p Params) RewritesLogits() bool { return p.Penalised() || len(p.LogitBias) > 0 }

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Validate rejects NaN or infinite values anywhere and values out of range.
func (p Params) Validate() error {
	checks := []struct {
		name string
		v    float64
	}{
		{"temperature", p.Temperature},
		{"top_p", p.TopP},
		{"min_p", p.MinP},
		{"repetition_penalty", p.RepetitionPenalty},
		{"frequency_penalty", p.FrequencyPenalty},
		{"presence_penalty", p.PresencePenalty},
	}
	for _, c := range checks {
		if !finite(c.v) {
			return paramErr(c.name, "must be a finite number, got %v", c.v)
		}
	}
	switch {
	case p.Temperature < 0:
		return paramErr("temperature", "must be >= 0, got %v", p.Temperature)
	case p.TopP <= 0 || p.TopP > 1:
		return paramErr("top_p", "must be in (0, 1], got %v", p.TopP)
	case p.MinP < 0 || p.MinP > 1:
		return paramErr("min_p", "must be in [0, 1], got %v", p.MinP)
	case p.RepetitionPenalty <= 0:
		return paramErr("repetition_penalty", "must be > 0, got %v", p.RepetitionPenalty)
	case p.FrequencyPenalty < MinAdditivePenalty || p.FrequencyPenalty > MaxAdditivePenalty:
		return paramErr("frequency_penalty", "must be in [-2, 2], got %v", p.FrequencyPenalty)
	case p.PresencePenalty < MinAdditivePenalty || p.PresencePenalty > MaxAdditivePenalty:
		return paramErr("presence_penalty", "must be in [-2, 2], got %v", p.PresencePenalty)
	}
	seen := make(map[int32]bool, len(p.LogitBias))
	for _, b := range p.LogitBias {
		switch {
		case b.ID < 0:
			return paramErr("logit_bias", "token id %d is negative", b.ID)
		case seen[b.ID]:
			return paramErr("logit_bias", "token id %d is listed twice", b.ID)
		case !finite(float64(b.Bias)) || b.Bias < -MaxLogitBias || b.Bias > MaxLogitBias:
			return paramErr("logit_bias", "the bias of token %d must be in [-100, 100], got %v", b.ID, b.Bias)
		}
		seen[b.ID] = true
	}
	return nil
}

// Options mirrors the wire's SamplingParams: a nil field is absent.
type Options struct {
	Temperature       *float64
	TopP              *float64
	TopK              *int32 // absent, 0 or negative: off
	MinP              *float64
	RepetitionPenalty *float64
	FrequencyPenalty  *float64
	PresencePenalty   *float64
	Seed              *uint64 // absent: random per request
	LogitBias         []TokenBias
}

// Resolve fills absent fields with the defaults of docs/design.md §2 and
// validates the result. defaultTemperature must itself be valid.
func (o Options) Resolve(defaultTemperature float64) (Params, error) {
	p := Defaults(defaultTemperature)
	set := func(dst *float64, src *float64) {
		if src != nil {
			*dst = *src
		}
	}
	set(&p.Temperature, o.Temperature)
	set(&p.TopP, o.TopP)
	set(&p.MinP, o.MinP)
	set(&p.RepetitionPenalty, o.RepetitionPenalty)
	set(&p.FrequencyPenalty, o.FrequencyPenalty)
	set(&p.PresencePenalty, o.PresencePenalty)
	if o.TopK != nil && *o.TopK > 0 {
		p.TopK = int(*o.TopK)
	}
	if o.Seed != nil {
		p.Seed, p.HasSeed = *o.Seed, true
	}
	p.LogitBias = o.LogitBias
	if err := p.Validate(); err != nil {
		return Params{}, err
	}
	return p, nil
}
