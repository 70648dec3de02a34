package tokenizer

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// WordPiece ("bert" vocabularies: BERT and its embedding-model kin) as
// llama.cpp's WPM tokenizer does it. The GGUF token list holds word-start
// pieces with a leading ▁ and continuation pieces bare (the converter drops
// BERT's "##"); special tokens such as [CLS] are stored as they are.
//
// Each raw fragment is normalized and cut into words (wpmEncode), then
// every word, prefixed with ▁, is covered greedily from the left by the
// longest vocabulary entry (wpmWord). A word with a position that no entry
// covers becomes a single unknown token.

// wpmModel is the WordPiece configuration.
type wpmModel struct {
	lowercase    bool  // tokenizer.ggml.normalizer.lowercase
	stripAccents bool  // tokenizer.ggml.normalizer.strip_accents
	maxLen       int   // longest token text in bytes
	unk          int32 // the token of a word that cannot be covered

	ascii [utf8.RuneSelf]wpmASCII // classify of each ASCII byte
}

type wpmASCII struct {
	b    byte // the byte, lowercased when the normalizer lowercases
	kind wpmKind
}

func newWPM(lowercase, stripAccents bool, unk int32) *wpmModel {
	m := &wpmModel{lowercase: lowercase, stripAccents: stripAccents, unk: unk}
	for c := range m.ascii {
		r, kind := m.classify(rune(c))
		m.ascii[c] = wpmASCII{b: byte(r), kind: kind}
	}
	return m
}

type wpmScratch struct {
	word []byte // "▁" + the word being collected
}

// wpmEncode tokenizes one raw fragment: words as classify cuts them, each
// tokenized by wpmWord. ASCII bytes take their classification from a table
// that classify filled.
func (t *Tokenizer) wpmEncode(text string, s *wpmScratch, out []int32) []int32 {
	m := t.wpm
	w := append(s.word[:0], spaceMarker...)
	for i := 0; i < len(text); {
		var r rune
		var kind wpmKind
		if c := text[i]; c < utf8.RuneSelf {
			r, kind = rune(m.ascii[c].b), m.ascii[c].kind
			i++
		} else {
			var n int
			r, n = decodeLenient(text, i)
			r, kind = m.classify(r)
			i += n
		}
		switch kind {
		case wpmSpace:
			out = t.wpmWord(w, out)
			w = w[:len(spaceMarker)]
		case wpmAlone:
			out = t.wpmWord(w, out)
			w = utf8.AppendRune(w[:len(spaceMarker)], r)
			out = t.wpmWord(w, out)
			w = w[:len(spaceMarker)]
		case wpmJoin:
			w = utf8.AppendRune(w, r)
		}
	}
	out = t.wpmWord(w, out)
	s.word = w
	return out
}

// wpmKind is what a codepoint does to the word being collected.
type wpmKind uint8

const (
	wpmJoin  wpmKind = iota // extends the word
	wpmSpace                // ends the word
	wpmDrop                 // vanishes; the word goes on
	wpmAlone                // ends the word and is a word of its own
)

// classify is llama.cpp's BERT pre-processing of one codepoint. With
// strip_accents the codepoint is first replaced by the first codepoint of
// its canonical decomposition (wpmDecompose), then:
//
//   - whitespace ends the word;
//   - U+0000, U+FFFD, Cc, Cf, Cs and Co codepoints and, with strip_accents,
//     marks (\p{M}) are dropped (unassigned codepoints are not: llama.cpp's
//     tables give them no class, unlike unicode.go's catControl);
//   - punctuation, ASCII symbols and CJK ideographs (isCJKIdeograph) are
//     words of their own;
//   - everything else extends the word.
//
// The codepoint returned is lowercased (wpmLower) when the normalizer
// lowercases. Codepoints above U+10FFFF (lenient decoding admits them) are
// dropped: llama.cpp throws on encoding them back to UTF-8.
func (m *wpmModel) classify(r rune) (rune, wpmKind) {
	if m.stripAccents {
		r = wpmDecompose(r)
	}
	info := infoOf(r)
	switch {
	case info.space:
		return r, wpmSpace
	case r == 0 || r == utf8.RuneError || info.cat == catNone:
		return r, wpmDrop
	case info.cat == catControl && (r < 0x80 || unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)):
		return r, wpmDrop
	case m.stripAccents && info.cat == catMark:
		return r, wpmDrop
	}
	kind := wpmJoin
	if info.cat == catPunct || (r < 0x7F && info.cat == catSymbol) || isCJKIdeograph(r) {
		kind = wpmAlone
	}
	if m.lowercase {
		r = wpmLower(r)
	}
	return r, kind
}

// wpmWord appends the tokens of one word, w = "▁" + word (nothing for an
// empty word): from each byte position the longest vocabulary entry that
// starts there, or the unknown token alone when some position has none.
// The lookups convert no bytes to strings (Go does not allocate for a
// map index by string(bytes)).
func (t *Tokenizer) wpmWord(w []byte, out []int32) []int32 {
	if len(w) == len(spaceMarker) {
		return out
	}
	start := len(out)
	for i := 0; i < len(w); {
		j := min(len(w), i+t.wpm.maxLen)
		for ; j > i; j-- {
			if id, ok := t.ids[string(w[i:j])]; ok {
				out = append(out, id)
				break
			}
		}
		if j == i {
			return append(out[:start], t.wpm.unk)
		}
		i = j
	}
	return out
}

// wpmDecompose is llama.cpp's "NFD" for BERT: the first codepoint of the
// canonical decomposition, not the whole decomposition (é gives e, a Hangul
// syllable its leading consonant jamo); codepoints without one, and those
// beyond U+10FFFF, stay as they are.
func wpmDecompose(r rune) rune {
	switch {
	case r < 0xC0 || r > unicode.MaxRune:
		return r // nothing below U+00C0 decomposes
	case r >= hangulBase && r < hangulBase+hangulCount:
		return hangulLBase + (r-hangulBase)/hangulPerL
	}
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], r)
	d := norm.NFD.Properties(buf[:n]).Decomposition()
	if d == nil {
		return r
	}
	first, _ := utf8.DecodeRune(d)
	return first
}

// Hangul syllables decompose by arithmetic, not by table:
// syllable = hangulBase + (L*21 + V)*28 + T, and L's jamo is hangulLBase+L.
const (
	hangulBase  = 0xAC00
	hangulCount = 11172
	hangulPerL  = 21 * 28
	hangulLBase = 0x1100
)

// wpmLower is llama.cpp's unicode_tolower: the first codepoint of the full
// lowercase mapping, which for every codepoint is Unicode's simple
// lowercase mapping (U+0130 İ, the one codepoint whose full mapping is two
// codepoints, starts it with i as well).
func wpmLower(r rune) rune {
	if r < 0x80 {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	return unicode.ToLower(r)
}

// isCJKIdeograph reports the ranges that BERT's pre-tokenizer (and
// llama.cpp after it) treats as Chinese characters: CJK Unified Ideographs
// with extensions A to E (E taken from U+2B920 rather than U+2B820, as
// BERT's tokenizer has it, so U+2B820..U+2B91F join words) and the
// compatibility ideographs.
func isCJKIdeograph(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}

// wpmCut is StablePrefix for WordPiece: the byte offset just after the last
// codepoint of text[start:] that ends a word whatever follows (whitespace,
// or a word of its own), or start when there is none. Anything after it,
// even a dropped control character, may still join the last word.
func (t *Tokenizer) wpmCut(text string, start int) int {
	cut := start
	for i := start; i < len(text); {
		r, n := decodeLenient(text, i)
		i += n
		if _, kind := t.wpm.classify(r); kind == wpmSpace || kind == wpmAlone {
			cut = i
		}
	}
	return cut
}
