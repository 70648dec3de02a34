package tokenizer

import "strings"

// fragment is a piece of the input: a special token (tok >= 0) or raw
// text[start:end] still to be tokenized.
type fragment struct {
	tok        int32
	start, end int
}

// partition splits text around special-token texts as llama.cpp's
// tokenizer_st_partition does: special tokens are tried longest first; for
// each, every raw fragment is cut at each occurrence, left to right.
// Control and unknown tokens take part only when parseSpecial is set;
// user-defined tokens always do. A token with the lstrip / rstrip
// attribute swallows the C-locale whitespace on that side.
func (t *Tokenizer) partition(text string, parseSpecial bool, s *encodeScratch) []fragment {
	frags := s.frags[:0]
	if text == "" {
		return frags
	}
	frags = append(frags, fragment{tok: -1, start: 0, end: len(text)})
	tmp := s.tmp[:0]
	for _, id := range t.presentSpecials(text, parseSpecial, s) {
		a := t.attrs[id]
		tokText := t.v.Tokens[id]
		tmp = tmp[:0]
		for _, f := range frags {
			if f.tok >= 0 {
				tmp = append(tmp, f)
				continue
			}
			start, end := f.start, f.end
			for start < end {
				m := strings.Index(text[start:end], tokText)
				if m < 0 {
					break
				}
				m += start
				left := m
				if a&attrLStrip != 0 {
					for left > start && isCSpace(text[left-1]) {
						left--
					}
				}
				if left > start {
					tmp = append(tmp, fragment{tok: -1, start: start, end: left})
				}
				tmp = append(tmp, fragment{tok: id, start: m, end: m + len(tokText)})
				start = m + len(tokText)
				if a&attrRStrip != 0 {
					for start < end && isCSpace(text[start]) {
						start++
					}
				}
			}
			if start < end {
				tmp = append(tmp, fragment{tok: -1, start: start, end: end})
			}
		}
		frags, tmp = tmp, frags
	}
	s.frags, s.tmp = frags, tmp
	return frags
}

// presentSpecials lists, in priority order, the special tokens that take
// part (see partition) and occur somewhere in text, found in one pass over
// text with the specials bucketed by first byte.
func (t *Tokenizer) presentSpecials(text string, parseSpecial bool, s *encodeScratch) []int32 {
	s.present = s.present[:0]
	if len(t.specials) == 0 {
		return s.present
	}
	if cap(s.seen) < len(t.specials) {
		s.seen = make([]bool, len(t.specials))
	}
	seen := s.seen[:len(t.specials)]
	clear(seen)
	found := 0
	for i := 0; i < len(text); i++ {
		for _, k := range t.specialsByByte[text[i]] {
			if seen[k] {
				continue
			}
			id := t.specials[k]
			if !parseSpecial && t.attrs[id]&(attrControl|attrUnknown) != 0 {
				continue
			}
			if strings.HasPrefix(text[i:], t.v.Tokens[id]) {
				seen[k] = true
				found++
			}
		}
	}
	if found == 0 {
		return s.present
	}
	for k, ok := range seen {
		if ok {
			s.present = append(s.present, t.specials[k])
		}
	}
	return s.present
}

// isCSpace is C's isspace in the "C" locale.
func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}
