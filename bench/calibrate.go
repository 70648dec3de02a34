package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// TextPlan makes prompt text of a calibrated length for targets that take
// only text (docs/bench.md: input methods). Its base text is a run of
// synthetic words whose length in the server's tokens was measured; a
// prompt of the calibrated length is that base rotated to a random word
// (the same words, so nearly the same count, but a different prefix, so
// the server's prefix cache does not serve one prompt from another).
// Other lengths scale the word count by the measured tokens per word.
type TextPlan struct {
	words []string
	Calibration
}

// Calibration records how a TextPlan was fitted, for the report.
type Calibration struct {
	Target        int     `json:"target_tokens"`   // the asked length it was fitted to
	Words         int     `json:"words"`           // words of the base text
	Tokens        int     `json:"tokens"`          // the server's prompt_tokens for the base text
	Probes        int     `json:"probes"`          // requests it took
	TokensPerWord float64 `json:"tokens_per_word"` // slope used for other lengths
	Tolerance     int     `json:"tolerance"`       // accepted distance from Target, in tokens
}

// Text returns a prompt of about n tokens, drawn with r.
func (p *TextPlan) Text(r *rand.Rand, n int) string {
	w := len(p.words)
	if n != p.Target {
		w = max(1, w+int(math.Round(float64(n-p.Target)/p.TokensPerWord)))
	}
	start := r.IntN(len(p.words))
	var b strings.Builder
	for i := range w {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p.words[(start+i)%len(p.words)])
	}
	return b.String()
}

// Probe sends text once and returns the server's prompt_tokens for it.
type Probe func(ctx context.Context, text string) (int, error)

// maxProbes bounds the calibration's requests.
const maxProbes = 10

// Calibrate fits a TextPlan to target tokens: it probes the server with a
// base text of synthetic words, reads prompt_tokens, and scales the word
// count (secant steps, whole words) until the count is within 2% of target
// (at least one token). It fails when no word count gets there, for
// example when the server's prompt template alone is longer than target.
func Calibrate(ctx context.Context, probe Probe, target int, seed uint64) (*TextPlan, error) {
	if target < 1 {
		return nil, fmt.Errorf("bench: calibrate: target %d tokens", target)
	}
	rng := rand.New(rand.NewPCG(seed, 0x63616c69))
	var stream []string
	base := func(w int) []string {
		for len(stream) < w {
			stream = append(stream, words[rng.IntN(len(words))])
		}
		return stream[:w]
	}
	tol := textTolerance(target)
	tried := map[int]int{} // words -> tokens
	var pw, pt int         // the previous point
	bestW, bestT := 0, 0
	w := target
	for probes := 1; probes <= maxProbes; probes++ {
		t, err := probe(ctx, strings.Join(base(w), " "))
		if err != nil {
			return nil, fmt.Errorf("bench: calibrate text length: %w", err)
		}
		if t <= 0 {
			return nil, fmt.Errorf("bench: calibrate text length: the server reports no prompt_tokens")
		}
		tried[w] = t
		if bestW == 0 || abs(t-target) < abs(bestT-target) {
			bestW, bestT = w, t
		}
		slope := float64(t) / float64(w)
		if pw != 0 && pw != w && pt != t {
			if s := float64(t-pt) / float64(w-pw); s > 0 {
				slope = s
			}
		}
		if abs(t-target) <= tol {
			return &TextPlan{words: append([]string(nil), base(w)...), Calibration: Calibration{
				Target: target, Words: w, Tokens: t, Probes: probes, TokensPerWord: slope, Tolerance: tol}}, nil
		}
		next := max(1, w+int(math.Round(float64(target-t)/slope)))
		if next == w { // a step below one word: move by one
			next = w + sign(target-t)
		}
		if _, seen := tried[next]; seen || next < 1 {
			break // whole words cannot get closer
		}
		pw, pt, w = w, t, next
	}
	return nil, fmt.Errorf("bench: calibrate text length: no word count gives %d±%d prompt tokens (closest: %d words, %d tokens)",
		target, tol, bestW, bestT)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func sign(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}
