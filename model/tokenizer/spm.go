package tokenizer

import "strings"

// SentencePiece BPE as llama.cpp's llm_tokenizer_spm runs it: the whole
// fragment (spaces already replaced by U+2581) starts as one symbol per
// UTF-8 sequence (lengths taken from lead bytes, no validation); every
// adjacent pair whose concatenation is a token is queued by that token's
// score (highest first, ties to the leftmost pair); a popped pair whose
// symbols changed size is skipped. Symbols that are not tokens at the end
// are written as byte tokens <0xNN>.

const spaceMarker = "\u2581" // ▁

type spmSymbol struct {
	start, n   int32
	prev, next int32
}

type spmBigram struct {
	score       float32
	left, right int32
	size        int32
}

// before orders SentencePiece candidates: highest score first, then
// leftmost.
func (b spmBigram) before(o spmBigram) bool {
	return b.score > o.score || (b.score == o.score && b.left < o.left)
}

type spmScratch struct {
	syms  []spmSymbol
	queue mergeQueue[spmBigram]
	cache wordCache
}

// spmWordsSeparable reports whether every ▁ inside every token is at its
// start or follows another ▁. Then no token can span a point where a ▁
// follows a non-▁ byte, no merge crosses such a point, and merging each
// piece between such points separately gives the same tokens as merging the
// whole fragment (the pieces' merges never interact).
func spmWordsSeparable(tokens []string) bool {
	for _, s := range tokens {
		for i := 1; i < len(s); i++ {
			if strings.HasPrefix(s[i:], spaceMarker) && !strings.HasSuffix(s[:i], spaceMarker) {
				return false
			}
		}
	}
	return true
}

// spmEncode tokenizes one fragment that is already escaped (▁ for space),
// piece by piece when the vocabulary allows it (see spmWordsSeparable).
func (t *Tokenizer) spmEncode(text string, s *spmScratch, out []int32) []int32 {
	if !t.spmSplit || t.noSPMSplit {
		return t.spmMerge(text, s, out)
	}
	start := 0
	for off := 0; off < len(text); {
		// off is a symbol start, as spmMerge groups symbols from 0.
		if off > start && strings.HasPrefix(text[off:], spaceMarker) && !strings.HasSuffix(text[:off], spaceMarker) {
			out = t.spmPiece(text[start:off], s, out)
			start = off
		}
		off += min(utf8Len(text[off]), len(text)-off)
	}
	return t.spmPiece(text[start:], s, out)
}

// spmPiece is spmMerge through the word cache.
func (t *Tokenizer) spmPiece(piece string, s *spmScratch, out []int32) []int32 {
	if t.noWordCache {
		return t.spmMerge(piece, s, out)
	}
	if ids, ok := s.cache.get(piece); ok {
		return append(out, ids...)
	}
	n := len(out)
	out = t.spmMerge(piece, s, out)
	s.cache.put(piece, out[n:])
	return out
}

// spmMerge runs the bigram merges over a whole piece of escaped text.
func (t *Tokenizer) spmMerge(text string, s *spmScratch, out []int32) []int32 {
	syms := s.syms[:0]
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		idx := int32(len(syms))
		next := idx + 1
		if off+n == len(text) {
			next = -1
		}
		syms = append(syms, spmSymbol{start: int32(off), n: int32(n), prev: idx - 1, next: next})
		off += n
	}
	q := s.queue[:0]
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		a, b := &syms[l], &syms[r]
		id, ok := t.ids[text[a.start:a.start+a.n+b.n]]
		if !ok {
			return
		}
		q.push(spmBigram{score: t.scores[id], left: l, right: r, size: a.n + b.n})
	}
	for i := 1; i < len(syms); i++ {
		try(int32(i-1), int32(i))
	}
	for len(q) > 0 {
		bg := q.pop()
		ls, rs := &syms[bg.left], &syms[bg.right]
		if ls.n == 0 || rs.n == 0 || ls.n+rs.n != bg.size {
			continue
		}
		ls.n += rs.n
		rs.n = 0
		ls.next = rs.next
		if rs.next >= 0 {
			syms[rs.next].prev = bg.left
		}
		try(ls.prev, bg.left)
		try(bg.left, ls.next)
	}
	s.queue = q
	s.syms = syms
	for i := int32(0); len(syms) > 0 && i != -1; i = syms[i].next {
		sym := syms[i]
		piece := text[sym.start : sym.start+sym.n]
		if id, ok := t.ids[piece]; ok {
			out = append(out, id)
			continue
		}
		// Merged symbols are always tokens, so only single symbols get
		// here (llama.cpp's rev_merge lookup cannot succeed for them).
		for k := 0; k < len(piece); k++ {
			if id := t.byteTok[piece[k]]; id >= 0 {
				out = append(out, id)
			}
		}
	}
	return out
}

// escapeSpaces replaces every space by ▁, optionally after a leading one.
func escapeSpaces(text string, prefix bool) string {
	var b strings.Builder
	b.Grow(len(text) + 3 + 2*strings.Count(text, " "))
	if prefix {
		b.WriteString(spaceMarker)
	}
	for {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			b.WriteString(text)
			break
		}
		b.WriteString(text[:i])
		b.WriteString(spaceMarker)
		text = text[i+1:]
	}
	return b.String()
}
