// Package stopstr finds stop strings in generated text that arrives in
// pieces (one per token, from an incremental detokenizer), across piece
// boundaries. It tells the caller which text is safe to stream now and holds
// back the tail that may still turn into a stop string.
//
// Match rule: the stop occurrence that ends first in the generated text
// wins; among those ending at the same byte, the one that starts first (the
// longest); among equal strings, the lowest index. This is what a reader
// seeing one byte at a time would find first, so the outcome does not
// depend on how the text was split into pieces.
package stopstr

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidStop is wrapped by New's errors (an empty stop string or one
// that is not valid UTF-8); callers map it to INVALID_ARGUMENT.
var ErrInvalidStop = errors.New("stopstr: invalid stop string")

// Match reports which stop string ended the text.
type Match struct {
	Index int    // position in the stops given to New
	Text  string // the stop string
}

// Matcher tracks one output sequence. It is not safe for concurrent use.
type Matcher struct {
	stops   []string
	include bool // the matched stop string stays in the emitted text
	maxLen  int  // longest stop string, in bytes

	held    string // text not yet emitted: a proper prefix of some stop
	matched bool
	match   Match
	done    bool // matched or flushed: nothing more is emitted
}

// Bounds of a request's stop strings (docs/api.md, "Limits"): every Push
// scans the held-back text against each of them.
const (
	MaxStops     = 32
	MaxStopBytes = 256
)

// New returns a Matcher for stops. With includeStop the emitted text ends
// after the matched stop string, otherwise right before it. A Matcher with
// no stops passes every piece straight through.
func New(stops []string, includeStop bool) (*Matcher, error) {
	if len(stops) > MaxStops {
		return nil, fmt.Errorf("%w: %d stop strings, at most %d", ErrInvalidStop, len(stops), MaxStops)
	}
	m := &Matcher{stops: make([]string, len(stops)), include: includeStop}
	for i, s := range stops {
		if s == "" {
			return nil, fmt.Errorf("%w: stop string %d is empty", ErrInvalidStop, i)
		}
		if len(s) > MaxStopBytes {
			return nil, fmt.Errorf("%w: stop string %d is %d bytes, at most %d", ErrInvalidStop, i, len(s), MaxStopBytes)
		}
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("%w: stop string %d is not valid UTF-8", ErrInvalidStop, i)
		}
		m.stops[i] = s
		m.maxLen = max(m.maxLen, len(s))
	}
	return m, nil
}

// Push adds the next piece of generated text. It returns the text that can
// be emitted now and whether a stop string matched. After a match the
// emitted text has been cut at the stop string and every later call
// returns "". Text that may still become a stop string is held back.
func (m *Matcher) Push(piece string) (emit string, matched bool) {
	if m.done {
		return "", m.matched
	}
	if len(m.stops) == 0 {
		return piece, false
	}
	buf := m.held + piece
	if i, start, end, ok := m.find(buf, len(m.held)); ok {
		m.matched, m.done = true, true
		m.match = Match{Index: i, Text: m.stops[i]}
		m.held = ""
		if m.include {
			return buf[:end], true
		}
		return buf[:start], true
	}
	return m.holdBack(buf), false
}

// PushNoStop adds a piece while stop strings must not end the text yet (for
// example before min_tokens is reached): no stop string can end inside this
// piece, but the tail is still held back, so a stop string that starts here
// and ends in a later Push is found.
func (m *Matcher) PushNoStop(piece string) string {
	if m.done {
		return ""
	}
	if len(m.stops) == 0 {
		return piece
	}
	return m.holdBack(m.held + piece)
}

// Flush ends the text without a stop: it returns the held-back text. Later
// calls return "".
func (m *Matcher) Flush() string {
	if m.done {
		return ""
	}
	m.done = true
	out := m.held
	m.held = ""
	return out
}

// Match returns the stop string that ended the text, if one did.
func (m *Matcher) Match() (Match, bool) { return m.match, m.matched }

// Held returns the text currently held back.
func (m *Matcher) Held() string { return m.held }

// Done reports whether the text has ended (a stop matched or Flush ran).
func (m *Matcher) Done() bool { return m.done }

// find returns the winning stop occurrence in buf that ends after byte
// offset old (the part before it was already searched).
func (m *Matcher) find(buf string, old int) (idx, start, end int, ok bool) {
	for i, s := range m.stops {
		from := max(0, old-len(s)+1) // earliest start whose end is > old
		j := strings.Index(buf[from:], s)
		if j < 0 {
			continue
		}
		st := from + j
		en := st + len(s)
		if !ok || en < end || (en == end && st < start) {
			idx, start, end, ok = i, st, en, true
		}
	}
	return idx, start, end, ok
}

// holdBack keeps in m.held the longest suffix of buf that is a proper
// prefix of a stop string and returns the rest, which no stop string can
// start in any more.
func (m *Matcher) holdBack(buf string) string {
	for p := max(0, len(buf)-m.maxLen+1); p < len(buf); p++ {
		tail := buf[p:]
		for _, s := range m.stops {
			if len(tail) < len(s) && s[0] == tail[0] && strings.HasPrefix(s, tail) {
				m.held = tail
				return buf[:p]
			}
		}
	}
	m.held = ""
	return buf
}
