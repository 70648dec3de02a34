package chat

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"

	"oengine/model/tokenizer"
)

// Placeholder delimiters (Unicode private use): a placeholder is
// phOpen + nonce + "." + index + phClose.
const (
	phOpen  = "\uE000"
	phClose = "\uE001"
)

// neutralizer replaces the control-token texts in a request's strings by
// placeholders and, after the render, tokenizes the result (package
// comment). One per render.
type neutralizer struct {
	e      *Encoder
	nonce  string
	hidden []string // placeholder index -> original control text
}

func (n *neutralizer) message(m Message) Message {
	m.Content = n.str(m.Content)
	m.ReasoningContent = n.str(m.ReasoningContent)
	m.Name = n.str(m.Name)
	m.ToolCallID = n.str(m.ToolCallID)
	if len(m.ToolCalls) > 0 {
		calls := make([]ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			calls[i] = ToolCall{ID: n.str(c.ID), Name: n.str(c.Name), Arguments: n.str(c.Arguments)}
		}
		m.ToolCalls = calls
	}
	return m
}

// value neutralizes every string inside a template value.
func (n *neutralizer) value(v jinja.Value) jinja.Value {
	switch {
	case v.IsString():
		return jinja.NewString(n.str(v.AsString()))
	case v.IsList():
		items := v.AsList().Items
		out := make([]jinja.Value, len(items))
		for i, it := range items {
			out[i] = n.value(it)
		}
		return jinja.NewList(out)
	case v.IsDict():
		d := v.AsDict()
		out := jinja.NewDict()
		od := out.AsDict()
		for _, k := range d.OrderedKeys() {
			x, _ := d.Get(k)
			od.Set(k, n.value(x))
		}
		return out
	}
	return v
}

// str replaces each control-token text in s by a new placeholder.
func (n *neutralizer) str(s string) string {
	i, l := n.e.indexControl(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	for i >= 0 {
		b.WriteString(s[:i])
		b.WriteString(phOpen + n.nonce + "." + strconv.Itoa(len(n.hidden)) + phClose)
		n.hidden = append(n.hidden, s[i:i+l])
		s = s[i+l:]
		i, l = n.e.indexControl(s)
	}
	b.WriteString(s)
	return b.String()
}

// indexControl finds the leftmost control-token text in s (the longest at
// that position): its offset and length, or -1.
func (e *Encoder) indexControl(s string) (int, int) {
	for i := 0; i < len(s); i++ {
		for _, t := range e.controls[s[i]] {
			if strings.HasPrefix(s[i:], t) {
				return i, len(t)
			}
		}
	}
	return -1, 0
}

// encode tokenizes the rendered text out and returns the tokens and the
// text with the placeholders put back.
func (n *neutralizer) encode(out string) ([]int32, string, error) {
	special := tokenizer.EncodeOptions{ParseSpecial: true}
	if len(n.hidden) == 0 {
		if strings.Contains(out, phOpen+n.nonce) {
			return nil, "", fmt.Errorf("%w: the template altered a message's text", ErrTemplate)
		}
		return n.e.tok.Encode(out, special), out, nil
	}
	// Cut out at the template's markers; a gap between markers that holds
	// a placeholder is client text, tokenized as plain text.
	type piece struct {
		text  string
		plain bool
	}
	var pieces []piece
	var tmplText strings.Builder // template text not yet flushed
	rest := out
	for rest != "" {
		i, l := n.e.indexControl(rest)
		gap := rest
		if i >= 0 {
			gap = rest[:i]
		}
		if strings.Contains(gap, phOpen) {
			restored, err := n.restore(gap)
			if err != nil {
				return nil, "", err
			}
			if tmplText.Len() > 0 {
				pieces = append(pieces, piece{text: tmplText.String()})
				tmplText.Reset()
			}
			pieces = append(pieces, piece{text: restored, plain: true})
		} else {
			tmplText.WriteString(gap)
		}
		if i < 0 {
			break
		}
		tmplText.WriteString(rest[i : i+l])
		rest = rest[i+l:]
	}
	if tmplText.Len() > 0 {
		pieces = append(pieces, piece{text: tmplText.String()})
	}
	var ids []int32
	var text strings.Builder
	for _, p := range pieces {
		text.WriteString(p.text)
		if p.plain {
			// A gap follows a marker or starts the text: SentencePiece's
			// leading space applies as in the whole text.
			ids = append(ids, n.e.tok.Encode(p.text, tokenizer.EncodeOptions{})...)
			continue
		}
		special.Continuation = len(ids) > 0
		ids = append(ids, n.e.tok.Encode(p.text, special)...)
	}
	return ids, text.String(), nil
}

// restore puts the original texts back in place of the placeholders.
func (n *neutralizer) restore(s string) (string, error) {
	var b strings.Builder
	prefix := phOpen + n.nonce + "."
	for {
		i := strings.Index(s, phOpen)
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		s = s[i:]
		j := strings.Index(s, phClose)
		if !strings.HasPrefix(s, prefix) || j < 0 {
			// A private-use character of the client's own, or a
			// placeholder the template cut: keep the text when it is not
			// ours.
			if strings.HasPrefix(s, phOpen+n.nonce) {
				return "", fmt.Errorf("%w: the template altered a message's text", ErrTemplate)
			}
			b.WriteString(phOpen)
			s = s[len(phOpen):]
			continue
		}
		k, err := strconv.Atoi(s[len(prefix):j])
		if err != nil || k < 0 || k >= len(n.hidden) {
			return "", fmt.Errorf("%w: the template altered a message's text", ErrTemplate)
		}
		b.WriteString(n.hidden[k])
		s = s[j+len(phClose):]
	}
}
