package verify

import (
	"fmt"
	"io"
	"strings"

	"oengine/model/llama"
)

// Report is the outcome of Run.
type Report struct {
	Model    string
	Arch     string
	Class    string // weight class: ClassFloat, ClassBF16, ClassQuantized
	Tol      Tolerance
	KV       llama.KVType
	PageSize int
	// GGMLForced, GGMLGreedy: teacher forcing / free-running greedy ran in
	// llama.cpp (GGML) arithmetic mode.
	GGMLForced, GGMLGreedy bool
	Cases                  []CaseReport
	Pass                   bool
	// Device names the CUDA device the check ran on ("": the CPU).
	Device string
}

// CaseReport is the outcome of one prompt.
type CaseReport struct {
	Index            int
	PromptTokens     int
	ForcedTokens     int  // prompt + greedy[:len-1]
	TokensChecked    bool // the prompt was tokenized and compared
	TokensMatch      bool
	Compared         int     // reference entries compared
	MaxAbs           float64 // max abs logprob error
	WorstPos         int     // position of MaxAbs
	MeanAbs          float64
	PosMaxAbs        []float64 // per position (Options.PerPosition)
	ArgmaxChecked    int       // positions with a confident reference argmax
	ArgmaxMismatch   int
	FirstMismatch    int
	GreedyLimit      int // steps before the reference's first near-tie
	GreedyMatched    int
	GreedyFailStep   int     // first greedy step that differs, -1 if none
	GreedyFailMargin float64 // the reference top-1/top-2 margin at that step
	Pass             bool
	Failures         []string
}

func (c *CaseReport) fail(format string, args ...any) {
	c.Pass = false
	c.Failures = append(c.Failures, fmt.Sprintf(format, args...))
}

// MaxAbs returns the largest error over all cases.
func (r Report) MaxAbs() float64 {
	var m float64
	for _, c := range r.Cases {
		m = max(m, c.MaxAbs)
	}
	return m
}

// MeanAbs returns the mean error over all compared entries of all cases.
func (r Report) MeanAbs() float64 {
	var s float64
	n := 0
	for _, c := range r.Cases {
		s += c.MeanAbs * float64(c.Compared)
		n += c.Compared
	}
	if n == 0 {
		return 0
	}
	return s / float64(n)
}

// String renders the report as WriteTo does.
func (r Report) String() string {
	var b strings.Builder
	r.WriteTo(&b)
	return b.String()
}

// WriteTo prints a header, one line per case (and its failures) and a verdict.
func (r Report) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	arith := func(ggml bool) string {
		switch {
		case ggml:
			return "ggml"
		case r.Device != "":
			return "oengine on " + r.Device
		}
		return "oengine"
	}
	fmt.Fprintf(&b, "model %s: arch %s, weights %s (tolerance max %.3g, mean %.3g, argmax margin %.3g), kv %s, page %d, arithmetic %s (greedy %s)\n",
		r.Model, r.Arch, r.Class, r.Tol.MaxAbs, r.Tol.MeanAbs, r.Tol.ArgmaxMargin, r.KV, r.PageSize, arith(r.GGMLForced), arith(r.GGMLGreedy))
	passed := 0
	for _, c := range r.Cases {
		tok := "tokens not checked"
		if c.TokensChecked {
			tok = "tokens ok"
			if !c.TokensMatch {
				tok = "TOKENS DIFFER"
			}
		}
		verdict := "PASS"
		if c.Pass {
			passed++
		} else {
			verdict = "FAIL"
		}
		fmt.Fprintf(&b, "  case %d: %4d+%d tokens, %s, %5d compared, max %.4f @%d, mean %.4f, argmax %d/%d, greedy %d/%d  %s\n",
			c.Index, c.PromptTokens, c.ForcedTokens-c.PromptTokens, tok, c.Compared, c.MaxAbs, c.WorstPos, c.MeanAbs,
			c.ArgmaxChecked-c.ArgmaxMismatch, c.ArgmaxChecked, c.GreedyMatched, c.GreedyLimit, verdict)
		for _, f := range c.Failures {
			fmt.Fprintf(&b, "    - %s\n", f)
		}
	}
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "%s: %d/%d cases, max abs %.4f, mean abs %.4f\n", verdict, passed, len(r.Cases), r.MaxAbs(), r.MeanAbs())
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// Exactness counts, over cases run with Options.PerPosition, the positions
// whose largest error is below 1e-4 (bit-exact up to printing), and returns
// each case's first position above it (-1 when all are exact). It shows
// how far the engine follows llama.cpp's arithmetic before one rounding
// differs: a better measure than the error sizes while tuning kernels.
func (r Report) Exactness() (exact, total int, firstInexact []int) {
	for _, c := range r.Cases {
		first := -1
		for i, e := range c.PosMaxAbs {
			total++
			if e < 1e-4 {
				exact++
			} else if first < 0 {
				first = i
			}
		}
		firstInexact = append(firstInexact, first)
	}
	return exact, total, firstInexact
}
