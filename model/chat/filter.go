package chat

import "strings"

// ReasoningFilter removes reasoning blocks (<think>...</think>) from
// streamed text, or splits them out (PushSplit: the OpenAI route's
// reasoning_content). Push it each new piece of generated text; it returns the
// text outside reasoning blocks and how many blocks opened. A marker split
// across pieces is recognised: the bytes that could begin a marker are held
// back until the next piece decides. Held bytes are always a prefix of an
// ASCII marker, so the visible text is never cut inside a UTF-8 character.
// The concatenation of every visible result and Flush equals the whole text
// with its blocks removed (an unclosed block runs to the end). Not safe for
// concurrent use.
type ReasoningFilter struct {
	in      bool   // inside a block
	held    string // a possible marker prefix, not yet decided
	pending int    // blocks opened before the first Push (InReasoning prompts)
}

// NewReasoningFilter returns a filter; inBlock starts it inside a block
// (the prompt opened it), which counts as one opened block on the first
// Push.
func NewReasoningFilter(inBlock bool) *ReasoningFilter {
	f := &ReasoningFilter{in: inBlock}
	if inBlock {
		f.pending = 1
	}
	return f
}

// InBlock reports whether the text so far ends inside a reasoning block.
func (f *ReasoningFilter) InBlock() bool { return f.in }

// Push adds text and returns the newly visible text and the number of
// reasoning blocks that opened.
func (f *ReasoningFilter) Push(text string) (visible string, opened int) {
	visible, _, opened = f.push(text)
	return visible, opened
}

// PushSplit adds text and returns the newly decided text on each side:
// content outside reasoning blocks and reasoning inside them (markers
// removed from both). It is Push that keeps the reasoning.
func (f *ReasoningFilter) PushSplit(text string) (content, reasoning string) {
	content, reasoning, _ = f.push(text)
	return content, reasoning
}

func (f *ReasoningFilter) push(text string) (visible, reasoning string, opened int) {
	opened, f.pending = f.pending, 0
	buf := text
	if f.held != "" {
		buf = f.held + text
		f.held = ""
	}
	var out, rsn strings.Builder
	for {
		if !f.in {
			if i := strings.Index(buf, ThinkOpen); i >= 0 {
				out.WriteString(buf[:i])
				buf = buf[i+len(ThinkOpen):]
				f.in = true
				opened++
				continue
			}
			k := markerPrefixTail(buf, ThinkOpen)
			out.WriteString(buf[:len(buf)-k])
			f.held = buf[len(buf)-k:]
			break
		}
		if i := strings.Index(buf, ThinkClose); i >= 0 {
			rsn.WriteString(buf[:i])
			buf = buf[i+len(ThinkClose):]
			f.in = false
			continue
		}
		k := markerPrefixTail(buf, ThinkClose)
		rsn.WriteString(buf[:len(buf)-k])
		f.held = buf[len(buf)-k:]
		break
	}
	return out.String(), rsn.String(), opened
}

// Flush ends the text: held bytes outside a block are visible (they were
// not a marker after all), inside a block they are dropped.
func (f *ReasoningFilter) Flush() string {
	c, _ := f.FlushSplit()
	return c
}

// FlushSplit ends the text: held bytes go to the side they were on.
func (f *ReasoningFilter) FlushSplit() (content, reasoning string) {
	h := f.held
	f.held = ""
	if f.in {
		return "", h
	}
	return h, ""
}

// markerPrefixTail is the length of the longest suffix of s that is a
// proper prefix of marker.
func markerPrefixTail(s, marker string) int {
	for k := min(len(s), len(marker)-1); k > 0; k-- {
		if strings.HasSuffix(s, marker[:k]) {
			return k
		}
	}
	return 0
}

// StripReasoning is the whole-text reference of ReasoningFilter: text with
// every block removed, and the number of blocks. inBlock starts inside one.
func StripReasoning(text string, inBlock bool) (string, int) {
	var out strings.Builder
	n := 0
	if inBlock {
		n = 1
		i := strings.Index(text, ThinkClose)
		if i < 0 {
			return "", n
		}
		text = text[i+len(ThinkClose):]
	}
	for {
		i := strings.Index(text, ThinkOpen)
		if i < 0 {
			out.WriteString(text)
			return out.String(), n
		}
		out.WriteString(text[:i])
		n++
		rest := text[i+len(ThinkOpen):]
		j := strings.Index(rest, ThinkClose)
		if j < 0 {
			return out.String(), n
		}
		text = rest[j+len(ThinkClose):]
	}
}

// SplitReasoning is the whole-text reference of PushSplit: the text
// outside reasoning blocks and the text inside them, markers removed.
// inBlock starts inside one.
func SplitReasoning(text string, inBlock bool) (content, reasoning string) {
	var out, rsn strings.Builder
	in := inBlock
	for text != "" {
		if in {
			j := strings.Index(text, ThinkClose)
			if j < 0 {
				rsn.WriteString(text)
				break
			}
			rsn.WriteString(text[:j])
			text = text[j+len(ThinkClose):]
			in = false
			continue
		}
		i := strings.Index(text, ThinkOpen)
		if i < 0 {
			out.WriteString(text)
			break
		}
		out.WriteString(text[:i])
		text = text[i+len(ThinkOpen):]
		in = true
	}
	return out.String(), rsn.String()
}
