package openai

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/valyala/bytebufferpool"

	"oengine/toolcall"
)

// Response shapes (docs/api.md).
type (
	chatLogprobs struct {
		Content []chatTokenLogprob `json:"content"`
	}
	chatTokenLogprob struct {
		Token       string         `json:"token"`
		Logprob     float64        `json:"logprob"`
		Bytes       []int          `json:"bytes"`
		TopLogprobs []chatTopEntry `json:"top_logprobs"`
	}
	chatTopEntry struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	}
	completionLogprobs struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []*float64           `json:"token_logprobs"` // null: an echoed prompt's first token
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`   // null likewise
		TextOffset    []int                `json:"text_offset"`
	}
	message struct {
		Role             string         `json:"role,omitempty"`
		Content          *string        `json:"content,omitempty"`
		ReasoningContent *string        `json:"reasoning_content,omitempty"`
		ToolCalls        []toolCallJSON `json:"tool_calls,omitempty"`
	}
	choice struct {
		Index        int      `json:"index"`
		Message      *message `json:"message,omitempty"` // chat, whole
		Delta        *message `json:"delta,omitempty"`   // chat, chunk
		Text         *string  `json:"text,omitempty"`    // completions
		Logprobs     any      `json:"logprobs"`
		FinishReason *string  `json:"finish_reason"`
	}
	response struct {
		ID                string   `json:"id"`
		Object            string   `json:"object"`
		Created           int64    `json:"created"`
		Model             string   `json:"model"`
		SystemFingerprint string   `json:"system_fingerprint"`
		Choices           []choice `json:"choices"`
		Usage             *usage   `json:"usage,omitempty"`
	}
)

func (r *runner) envelope(object string) response {
	return response{ID: r.o.id, Object: object, Created: r.o.created, Model: r.o.model.Name, SystemFingerprint: r.a.fingerprint}
}

// chatLP converts logprobs for chat.
func (r *runner) chatLP(lps []tokenLogprob) *chatLogprobs {
	out := &chatLogprobs{Content: make([]chatTokenLogprob, 0, len(lps))}
	m := r.o.model
	for _, t := range lps {
		e := chatTokenLogprob{Token: tokenText(m, t.id), Logprob: t.logprob, Bytes: tokenBytes(m, t.id), TopLogprobs: []chatTopEntry{}}
		for _, a := range t.top {
			e.TopLogprobs = append(e.TopLogprobs, chatTopEntry{Token: tokenText(m, a.id), Logprob: a.logprob, Bytes: tokenBytes(m, a.id)})
		}
		out.Content = append(out.Content, e)
	}
	return out
}

// completionLP converts logprobs for completions; offset is the choice's
// text length before these tokens.
func (r *runner) completionLP(lps []tokenLogprob, offset int) *completionLogprobs {
	out := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	m := r.o.model
	for _, t := range lps {
		text := tokenText(m, t.id)
		out.Tokens = append(out.Tokens, text)
		if t.none {
			out.TokenLogprobs, out.TopLogprobs = append(out.TokenLogprobs, nil), append(out.TopLogprobs, nil)
		} else {
			lp := t.logprob
			top := map[string]float64{}
			for _, a := range t.top {
				top[tokenText(m, a.id)] = a.logprob
			}
			out.TokenLogprobs, out.TopLogprobs = append(out.TokenLogprobs, &lp), append(out.TopLogprobs, top)
		}
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(text)
	}
	return out
}

// bodySink collects the whole response (stream: false).
type bodySink struct {
	w http.ResponseWriter
}

func (b *bodySink) begin(r *runner) error { return nil }

func (b *bodySink) delta(r *runner, idx int, content, reasoning string, lps []tokenLogprob) error {
	c := r.choices[idx]
	c.text = append(c.text, content...)
	c.reason = append(c.reason, reasoning...)
	c.logprobs = append(c.logprobs, lps...)
	return nil
}

func (b *bodySink) toolCalls(r *runner, idx int, calls []toolcall.Call) error {
	r.choices[idx].calls = toolCallsOut(calls, false)
	return nil
}

func (b *bodySink) finish(r *runner, idx int) error { return nil }

func (b *bodySink) end(r *runner) error {
	object := "chat.completion"
	if r.o.kind == kindCompletion {
		object = "text_completion"
	}
	resp := r.envelope(object)
	for i, c := range r.choices {
		fr := c.finish
		if fr == "" {
			fr = "stop"
		}
		ch := choice{Index: i, FinishReason: &fr}
		text := string(c.text)
		switch r.o.kind {
		case kindChat:
			msg := &message{Role: "assistant", Content: &text}
			if len(c.calls) > 0 {
				msg.ToolCalls = c.calls
				if text == "" {
					msg.Content = nil // OpenAI: content is null beside tool calls
				}
			}
			if len(c.reason) > 0 {
				rs := string(c.reason)
				msg.ReasoningContent = &rs
			}
			ch.Message = msg
			if r.o.logprobs {
				ch.Logprobs = r.chatLP(c.logprobs)
			}
		case kindCompletion:
			ch.Text = &text
			if r.o.logprobs {
				off := len(text)
				for _, t := range c.logprobs {
					off -= len(tokenText(r.o.model, t.id))
				}
				ch.Logprobs = r.completionLP(c.logprobs, max(off, 0))
			}
		}
		resp.Choices = append(resp.Choices, ch)
	}
	u := r.usage
	resp.Usage = &u
	writeJSON(b.w, http.StatusOK, resp)
	return nil
}

func (b *bodySink) fail(r *runner, e *apiError) error {
	writeError(b.w, e) // in the route's form (an Anthropic or TEI writer)
	return nil
}

// streamSink writes chunks as server-sent events: `data: {chunk}` lines,
// then `data: [DONE]`. The engine stream is the bounded queue: while a
// write blocks (a slow reader) no event is taken, so the engine pauses the
// sequence; a write blocked beyond WriteTimeout ends the response and
// cancels the generation.
type streamSink struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	offsets []int // completions: text length per choice so far
}

func newStreamSink(w http.ResponseWriter, timeout time.Duration) *streamSink {
	return &streamSink{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// open answers 200 with the event stream's headers.
func (s *streamSink) open() {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// finished clears the write deadline after the stream's last event: the
// connection may serve another request.
func (s *streamSink) finished() { _ = s.rc.SetWriteDeadline(time.Time{}) }

func (s *streamSink) begin(r *runner) error {
	s.open()
	s.offsets = make([]int, len(r.choices))
	if r.o.kind != kindChat {
		return s.rc.Flush()
	}
	// Chat streams open every choice with the assistant role.
	resp := r.envelope("chat.completion.chunk")
	empty := ""
	for i := range r.choices {
		resp.Choices = append(resp.Choices, choice{Index: i, Delta: &message{Role: "assistant", Content: &empty}})
	}
	return s.chunk(resp)
}

func (s *streamSink) delta(r *runner, idx int, content, reasoning string, lps []tokenLogprob) error {
	ch := choice{Index: idx}
	switch r.o.kind {
	case kindChat:
		d := &message{}
		if content != "" || reasoning == "" {
			d.Content = &content
		}
		if reasoning != "" {
			d.ReasoningContent = &reasoning
		}
		ch.Delta = d
		if r.o.logprobs && len(lps) > 0 {
			ch.Logprobs = r.chatLP(lps)
		}
		resp := r.envelope("chat.completion.chunk")
		resp.Choices = []choice{ch}
		return s.chunk(resp)
	default:
		ch.Text = &content
		if r.o.logprobs && len(lps) > 0 {
			ch.Logprobs = r.completionLP(lps, s.offsets[idx])
		}
		s.offsets[idx] += len(content)
		resp := r.envelope("text_completion")
		resp.Choices = []choice{ch}
		return s.chunk(resp)
	}
}

func (s *streamSink) toolCalls(r *runner, idx int, calls []toolcall.Call) error {
	resp := r.envelope("chat.completion.chunk")
	resp.Choices = []choice{{Index: idx, Delta: &message{ToolCalls: toolCallsOut(calls, true)}}}
	return s.chunk(resp)
}

func (s *streamSink) finish(r *runner, idx int) error {
	fr := r.choices[idx].finish
	ch := choice{Index: idx, FinishReason: &fr}
	object := "text_completion"
	if r.o.kind == kindChat {
		ch.Delta = &message{}
		object = "chat.completion.chunk"
	} else {
		empty := ""
		ch.Text = &empty
	}
	resp := r.envelope(object)
	resp.Choices = []choice{ch}
	return s.chunk(resp)
}

func (s *streamSink) end(r *runner) error {
	if r.o.includeUsage {
		object := "text_completion"
		if r.o.kind == kindChat {
			object = "chat.completion.chunk"
		}
		resp := r.envelope(object)
		resp.Choices = []choice{}
		u := r.usage
		resp.Usage = &u
		if err := s.chunk(resp); err != nil {
			return err
		}
	}
	err := s.write([]byte("data: [DONE]\n\n"))
	if err == nil {
		s.finished()
	}
	return err
}

// fail ends a started stream with one error chunk and no [DONE].
func (s *streamSink) fail(r *runner, e *apiError) error {
	return s.chunk(e.body())
}

// chunk writes one `data: {v}` event.
func (s *streamSink) chunk(v any) error { return s.frame("", v) }

// named writes one event of a type, `event: typ` then `data: {v}` (the
// Responses and Messages APIs' events).
func (s *streamSink) named(typ string, v any) error { return s.frame(typ, v) }

func (s *streamSink) frame(typ string, v any) error {
	buf := bytebufferpool.Get()
	defer bytebufferpool.Put(buf)
	if typ != "" {
		buf.B = append(buf.B, "event: "...)
		buf.B = append(buf.B, typ...)
		buf.B = append(buf.B, '\n')
	}
	buf.B = append(buf.B, "data: "...)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // ends with '\n'
		return err
	}
	buf.B = append(buf.B, '\n')
	return s.write(buf.B)
}

// write writes and flushes under the write deadline.
func (s *streamSink) write(b []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout)) // ErrNotSupported: no deadline
	_, err := s.w.Write(b)
	if err == nil {
		err = s.rc.Flush()
	}
	// An error (a gone or stalled reader) ends the response; runJob's
	// deferred Cancel then frees the sequence.
	return err
}
