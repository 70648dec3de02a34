package tokenizer

import (
	"slices"
	"sort"
)

// Hand-written forms of the expressions llama.cpp runs through std::regex.
//
// On this path llama.cpp replaces every non-ASCII codepoint by a stand-in
// byte for its category (whitespace becomes \v) before matching, so \s is
// Unicode White_Space, \p{L}/\p{N}/\p{P} are the Unicode categories, and a
// non-ASCII whitespace codepoint never matches an explicit range such as
// [ࠀ-一]. Codepoints beyond U+10FFFF count as "other".

// other is [^\s\p{L}\p{N}].
func other(info cpInfo) bool {
	return !info.space && info.cat != catLetter && info.cat != catNumber
}

// matchQwen2 is Qwen2's expression:
//
//	(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func matchQwen2(t *cpText, i, end int) int {
	cps, info := t.cps, t.info
	c := cps[i]
	if n := matchContraction(cps, i, end, false); n > 0 {
		return n
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if info[i].cat == catLetter {
		j := i + 1
		for j < end && info[j].cat == catLetter {
			j++
		}
		return j - i
	}
	if c != '\r' && c != '\n' && info[i].cat != catNumber && i+1 < end && info[i+1].cat == catLetter {
		j := i + 2
		for j < end && info[j].cat == catLetter {
			j++
		}
		return j - i
	}
	// \p{N}
	if info[i].cat == catNumber {
		return 1
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	if n := matchPunctRun(t, i, end); n > 0 {
		return n
	}
	return matchSpaces(t, i, end)
}

// matchTekken is Mistral's Tekken expression as llama.cpp runs it:
//
//	[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|
//	[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|
//	\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// A letter counts as upper ([^a-z]) unless it is ASCII a-z and as lower
// ([^A-Z]) unless it is ASCII A-Z: every non-ASCII letter is both (it is
// a stand-in byte there), so "élan" and "ÉLAN" are each one word.
func matchTekken(t *cpText, i, end int) int { return matchCaseWords(t, i, end, false, 1) }

// matchGPT4o is the GPT-4o expression (Phi-4-mini, Llama 4) as llama.cpp
// runs it: Tekken's, with an optional contraction
// ('[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]) after either
// letter alternative and \p{N}{1,3} for digits.
func matchGPT4o(t *cpText, i, end int) int { return matchCaseWords(t, i, end, true, 3) }

// matchCaseWords is the expression of matchTekken and matchGPT4o:
// contractions says whether a letter run may end in one, digits is the
// most numbers taken at once.
func matchCaseWords(t *cpText, i, end int, contractions bool, digits int) int {
	cps, info := t.cps, t.info
	upper := func(j int) bool { return info[j].cat == catLetter && (cps[j] < 'a' || cps[j] > 'z') }
	lower := func(j int) bool { return info[j].cat == catLetter && (cps[j] < 'A' || cps[j] > 'Z') }
	word := func(j int) int { // the match of a letter alternative ending at j
		if contractions && j < end {
			j += matchContraction(cps, j, end, false)
		}
		return j - i
	}
	s := i // after the optional [^\r\n\p{L}\p{N}] (it never matches a letter)
	if c := cps[i]; c != '\r' && c != '\n' && info[i].cat != catLetter && info[i].cat != catNumber {
		s = i + 1
	}
	if s < end {
		k := s // the greedy upper run
		for k < end && upper(k) {
			k++
		}
		// upper*lower+: the longest upper prefix after which a lower
		// letter follows (backtracking into the run), then lower+.
		for u := k; u >= s; u-- {
			if u < end && lower(u) {
				j := u + 1
				for j < end && lower(j) {
					j++
				}
				return word(j)
			}
		}
		// upper+lower*
		if k > s {
			for k < end && lower(k) {
				k++
			}
			return word(k)
		}
	}
	// \p{N}{1,digits}
	if info[i].cat == catNumber {
		j := i + 1
		for j < end && j-i < digits && info[j].cat == catNumber {
			j++
		}
		return j - i
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
	j := i
	if cps[i] == ' ' {
		j++
	}
	if j < end && other(info[j]) {
		for j < end && other(info[j]) {
			j++
		}
		for j < end && (cps[j] == '\r' || cps[j] == '\n' || cps[j] == '/') {
			j++
		}
		return j - i
	}
	return matchSpaces(t, i, end)
}

// matchContraction is 's|'t|'re|'ve|'m|'ll|'d; unless caseSensitive, the
// letters match both ASCII cases ('[sS]|'[tT]|... as Qwen2 spells it).
func matchContraction(cps []rune, i, end int, caseSensitive bool) int {
	if cps[i] != '\'' || i+1 >= end {
		return 0
	}
	lower := func(r rune) rune {
		if !caseSensitive && r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	n1 := lower(cps[i+1])
	switch n1 {
	case 's', 't', 'm', 'd':
		return 2
	}
	if i+2 < end {
		n2 := lower(cps[i+2])
		if (n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l') {
			return 3
		}
	}
	return 0
}

// matchPunctRun is ` ?[^\s\p{L}\p{N}]+[\r\n]*`.
func matchPunctRun(t *cpText, i, end int) int {
	j := i
	if t.cps[i] == ' ' {
		j++
	}
	if j >= end || !other(t.info[j]) {
		return 0
	}
	for j < end && other(t.info[j]) {
		j++
	}
	for j < end && (t.cps[j] == '\r' || t.cps[j] == '\n') {
		j++
	}
	return j - i
}

// matchSpaces is `\s*[\r\n]+|\s+(?!\S)|\s+`.
func matchSpaces(t *cpText, i, end int) int {
	r := i
	lastNL := -1
	for r < end && t.info[r].space {
		if c := t.cps[r]; c == '\r' || c == '\n' {
			lastNL = r
		}
		r++
	}
	if lastNL >= 0 { // \s*[\r\n]+ : up to the last line break of the run
		return lastNL + 1 - i
	}
	if r == i {
		return 0
	}
	if r < end && r-i >= 2 { // \s+(?!\S) gives the last space to the next word
		return r - 1 - i
	}
	return r - i
}

// DeepSeek LLM's letter class, the cased letters as its tokenizer.json
// spells them:
// [A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]
var dsLetterRanges = [][2]rune{
	{0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
	{0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
	{0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
	{0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
	{0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
	{0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
	{0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
	{0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
	{0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
	{0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
	{0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
	{0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
	{0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
	{0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
	{0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
	{0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
	{0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
}

// [!-/:-~！-／：-～‘-‟　-。]
var dsPunctRanges = [][2]rune{
	{0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
}

// [一-龥ࠀ-一가-퟿]
var cjkRanges = [][2]rune{{0x4E00, 0x9FA5}, {0x800, 0x4E00}, {0xAC00, 0xD7FF}}

// inRanges tests a literal class on llama.cpp's wide-string path, where
// non-ASCII whitespace has been replaced by \v before matching.
func inRanges(ranges [][2]rune) classFn {
	// Sort and merge overlapping ranges so one binary search decides.
	sorted := slices.Clone(ranges)
	slices.SortFunc(sorted, func(a, b [2]rune) int { return int(a[0] - b[0]) })
	var merged [][2]rune
	for _, rg := range sorted {
		if n := len(merged); n > 0 && rg[0] <= merged[n-1][1]+1 {
			merged[n-1][1] = max(merged[n-1][1], rg[1])
			continue
		}
		merged = append(merged, rg)
	}
	contains := func(r rune) bool {
		i := sort.Search(len(merged), func(i int) bool { return merged[i][0] > r }) - 1
		return i >= 0 && r <= merged[i][1]
	}
	var ascii [128]bool
	for r := range rune(128) {
		ascii[r] = contains(r)
	}
	return func(info cpInfo, r rune) bool {
		if r >= 0 && r < 128 {
			return ascii[r]
		}
		return !info.space && contains(r)
	}
}

var (
	matchDSLLMLetters = spaceThenClass(inRanges(dsLetterRanges))
	matchDSLLMPunct   = spaceThenClass(inRanges(dsPunctRanges))
	matchCJK          = runOf(inRanges(cjkRanges))
)
