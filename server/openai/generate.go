package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"net/http"
	"time"

	"oengine/engine"
	"oengine/model/chat"
	"oengine/server"
	"oengine/toolcall"
)

// kind is the response format: chat.completion or text_completion.
type kind int

const (
	kindChat kind = iota
	kindCompletion
)

// job is one prompt of an accepted request, ready to run.
type job struct {
	st    server.Stream
	close func() // after the terminal event (a session turn's Close); may be nil
	base  int    // choice index of the job's output 0
	n     int
	echo  string // completions echo: the prompt text, sent first
	// echoLP: echo with logprobs: the echo waits for the prompt's
	// logprobs (EventPrompt) and carries them.
	echoLP bool
	// inReasoning: the prompt opened a reasoning block (split only).
	inReasoning bool
}

// runOpts are a request's response choices.
type runOpts struct {
	kind         kind
	id           string
	model        *server.Model
	created      int64
	stream       bool
	includeUsage bool
	split        bool // move <think> blocks to reasoning_content
	// harmony: the output is gpt-oss's harmony format, rendered with its
	// control tokens (engine.Request.SpecialText): channels split into
	// content, reasoning_content and tool calls (chat.HarmonyParser).
	harmony  bool
	logprobs bool // output logprobs were asked for
	choices  int  // total choices of the request
	route    string
	start    time.Time
	tools    *toolcall.Parser // non-nil: parse tool calls out of the content
}

// choiceState accumulates one choice.
type choiceState struct {
	filter   *chat.ReasoningFilter // nil: no split
	harmony  *chat.HarmonyParser   // runOpts.harmony
	text     []byte
	reason   []byte
	logprobs []tokenLogprob
	finish   string
	stop     string // the stop string that ended it, if one did
	done     bool
	// Tool-call parsing (runOpts.tools): raw is the whole content so far,
	// sent how much of it went out as content; calls the parsed calls.
	raw   []byte
	sent  int
	calls []toolCallJSON
}

// tokenLogprob is one generated token's logprob with its alternatives.
type tokenLogprob struct {
	id      int32
	logprob float64
	top     []altLogprob
	// none: the token has no logprob (a prompt's first: nothing precedes
	// it); completions show null.
	none bool
}

type altLogprob struct {
	id      int32
	logprob float64
}

// usage is OpenAI's usage object.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *usage) add(e *engine.Usage) {
	if e == nil {
		return
	}
	u.PromptTokens += e.PromptTokens
	u.CompletionTokens += e.CompletionTokens
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens += e.CachedPromptTokens
}

// newID is a response id with 96 random bits.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// requestID is the client's X-Request-Id when it is a valid id (at most
// 256 bytes of printable ASCII), else a new one with prefix.
func requestID(r *http.Request, prefix string) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= server.MaxClientIDBytes {
		ok := true
		for i := 0; i < len(id); i++ {
			if id[i] < 0x21 || id[i] > 0x7e {
				ok = false
				break
			}
		}
		if ok {
			return id
		}
	}
	return newID(prefix)
}

// finishName maps an engine finish reason to OpenAI's.
func finishName(f *engine.Finish) string {
	if f == nil {
		return "stop"
	}
	switch f.Reason {
	case engine.FinishLength:
		return "length"
	case engine.FinishCancelled:
		return "abort"
	}
	return "stop"
}

// runner relays the engine events of a request's jobs to a sink.
type runner struct {
	a       *api
	o       runOpts
	sink    sink
	choices []*choiceState
	usage   usage
	rm      *server.RequestMetrics
}

// sink is where a request's response goes: a streamed or a whole body.
type sink interface {
	// begin: choices are known; streams write their first chunk.
	begin(r *runner) error
	// delta: new text of one choice (either part may be empty).
	delta(r *runner, idx int, content, reasoning string, lps []tokenLogprob) error
	// toolCalls: the calls parsed from one choice's output, before its
	// finish.
	toolCalls(r *runner, idx int, calls []toolcall.Call) error
	// finish: one choice finished.
	finish(r *runner, idx int) error
	// end: every job ended normally.
	end(r *runner) error
	// fail: a job failed after acceptance.
	fail(r *runner, e *apiError) error
}

func (a *api) newRunner(o runOpts, s sink) *runner {
	r := &runner{a: a, o: o, sink: s, rm: a.s.Metrics().Request(o.route, o.model.Name, o.start)}
	r.choices = make([]*choiceState, o.choices)
	for i := range r.choices {
		r.choices[i] = &choiceState{}
	}
	return r
}

// run runs the jobs in order. next(i) submits job i (nil when there are
// no more); submitting later jobs only after earlier ones ended keeps one
// sequence group per request at a time.
func (r *runner) run(ctx context.Context, first *job, next func(i int) (*job, *apiError)) {
	if err := r.sink.begin(r); err != nil {
		first.st.Cancel()
		if first.close != nil {
			first.close() // a session turn must be driven to its end or closed
		}
		return
	}
	j := first
	for i := 0; j != nil; i++ {
		ok := r.runJob(ctx, j)
		if !ok {
			return
		}
		nj, aerr := next(i + 1)
		if aerr != nil {
			r.rm.Failed(aerr.reason)
			_ = r.sink.fail(r, aerr)
			return
		}
		j = nj
	}
	r.rm.Done(time.Now())
	_ = r.sink.end(r)
}

// runJob relays one job to its terminal event; false: the response ended
// (failure or a gone client).
func (r *runner) runJob(ctx context.Context, j *job) bool {
	defer j.st.Cancel() // no-op after the terminal event
	if j.close != nil {
		defer j.close()
	}
	for k := 0; k < j.n; k++ {
		c := r.choices[j.base+k]
		switch {
		case r.o.harmony:
			c.harmony = chat.NewHarmonyParser()
		case r.o.split:
			c.filter = chat.NewReasoningFilter(j.inReasoning)
		}
		if j.echo != "" && !j.echoLP {
			if err := r.sink.delta(r, j.base+k, j.echo, "", nil); err != nil {
				return false
			}
		}
	}
	for {
		ev, err := j.st.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				r.rm.Failed("CANCELLED") // the client left: the deferred Cancel frees the sequence
				return false
			}
			if errors.Is(err, io.EOF) {
				err = errors.New("engine stream ended without a terminal event")
			}
			aerr := classified(err)
			r.rm.Failed(aerr.reason)
			_ = r.sink.fail(r, aerr)
			return false
		}
		switch ev.Kind {
		case engine.EventPrompt:
			if !j.echoLP || ev.Prompt == nil {
				continue
			}
			lps := promptLogprobs(ev.Prompt)
			for k := 0; k < j.n; k++ {
				if err := r.sink.delta(r, j.base+k, j.echo, "", lps); err != nil {
					return false
				}
			}
		case engine.EventTokens:
			if ev.Output < 0 || ev.Output >= j.n {
				continue
			}
			r.rm.Tokens(ev.Output, time.Now())
			idx := j.base + ev.Output
			content, reasoning := ev.Text, ""
			switch c := r.choices[idx]; {
			case c.harmony != nil:
				content, reasoning = c.harmony.Push(ev.Text)
			case c.filter != nil:
				content, reasoning = c.filter.PushSplit(ev.Text)
			}
			if r.o.tools != nil {
				content = r.choices[idx].toolText(r.o.tools, content)
			}
			var lps []tokenLogprob
			if r.o.logprobs {
				lps = logprobsOf(ev.Tokens)
			}
			if content == "" && reasoning == "" && len(lps) == 0 {
				continue
			}
			if err := r.sink.delta(r, idx, content, reasoning, lps); err != nil {
				return false
			}
		case engine.EventFinished:
			if ev.Output < 0 || ev.Output >= j.n || ev.Finish == nil || ev.Finish.Reason == engine.FinishError {
				continue
			}
			if ev.Finish.Kind == engine.StopString {
				r.choices[j.base+ev.Output].stop = ev.Finish.Text
			}
			if err := r.finishChoice(j.base+ev.Output, finishName(ev.Finish)); err != nil {
				return false
			}
		case engine.EventDone:
			r.usage.add(ev.Usage)
			return true
		case engine.EventError:
			r.usage.add(ev.Usage)
			aerr := classified(ev.Err)
			if ev.Err == nil {
				aerr = classified(errors.New("engine: error event without an error"))
			}
			if aerr.reason == "CANCELLED" {
				if ctx.Err() != nil {
					r.rm.Failed("CANCELLED")
					return false
				}
				// Cancelled by the server (Abort, drain): a normal end.
				for k := 0; k < j.n; k++ {
					if !r.choices[j.base+k].done {
						if err := r.finishChoice(j.base+k, "abort"); err != nil {
							return false
						}
					}
				}
				return true
			}
			r.rm.Failed(aerr.reason)
			_ = r.sink.fail(r, aerr)
			return false
		}
	}
}

// finishChoice flushes the choice's filter and reports its end.
func (r *runner) finishChoice(idx int, reason string) error {
	c := r.choices[idx]
	if c.done {
		return nil
	}
	if c.harmony != nil {
		if err := r.finishHarmony(idx); err != nil {
			return err
		}
		if len(c.harmony.Calls()) > 0 && reason == "stop" {
			reason = "tool_calls"
		}
	}
	if c.filter != nil {
		content, reasoning := c.filter.FlushSplit()
		if r.o.tools != nil {
			content = c.toolText(r.o.tools, content)
		}
		if content != "" || reasoning != "" {
			if err := r.sink.delta(r, idx, content, reasoning, nil); err != nil {
				return err
			}
		}
	}
	if r.o.tools != nil {
		content, calls := c.toolFinish(r.o.tools)
		if content != "" {
			if err := r.sink.delta(r, idx, content, "", nil); err != nil {
				return err
			}
		}
		if len(calls) > 0 {
			if err := r.sink.toolCalls(r, idx, calls); err != nil {
				return err
			}
			if reason == "stop" {
				reason = "tool_calls"
			}
		}
	}
	c.done, c.finish = true, reason
	metric := reason
	if reason == "abort" {
		metric = "cancelled"
	}
	r.rm.Finished(metric)
	return r.sink.finish(r, idx)
}

// finishHarmony flushes a harmony choice's parser and reports its tool
// calls.
func (r *runner) finishHarmony(idx int) error {
	p := r.choices[idx].harmony
	content, reasoning := p.Flush()
	if content != "" || reasoning != "" {
		if err := r.sink.delta(r, idx, content, reasoning, nil); err != nil {
			return err
		}
	}
	if len(p.Calls()) == 0 {
		return nil
	}
	calls := make([]toolcall.Call, len(p.Calls()))
	for i, c := range p.Calls() {
		calls[i] = toolcall.Call{Name: c.Name, Arguments: c.Arguments}
	}
	return r.sink.toolCalls(r, idx, calls)
}

func logprobsOf(toks []engine.Token) []tokenLogprob {
	out := make([]tokenLogprob, 0, len(toks))
	for _, t := range toks {
		if t.Logprobs == nil {
			continue
		}
		tl := tokenLogprob{id: t.ID, logprob: finite(t.Logprobs.Chosen.Logprob)}
		for _, c := range t.Logprobs.Candidates {
			tl.top = append(tl.top, altLogprob{id: c.Token, logprob: finite(c.Logprob)})
		}
		out = append(out, tl)
	}
	return out
}

// promptLogprobs is the prompt's tokens with their logprobs (echo), the
// first without one.
func promptLogprobs(p *engine.PromptInfo) []tokenLogprob {
	out := make([]tokenLogprob, len(p.Tokens))
	for i, id := range p.Tokens {
		out[i] = tokenLogprob{id: id, none: i == 0 || i >= len(p.Logprobs)}
		if out[i].none {
			continue
		}
		lp := p.Logprobs[i]
		out[i].logprob = finite(lp.Chosen.Logprob)
		for _, c := range lp.Candidates {
			out[i].top = append(out[i].top, altLogprob{id: c.Token, logprob: finite(c.Logprob)})
		}
	}
	return out
}

// finite replaces -Inf (a token without mass) by OpenAI's -9999.
func finite(v float64) float64 {
	if math.IsInf(v, -1) || math.IsNaN(v) {
		return -9999
	}
	return v
}

// tokenText and tokenBytes name a token for logprobs.
func tokenText(m *server.Model, id int32) string { return m.TokenText(id) }

func tokenBytes(m *server.Model, id int32) []int {
	var b []byte
	if m.Tokenizer != nil && int(id) < m.Tokenizer.VocabSize() && id >= 0 {
		b = m.Tokenizer.Piece(id)
	} else {
		b = []byte(m.TokenText(id))
	}
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}
