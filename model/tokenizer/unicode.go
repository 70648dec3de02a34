package tokenizer

import "unicode"

// Codepoint classification as llama.cpp's unicode tables see it: every
// codepoint below 0x110000 has exactly one general-category flag, with the
// "other" categories (Cc, Cf, Cs, Co and unassigned Cn) all reported as
// control; codepoints beyond the Unicode range have no flag at all. The
// whitespace set is Unicode's White_Space property (it contains U+0085 and
// U+00A0 but not U+001C..U+001F).

// cat is a codepoint's category flag.
type cat uint8

const (
	catNone    cat = iota // beyond U+10FFFF: no flag (llama.cpp's OUT_OF_RANGE / undefined)
	catNumber             // \p{N}
	catLetter             // \p{L}
	catSep                // \p{Z}
	catMark               // \p{M}
	catPunct              // \p{P}
	catSymbol             // \p{S}
	catControl            // \p{C}, including unassigned codepoints
)

// cpInfo is what the pre-tokenizers need to know about one codepoint.
type cpInfo struct {
	cat   cat
	space bool // Unicode White_Space
}

var asciiInfo [128]cpInfo

func init() {
	for r := rune(0); r < 128; r++ {
		asciiInfo[r] = classify(r)
	}
}

// infoOf classifies a codepoint (which may exceed U+10FFFF after lenient
// decoding).
func infoOf(r rune) cpInfo {
	if r >= 0 && r < 128 {
		return asciiInfo[r]
	}
	return classify(r)
}

func classify(r rune) cpInfo {
	if r < 0 || r > unicode.MaxRune {
		return cpInfo{cat: catNone}
	}
	var c cat
	switch {
	case unicode.IsLetter(r):
		c = catLetter
	case unicode.IsNumber(r):
		c = catNumber
	case unicode.IsPunct(r):
		c = catPunct
	case unicode.IsSymbol(r):
		c = catSymbol
	case unicode.IsMark(r):
		c = catMark
	case unicode.In(r, unicode.Z):
		c = catSep
	default:
		c = catControl
	}
	return cpInfo{cat: c, space: unicode.Is(unicode.White_Space, r)}
}

// utf8Len is the sequence length announced by a lead byte, as llama.cpp's
// unicode_len_utf8 computes it from the top four bits (continuation bytes
// and invalid leads count as 1).
func utf8Len(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// decodeLenient decodes one codepoint at s[i:] the way llama.cpp's
// unicode_cpt_from_utf8 does: overlong forms, surrogates and values up to
// 0x1FFFFF are accepted; a byte that does not start a well-formed sequence
// decodes as U+FFFD with length 1. It never fails and always advances.
func decodeLenient(s string, i int) (rune, int) {
	b0 := s[i]
	if b0 < 0x80 {
		return rune(b0), 1
	}
	cont := func(k int) bool { return i+k < len(s) && s[i+k]&0xC0 == 0x80 }
	switch {
	case b0&0x40 == 0:
		return 0xFFFD, 1
	case b0&0x20 == 0:
		if !cont(1) {
			return 0xFFFD, 1
		}
		return rune(b0&0x1F)<<6 | rune(s[i+1]&0x3F), 2
	case b0&0x10 == 0:
		if !cont(1) || !cont(2) {
			return 0xFFFD, 1
		}
		return rune(b0&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
	case b0&0x08 == 0:
		if !cont(1) || !cont(2) || !cont(3) {
			return 0xFFFD, 1
		}
		return rune(b0&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F), 4
	}
	return 0xFFFD, 1
}

// cpText is a text split into codepoints: cps[k] is the (leniently decoded)
// codepoint that starts at byte offs[k]; offs has one extra entry, len(text).
// Invalid bytes keep their raw value in the text but classify as U+FFFD.
type cpText struct {
	text string
	cps  []rune
	offs []int32
	info []cpInfo
}

func newCPText(s string, buf *cpText) *cpText {
	t := buf
	if t == nil {
		t = &cpText{}
	}
	t.text = s
	t.cps = t.cps[:0]
	t.offs = t.offs[:0]
	t.info = t.info[:0]
	for i := 0; i < len(s); {
		r, n := decodeLenient(s, i)
		t.cps = append(t.cps, r)
		t.offs = append(t.offs, int32(i))
		t.info = append(t.info, infoOf(r))
		i += n
	}
	t.offs = append(t.offs, int32(len(s)))
	return t
}

// toLowerASCIIish lowercases a codepoint with Unicode simple case mapping
// (used only for the case-insensitive contractions 'S, 'T, ...).
func toLower(r rune) rune {
	if r < 0 || r > unicode.MaxRune {
		return r
	}
	return unicode.ToLower(r)
}
