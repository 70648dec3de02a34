package tokenizer

// Ports of llama.cpp's hand-written splitters for the GPT-2 expression
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// and the Llama 3 expression
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// They look at codepoint flags, where a codepoint beyond U+10FFFF (and any
// position outside the segment) has no flag at all and so matches no class.

// segCursor gives flag lookups that answer "nothing" outside [a, b).
type segCursor struct {
	t    *cpText
	a, b int
}

const outOfRange = rune(-1)

func (c *segCursor) cpt(p int) rune {
	if p >= c.a && p < c.b {
		return c.t.cps[p]
	}
	return outOfRange
}

func (c *segCursor) info(p int) cpInfo {
	if p >= c.a && p < c.b {
		return c.t.info[p]
	}
	return cpInfo{cat: catNone}
}

// flagged reports whether a codepoint has any flag (llama.cpp's as_uint()).
func flagged(i cpInfo) bool { return i.cat != catNone || i.space }

func splitGPT2(t *cpText, in []seg, out []seg) []seg {
	for _, s := range in {
		out = splitGPT2Seg(t, int(s.a), int(s.b), out)
	}
	return out
}

func splitGPT2Seg(t *cpText, a, b int, out []seg) []seg {
	c := segCursor{t, a, b}
	prev := a
	add := func(end int) {
		if end > prev {
			out = append(out, seg{int32(prev), int32(end)})
		}
		prev = end
	}
	for pos := a; pos < b; {
		cpt := c.cpt(pos)
		f := c.info(pos)
		if n := matchContraction(t.cps, pos, b, true); n > 0 {
			pos += n
			add(pos)
			continue
		}
		f2 := f
		if cpt == ' ' {
			f2 = c.info(pos + 1)
		}
		// <space>?\p{L}+ , <space>?\p{N}+ , <space>?[^\s\p{L}\p{N}]+
		var class func(cpInfo) bool
		switch {
		case f2.cat == catLetter:
			class = func(i cpInfo) bool { return i.cat == catLetter }
		case f2.cat == catNumber:
			class = func(i cpInfo) bool { return i.cat == catNumber }
		case !f2.space && flagged(f2):
			class = func(i cpInfo) bool {
				return !i.space && i.cat != catLetter && i.cat != catNumber && flagged(i)
			}
		}
		if class != nil {
			if cpt == ' ' {
				pos++
			}
			for class(c.info(pos)) {
				pos++
			}
			add(pos)
			continue
		}
		nws := 0
		for c.info(pos + nws).space {
			nws++
		}
		switch {
		case nws > 1 && c.cpt(pos+nws) != outOfRange: // \s+(?!\S)
			pos += nws - 1
		case nws > 0: // \s+
			pos += nws
		default: // no match: one codepoint
			pos++
		}
		add(pos)
	}
	return out
}

func splitLlama3(t *cpText, in []seg, out []seg) []seg {
	for _, s := range in {
		out = splitLlama3Seg(t, int(s.a), int(s.b), out)
	}
	return out
}

func splitLlama3Seg(t *cpText, a, b int, out []seg) []seg {
	c := segCursor{t, a, b}
	prev := a
	add := func(end int) {
		if end > prev {
			out = append(out, seg{int32(prev), int32(end)})
		}
		prev = end
	}
	for pos := a; pos < b; {
		cpt := c.cpt(pos)
		f := c.info(pos)
		// (?i:'s|'t|'re|'ve|'m|'ll|'d)
		if cpt == '\'' && pos+1 < b {
			n1 := toLower(c.cpt(pos + 1))
			if n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd' {
				pos += 2
				add(pos)
				continue
			}
			if pos+2 < b {
				n2 := toLower(c.cpt(pos + 2))
				if (n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l') {
					pos += 3
					add(pos)
					continue
				}
			}
		}
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if !(cpt == '\r' || cpt == '\n' || f.cat == catNumber) {
			if f.cat == catLetter || c.info(pos+1).cat == catLetter {
				pos++
				for c.info(pos).cat == catLetter {
					pos++
				}
				add(pos)
				continue
			}
		}
		// \p{N}{1,3}
		if f.cat == catNumber {
			ini := pos
			for c.info(pos).cat == catNumber {
				pos++
				if pos-ini >= 3 {
					add(pos)
					ini = pos
				}
			}
			add(pos)
			continue
		}
		// <space>?[^\s\p{L}\p{N}]+[\r\n]*
		f2 := f
		if cpt == ' ' {
			f2 = c.info(pos + 1)
		}
		isOther := func(i cpInfo) bool {
			return !i.space && i.cat != catLetter && i.cat != catNumber
		}
		if isOther(f2) && flagged(f) {
			if cpt == ' ' {
				pos++
			}
			for isOther(f2) && flagged(f2) {
				pos++
				f2 = c.info(pos)
			}
			for cp := c.cpt(pos); cp == '\r' || cp == '\n'; cp = c.cpt(pos) {
				pos++
			}
			add(pos)
			continue
		}
		nws, lastNL := 0, 0
		for c.info(pos + nws).space {
			if cp := c.cpt(pos + nws); cp == '\r' || cp == '\n' {
				lastNL = pos + nws + 1
			}
			nws++
		}
		switch {
		case lastNL > 0: // \s*[\r\n]+
			pos = lastNL
		case nws > 1 && c.cpt(pos+nws) != outOfRange: // \s+(?!\S)
			pos += nws - 1
		case nws > 0: // \s+
			pos += nws
		default:
			pos++
		}
		add(pos)
	}
	return out
}
