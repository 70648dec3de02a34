package chat

import "strings"

// ReasoningFilter removes reasoning blocks (<think>...</think>) from
// streamed text. Push it each new piece of generated text; it returns the
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
	opened, f.pending = f.pending, 0
	buf := text
	if f.held != "" {
		buf = f.held + text
		f.held = ""
	}
	var out strings.Builder
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
			buf = buf[i+len(ThinkClose):]
			f.in = false
			continue
		}
		k := markerPrefixTail(buf, ThinkClose)
		f.held = buf[len(buf)-k:]
		break
	}
	return out.String(), opened
}

// Flush ends the text: held bytes outside a block are visible (they were
// not a marker after all), inside a block they are dropped.
func (f *ReasoningFilter) Flush() string {
	h := f.held
	f.held = ""
	if f.in {
		return ""
	}
	return h
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
