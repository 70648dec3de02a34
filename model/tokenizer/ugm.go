package tokenizer

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// SentencePiece unigram ("t5" vocabularies: T5, and XLM-RoBERTa with the
// embedding models and rerankers built on it) as llama.cpp's UGM tokenizer
// does it. Each raw fragment is normalized (ugmModel.normalize: the
// precompiled_charsmap of charsmap.go, spaces escaped to ▁, a space
// prefix, runs of spaces merged), then cut into the tokens whose scores
// sum highest (ugmModel.viterbi).

// ugmUnknownPenalty is how much lower than the lowest normal token's score
// an unknown codepoint scores.
const ugmUnknownPenalty = 10

// ugmModel is the unigram configuration.
type ugmModel struct {
	tokens *byteTrie // normal, user-defined and unused tokens by text
	user   *byteTrie // user-defined tokens (values unused)
	cmap   *charsmap // nil: no precompiled_charsmap
	// userDefined[id] marks the tokens that score 0 rather than their
	// score: the user-defined tokens once the text-based fix-ups of
	// eog.go have run (scoreUserDefined), as llama.cpp asks while
	// tokenizing, whereas its tries hold the tokens by their GGUF types.
	userDefined []bool
	scores      []float32
	unkScore    float32
	unk         int32

	// Normalizer flags. llama.cpp reads add_space_prefix and
	// remove_extra_whitespaces from the GGUF file (tokenizer.ggml.*) and
	// keeps escape_whitespaces on and treat_whitespace_as_suffix off for
	// unigram vocabularies.
	addPrefix, mergeSpaces, escape, suffix bool

	// ascii[c] says when ASCII byte c normalizes to itself: always
	// (asciiPlain: no user-defined token and no charsmap key starts with
	// it), when an ASCII byte follows (asciiBeforeASCII: keys start with
	// it, but none is c alone or c then an ASCII byte), or only as step
	// finds (asciiSlow).
	ascii [utf8.RuneSelf]uint8

	// split is set when a normalized text can be tokenized in two parts
	// cut before a ▁ that follows something else (ugmCut): no token holds
	// a ▁ after a byte other than ▁, and ▁ alone is a token.
	split bool
}

// newUGM builds the unigram model. attrs are the token types as the GGUF
// file gives them (llama.cpp builds its tries before it adjusts any
// token's attributes by its text).
func newUGM(v *Vocab, attrs []attr) (*ugmModel, error) {
	n := len(v.Tokens)
	if v.UNK < 0 || v.UNK >= int32(n) {
		return nil, fmt.Errorf("%w: unigram vocabulary without an unknown token", ErrInvalid)
	}
	m := &ugmModel{
		unk: v.UNK, scores: v.Scores,
		addPrefix: v.AddSpacePrefix, mergeSpaces: v.RemoveExtraWhitespaces, escape: true,
	}
	if m.scores == nil {
		m.scores = make([]float32, n)
	}
	var cm *charsmap
	if v.Charsmap != nil {
		var err error
		if cm, err = parseCharsmap(v.Charsmap); err != nil {
			return nil, err
		}
	}
	minScore := float32(math.MaxFloat32)
	var keys, userKeys []string
	var ids []int32
	for id, a := range attrs {
		if a&attrNormal != 0 {
			if s := m.scores[id]; s < minScore { // NaN leaves it, as std::min does
				minScore = s
			}
		}
		if a&(attrNormal|attrUserDefined|attrUnused) != 0 {
			keys = append(keys, tokenName(v, id))
			ids = append(ids, int32(id))
		}
		if a&attrUserDefined != 0 {
			userKeys = append(userKeys, tokenName(v, id))
		}
	}
	m.unkScore = minScore - ugmUnknownPenalty
	m.tokens = newByteTrie(keys, ids)
	m.user = newByteTrie(userKeys, make([]int32, len(userKeys)))
	m.setCharsmap(cm)
	_, hasSpace := m.tokens.lookup(spaceMarker)
	m.split = m.escape && !m.suffix && hasSpace && spmWordsSeparable(keys)
	return m, nil
}

// scoreUserDefined marks the tokens that attrs make user-defined.
func (m *ugmModel) scoreUserDefined(attrs []attr) {
	m.userDefined = make([]bool, len(attrs))
	for id, a := range attrs {
		m.userDefined[id] = a&attrUserDefined != 0
	}
}

// setCharsmap sets the normalizer's charsmap (nil for none) and the
// ASCII shortcuts that follow from it and the user-defined tokens.
func (m *ugmModel) setCharsmap(cm *charsmap) {
	m.cmap = cm
	for c := range m.ascii {
		switch {
		case m.user.root[c] >= 0:
			m.ascii[c] = asciiSlow
		case cm == nil:
			m.ascii[c] = asciiPlain
		default:
			m.ascii[c] = cm.asciiKind(byte(c))
		}
	}
}

// lookup finds a key's value.
func (tr *byteTrie) lookup(s string) (int32, bool) {
	n := int32(0)
	for i := 0; i < len(s) && n >= 0; i++ {
		n = tr.next(n, s[i])
	}
	if n < 0 || tr.value[n] < 0 {
		return -1, false
	}
	return tr.value[n], true
}

type ugmScratch struct {
	norm []byte
	best []ugmBest
}

// ugmBest is the best tokenization found so far of a normalized prefix:
// its score, and its last token with where that token starts.
type ugmBest struct {
	score float64
	start int
	id    int32
}

// ugmEncode tokenizes one raw fragment; prefix allows the space prefix
// (add_space_prefix, for a fragment that does not continue earlier text).
func (t *Tokenizer) ugmEncode(text string, prefix bool, s *ugmScratch, out []int32) []int32 {
	s.norm = t.ugm.normalize(s.norm[:0], text, prefix)
	return t.ugm.viterbi(s.norm, s, out)
}

// step is llama.cpp's normalize_prefix: the normalized form of the start
// of s and how many bytes of s it stands for. In order: the longest
// prefix of s along the user-defined tokens' trie (not only a whole
// token) as it is; the longest charsmap key's replacement; one valid UTF-8
// sequence as it is; or, for an invalid byte, U+FFFD. open reports that
// appending bytes to s could change the result (a walk reached the end of
// s).
func (m *ugmModel) step(s string) (norm string, n int, open bool) {
	if c := s[0]; c < utf8.RuneSelf {
		if k := m.ascii[c]; k == asciiPlain || k == asciiBeforeASCII && len(s) > 1 && s[1] < utf8.RuneSelf {
			return s[:1], 1, false
		}
	}
	if k := m.user.pathLen(s); k > 0 {
		return s[:k], k, k == len(s)
	}
	if m.cmap != nil {
		var r string
		var k int
		if r, k, open = m.cmap.match(s); k > 0 {
			return r, k, open
		}
	}
	if _, k := decodeLenient(s, 0); k > 1 || s[0] < 0x80 {
		return s[:k], k, open
	}
	return "\uFFFD", 1, open || len(s) < utf8Len(s[0])
}

const (
	asciiSlow = iota
	asciiPlain
	asciiBeforeASCII
)

// asciiKind classifies the keys that start with ASCII byte c (see
// ugmModel.ascii).
func (m *charsmap) asciiKind(c byte) uint8 {
	x := m.xcda
	if len(x) == 0 || c == 0 {
		return asciiPlain // a NUL ends every match
	}
	e := xcdaBase(x[0]) ^ uint32(c)
	if xcdaLabel(x[e]) != uint32(c) {
		return asciiPlain
	}
	if xcdaLeaf(x[e]) {
		return asciiSlow
	}
	state := e ^ xcdaBase(x[e])
	for d := uint32(1); d < utf8.RuneSelf; d++ {
		if xcdaLabel(x[state^d]) == d {
			return asciiSlow
		}
	}
	return asciiBeforeASCII
}

// ugmSpacer applies llama.cpp's whitespace rules to normalized bytes as
// they come: a space (after the charsmap, so also what it maps to a
// space, as NFKC maps the ideographic space) is written as the space symbol (▁ when
// escaping), runs of spaces vanish but for one space before each word
// when merging, and the first word gets a space before it when prefixing.
type ugmSpacer struct {
	m        *ugmModel
	space    string
	prepend  bool // prefix the first word
	inWord   bool // the last byte was not a space
	prefixed bool // the prefix was written
}

func (m *ugmModel) spacer(prefix bool) ugmSpacer {
	sp := ugmSpacer{m: m, space: " ", prepend: prefix && m.addPrefix && !m.suffix}
	if m.escape {
		sp.space = spaceMarker
	}
	return sp
}

func (sp *ugmSpacer) write(dst []byte, norm string) []byte {
	for i := 0; i < len(norm); i++ {
		c := norm[i]
		if c != ' ' {
			if !sp.inWord {
				sp.inWord = true
				if (sp.prepend && !sp.prefixed) || sp.m.mergeSpaces {
					dst = append(dst, sp.space...)
					sp.prefixed = true
				}
			}
			dst = append(dst, c)
			continue
		}
		sp.inWord = false
		if !sp.m.mergeSpaces {
			dst = append(dst, sp.space...)
		}
	}
	return dst
}

// normalize appends the normalized text of one raw fragment to dst
// (llama.cpp's normalize): the fragment's steps through the spacer, then
// with treat_whitespace_as_suffix and a space prefix a space at the end.
func (m *ugmModel) normalize(dst []byte, text string, prefix bool) []byte {
	sp := m.spacer(prefix)
	for i := 0; i < len(text); {
		norm, n, _ := m.step(text[i:])
		dst = sp.write(dst, norm)
		i += n
	}
	if m.suffix && prefix && m.addPrefix {
		dst = append(dst, sp.space...)
	}
	return dst
}

// viterbi appends the best tokenization of a normalized text: moving
// codepoint by codepoint (lengths from lead bytes, as in spm.go), every
// token that starts there (along the token trie) offers the best score so
// far plus its own (0 for user-defined tokens) to the position where it
// ends, and a codepoint that no single token covers offers the unknown
// token at the unknown score; ties keep the earlier offer. The best path
// is read back from the end, consecutive unknown tokens becoming one.
// The work is linear in the text times the longest token.
func (m *ugmModel) viterbi(norm []byte, s *ugmScratch, out []int32) []int32 {
	n := len(norm)
	if n == 0 {
		return out
	}
	if cap(s.best) < n+1 {
		s.best = make([]ugmBest, n+1)
	}
	best := s.best[:n+1]
	for i := range best {
		best[i] = ugmBest{score: -math.MaxFloat64, id: m.unk}
	}
	best[0].score = 0
	tr := m.tokens
	for off := 0; off < n; {
		units := min(utf8Len(norm[off]), n-off)
		cur := best[off].score
		single := false
		node := tr.root[norm[off]]
		for end := off + 1; node >= 0; end++ {
			if id := tr.value[node]; id >= 0 {
				if end-off == units {
					single = true
				}
				score := cur
				if !m.userDefined[id] {
					score += float64(m.scores[id])
				}
				if score > best[end].score {
					best[end] = ugmBest{score: score, start: off, id: id}
				}
			}
			if end == n {
				break
			}
			node = tr.scan(node, norm[end])
		}
		if !single {
			if score := cur + float64(m.unkScore); score > best[off+units].score {
				best[off+units] = ugmBest{score: score, start: off, id: m.unk}
			}
		}
		off += units
	}
	first := len(out)
	prevUnk := false
	for pos := n; ; {
		b := best[pos]
		unk := b.id == m.unk
		if !(prevUnk && unk) {
			out = append(out, b.id)
		}
		if b.start == 0 {
			break
		}
		prevUnk = unk
		pos = b.start
	}
	for i, j := first, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// ugmCut is StablePrefix for a unigram fragment text[start:] (see
// StablePrefixOpts): the start of the last space run, in the normalized
// text, that follows a word; start when there is none, or when the
// vocabulary does not allow cuts (ugmModel.split). Cutting there leaves
// the same normalized text on both sides (with Continuation, the rest gets
// no space prefix), the same codepoint boundaries, and no token across
// the cut. Only steps that more text cannot change may precede the cut,
// and the head must not end with a ▁ of its own (a token of ▁s could
// then span the cut). The head's and the rest's scores add up to the
// whole's in exact arithmetic, which float64 sums of float32 scores are
// for any real text length.
func (t *Tokenizer) ugmCut(text string, start int, s *ugmScratch) int {
	m := t.ugm
	if !m.split {
		return start
	}
	frag := text[start:]
	cut := start
	sp := m.spacer(true)
	norm := s.norm[:0]
	cp := 0 // the next codepoint start in norm (lengths from lead bytes)
	for i := 0; i < len(frag); {
		step, n, open := m.step(frag[i:])
		if len(step) > 0 && step[0] == ' ' && sp.inWord && cp == len(norm) && !endsWithMarker(norm) {
			cut = start + i
		}
		if open {
			break // later steps may change with more text
		}
		norm = sp.write(norm, step)
		for cp < len(norm) {
			cp += utf8Len(norm[cp])
		}
		i += n
	}
	s.norm = norm
	return cut
}

func endsWithMarker(b []byte) bool {
	return len(b) >= len(spaceMarker) && string(b[len(b)-len(spaceMarker):]) == spaceMarker
}
