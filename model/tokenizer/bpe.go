package tokenizer

import "strings"

// Byte-level BPE (llama.cpp's llm_tokenizer_bpe_session).
//
// A word is the raw bytes of one pre-tokenizer piece. In byte-level form
// every raw byte is one codepoint, so the initial symbols are the bytes.
// Adjacent symbol pairs that appear in the merge list are queued by rank
// (lowest first, ties to the leftmost pair); a popped pair whose symbols
// changed since it was queued is skipped. Every string that occurs in the
// merge list gets an id (the token id when it is a token, a "virtual" id
// past the vocabulary otherwise) so the merge loop compares integers.

// mergeKey packs a (left, right) symbol id pair.
func mergeKey(l, r int32) uint64 { return uint64(uint32(l))<<32 | uint64(uint32(r)) }

// mergeVal is a merge's rank and the id of the string it produces.
type mergeVal struct {
	rank   int32
	result int32
}

// bpeModel holds the merge tables.
type bpeModel struct {
	merges  map[uint64]mergeVal
	virtual map[string]int32 // merge-list strings that are not tokens
	byteSym [256]int32       // id of each byte's byte-level string, -1 if unknown
}

// buildBPE parses merges ("left right", first occurrence wins).
func buildBPE(ids map[string]int32, nTokens int, merges []string) *bpeModel {
	m := &bpeModel{
		merges:  make(map[uint64]mergeVal, len(merges)),
		virtual: make(map[string]int32),
	}
	next := int32(nTokens)
	intern := func(s string) int32 {
		if id, ok := ids[s]; ok {
			return id
		}
		if id, ok := m.virtual[s]; ok {
			return id
		}
		id := next
		next++
		m.virtual[strings.Clone(s)] = id // do not pin the whole merge list
		return id
	}
	var buf []byte
	// Walk backwards and overwrite, so the first occurrence of a pair wins
	// without a separate lookup.
	for rank := len(merges) - 1; rank >= 0; rank-- {
		line := merges[rank]
		if len(line) < 2 {
			continue
		}
		p := strings.IndexByte(line[1:], ' ')
		if p < 0 {
			continue // llama.cpp records an empty pair that can never match
		}
		p++
		left, right := line[:p], line[p+1:]
		if right == "" {
			continue
		}
		l, r := intern(left), intern(right)
		key := mergeKey(l, r)
		buf = append(append(buf[:0], left...), right...)
		res, ok := ids[string(buf)] // no allocation for the lookup
		if !ok {
			res = intern(string(buf))
		}
		m.merges[key] = mergeVal{rank: int32(rank), result: res}
	}
	for b := 0; b < 256; b++ {
		m.byteSym[b] = -1
		if id, ok := ids[byteToString[b]]; ok {
			m.byteSym[b] = id
		} else if id, ok := m.virtual[byteToString[b]]; ok {
			m.byteSym[b] = id
		}
	}
	return m
}

type bpeSymbol struct {
	id         int32
	start, n   int32 // raw byte span within the word
	prev, next int32
}

type bpeBigram struct {
	rank        int32
	left, right int32
	lid, rid    int32
	res         int32
}

// before orders BPE candidates: lowest rank first, then leftmost.
func (b bpeBigram) before(o bpeBigram) bool {
	return b.rank < o.rank || (b.rank == o.rank && b.left < o.left)
}

// bpeScratch is per-call working memory.
type bpeScratch struct {
	syms  []bpeSymbol
	queue mergeQueue[bpeBigram]
	enc   []byte
	cp    cpText
	segs  [2][]seg
	cache wordCache
}

// wordCache maps a word to its tokens. Words repeat a lot in real text and
// both BPE and SentencePiece pieces are pure functions of the word, so the
// cache changes nothing but speed. Each encodeScratch (one per concurrent
// Encode, from a sync.Pool) has its own.
type wordCache struct {
	m   map[string][]int32
	ids []int32 // backing store of the cached slices
}

const (
	wordCacheMaxWord    = 48    // longer words are not cached
	wordCacheMaxEntries = 16384 // the cache is dropped when it grows past this
)

func (c *wordCache) get(word string) ([]int32, bool) {
	ids, ok := c.m[word]
	return ids, ok
}

func (c *wordCache) put(word string, ids []int32) {
	if len(word) > wordCacheMaxWord {
		return
	}
	if c.m == nil || len(c.m) >= wordCacheMaxEntries {
		c.m = make(map[string][]int32, 1024)
		c.ids = nil
	}
	start := len(c.ids)
	c.ids = append(c.ids, ids...)
	c.m[strings.Clone(word)] = c.ids[start:len(c.ids):len(c.ids)]
}

// bpeWord appends the tokens of one raw word.
func (t *Tokenizer) bpeWord(word string, s *bpeScratch, out []int32) []int32 {
	m := t.bpe
	if t.ignoreMerges {
		s.enc = byteEncode(s.enc[:0], word)
		if id, ok := t.ids[string(s.enc)]; ok {
			return append(out, id)
		}
	}
	syms := s.syms[:0]
	for i := 0; i < len(word); i++ {
		next := int32(i + 1)
		if i == len(word)-1 {
			next = -1
		}
		syms = append(syms, bpeSymbol{id: m.byteSym[word[i]], start: int32(i), n: 1, prev: int32(i - 1), next: next})
	}
	q := s.queue[:0]
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		a, b := syms[l].id, syms[r].id
		if a < 0 || b < 0 {
			return
		}
		if mv, ok := m.merges[mergeKey(a, b)]; ok {
			q.push(bpeBigram{rank: mv.rank, left: l, right: r, lid: a, rid: b, res: mv.result})
		}
	}
	for i := 1; i < len(syms); i++ {
		try(int32(i-1), int32(i))
	}
	for len(q) > 0 {
		bg := q.pop()
		ls, rs := &syms[bg.left], &syms[bg.right]
		if ls.n == 0 || rs.n == 0 || ls.id != bg.lid || rs.id != bg.rid {
			continue // stale: one side changed since it was queued
		}
		ls.id = bg.res
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
		sym := &syms[i]
		if sym.n == 0 {
			continue
		}
		if sym.id >= 0 && int(sym.id) < len(t.v.Tokens) {
			out = append(out, sym.id)
			continue
		}
		// Not a token: llama.cpp looks up each byte of the byte-level text
		// as a one-byte string and drops those that are not tokens.
		s.enc = byteEncode(s.enc[:0], word[sym.start:sym.start+sym.n])
		for _, c := range s.enc {
			if id, ok := t.ids[string([]byte{c})]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// bpeEncode tokenizes one raw-text fragment.
func (t *Tokenizer) bpeEncode(text string, s *bpeScratch, out []int32) []int32 {
	cp := newCPText(text, &s.cp)
	words := preTokenize(cp, t.stages, &s.segs)
	for _, w := range words {
		word := text[cp.offs[w.a]:cp.offs[w.b]]
		if t.noWordCache {
			out = t.bpeWord(word, s, out)
			continue
		}
		if ids, ok := s.cache.get(word); ok {
			out = append(out, ids...)
			continue
		}
		n := len(out)
		out = t.bpeWord(word, s, out)
		s.cache.put(word, out[n:])
	}
	return out
}
