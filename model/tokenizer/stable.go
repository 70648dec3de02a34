package tokenizer

import (
	"strings"
	"sync"
)

// StablePrefix returns the byte length of a prefix of text whose tokens are
// final whatever text is appended later, assuming special tokens are parsed
// (the rule for streamed input). It is StablePrefixOpts with ParseSpecial.
func (t *Tokenizer) StablePrefix(text string) int {
	return t.StablePrefixOpts(text, EncodeOptions{ParseSpecial: true})
}

// StablePrefixOpts returns the byte length c of a prefix of text such that,
// for any text a appended later,
//
//	Encode(text+a, o) == Encode(text[:c], o) ++ Encode(text[c:]+a, o')
//
// where o' is o with AddSpecial off (BOS belongs to the first part) and
// Continuation on; with AddSpecial, a trailing EOS or SEP (WordPiece)
// belongs after the last part instead. Only opts.ParseSpecial matters for
// the cut.
//
// The cut is conservative, not minimal: it never splits a possible special
// token, never follows whitespace (a whitespace run's split depends on what
// follows it), and leaves the last pre-tokenizer word (BPE) or the last two
// space-separated words (SentencePiece, whose merges are not bounded by
// words) to the remainder; WordPiece leaves what follows the last
// whitespace or single-codepoint word, and unigram the last space run
// after a word with what follows (ugmCut).
func (t *Tokenizer) StablePrefixOpts(text string, opts EncodeOptions) int {
	// Byte-level BPE and WordPiece tokenize each raw fragment on its own;
	// SentencePiece's (BPE and unigram) first word depends on what
	// precedes the fragment.
	wordwise := t.isBPE || t.wpm != nil
	limit := t.specialGuard(text, opts.ParseSpecial)
	s := t.scratch.Get().(*encodeScratch)
	defer t.scratch.Put(s)
	frags := t.partition(text[:limit], opts.ParseSpecial, s)
	if len(frags) == 0 {
		return 0
	}
	last := frags[len(frags)-1]
	if last.tok >= 0 {
		// After a special token the next raw text starts a new fragment;
		// SentencePiece gives it a leading space and an rstrip token eats
		// whitespace that may still come, so keep the token for later then.
		if wordwise && t.attrs[last.tok]&attrRStrip == 0 {
			return last.end
		}
		return last.start
	}
	var cut int
	switch {
	case t.isBPE:
		cut = t.bpeCut(text[:last.end], last.start, s)
	case t.wpm != nil:
		cut = t.wpmCut(text[:last.end], last.start)
	case t.ugm != nil:
		cut = t.ugmCut(text[:last.end], last.start, &s.ugm)
	default:
		cut = spmCut(text[:last.end], last.start)
	}
	if cut == last.start && len(frags) >= 2 {
		prev := frags[len(frags)-2]
		if !wordwise || t.attrs[prev.tok]&attrRStrip != 0 {
			cut = prev.start
		}
	}
	return cut
}

// bpeCut is the start of the last word of text[start:], moved back over
// words while the byte before the cut is whitespace.
func (t *Tokenizer) bpeCut(text string, start int, s *encodeScratch) int {
	frag := text[start:]
	cp := newCPText(frag, &s.bpe.cp)
	words := preTokenize(cp, t.stages, &s.bpe.segs)
	k := len(words) - 1
	for k > 0 && cp.info[words[k].a-1].space {
		k--
	}
	if k <= 0 {
		return start
	}
	return start + int(cp.offs[words[k].a])
}

// spmCut is the start of the second-to-last space run of text[start:] that
// follows a non-space byte (SentencePiece words begin with their space),
// counting only spaces where a symbol starts: an invalid lead byte can
// swallow the bytes after it, including the ▁ of a space.
func spmCut(text string, start int) int {
	var marks [2]int
	n := 0
	starts := spmSymbolStarts(text[start:])
	for i := len(text) - 1; i > start && n < 2; i-- {
		if text[i] == ' ' && text[i-1] != ' ' && !strings.HasSuffix(text[:i], spaceMarker) && starts[i-start] {
			marks[n] = i
			n++
		}
	}
	if n < 2 {
		return start
	}
	return marks[1]
}

// spmSymbolStarts marks the raw bytes of frag at which spmEncode starts a
// symbol once spaces are escaped to ▁.
func spmSymbolStarts(frag string) []bool {
	starts := make([]bool, len(frag))
	remaining := 0
	for i := 0; i < len(frag); i++ {
		esc := frag[i : i+1]
		if esc == " " {
			esc = spaceMarker
		}
		for k := 0; k < len(esc); k++ {
			if remaining == 0 {
				starts[i] = starts[i] || k == 0
				remaining = utf8Len(esc[k])
			}
			remaining--
		}
	}
	return starts
}

// specialGuard returns the start of the earliest suffix of text that is a
// proper prefix of a special token's text (len(text) if none): appended
// text could complete such a token.
func (t *Tokenizer) specialGuard(text string, parseSpecial bool) int {
	t.prefixOnce.Do(t.buildSpecialPrefixes)
	if len(t.specialPrefixes) == 0 {
		return len(text)
	}
	need := uint8(prefixUserDefined)
	if parseSpecial {
		need |= prefixControl
	}
	for p := max(0, len(text)-t.maxSpecial+1); p < len(text); p++ {
		if t.specialPrefixes[text[p:]]&need != 0 {
			return p
		}
	}
	return len(text)
}

const (
	prefixUserDefined = 1 << iota // prefix of a token matched even without ParseSpecial
	prefixControl                 // prefix of a control / unknown token
)

type specialPrefixSet struct {
	prefixOnce      sync.Once
	specialPrefixes map[string]uint8
}

func (t *Tokenizer) buildSpecialPrefixes() {
	t.specialPrefixes = make(map[string]uint8)
	for _, id := range t.specials {
		bit := uint8(prefixUserDefined)
		if t.attrs[id]&(attrControl|attrUnknown) != 0 {
			bit = prefixControl
		}
		s := t.v.Tokens[id]
		for k := 1; k < len(s); k++ {
			t.specialPrefixes[s[:k]] |= bit
		}
	}
}
