package tokenizer

import "fmt"

// Pre-tokenizers: a byte-level BPE vocabulary first cuts text into words,
// and merges never cross a word boundary. llama.cpp selects a list of
// regular expressions by tokenizer.ggml.pre and applies them one after the
// other: each expression re-splits every piece the previous one produced,
// and both its matches and the text between matches become pieces. Go's
// regexp has no lookahead, so each expression is written here by hand as a
// function that answers "how long is the match starting at codepoint i"
// with ECMAScript (leftmost alternative, backtracking) semantics, which is
// what std::regex gives llama.cpp. The two expressions llama.cpp itself
// implements by hand (GPT-2's and Llama 3's) are ported as such, including
// their small departures from the regex.

// seg is a half-open range of codepoint indices into a cpText.
type seg struct{ a, b int32 }

// stage re-splits each input segment; out covers exactly the input.
type stage func(t *cpText, in []seg, out []seg) []seg

// preFamily names one of the pre-tokenizer configurations.
type preFamily int

const (
	preDefault preFamily = iota
	preGPT2
	preLlama3
	preQwen2
	preDeepseekLLM
	preDeepseekCoder
	preFalcon
	preStarcoder
	preTekken
	preGPT4o
)

// preConfig is what tokenizer.ggml.pre selects.
type preConfig struct {
	family       preFamily
	ignoreMerges bool // a word that is itself a token is emitted whole
	addBOS       bool // llama.cpp's default for add_bos before the metadata key
}

// lookupPre maps a tokenizer.ggml.pre value to its configuration, as
// llama.cpp's llama_vocab::load does for the families implemented here.
// "gpt-neox" is not a llama.cpp name; it is accepted as GPT-2's expression,
// which GPT-NeoX's tokenizer uses.
func lookupPre(name string) (preConfig, error) {
	switch name {
	case "", "default":
		return preConfig{family: preDefault}, nil
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano":
		return preConfig{family: preLlama3, ignoreMerges: true, addBOS: true}, nil
	case "dbrx", "smaug-bpe", "glm4", "chatglm-bpe":
		return preConfig{family: preLlama3}, nil
	case "deepseek-llm":
		return preConfig{family: preDeepseekLLM}, nil
	case "deepseek-coder":
		return preConfig{family: preDeepseekCoder}, nil
	case "falcon":
		return preConfig{family: preFalcon}, nil
	case "gpt-2", "gpt-neox", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
		"a.x-4.0", "mellum", "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling",
		"exaone4", "jina-v1-en", "jina-v2-code", "roberta-bpe":
		return preConfig{family: preGPT2}, nil
	case "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2":
		return preConfig{family: preStarcoder}, nil
	case "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "hunyuan", "solar-open", "megrez", "grok-2":
		return preConfig{family: preQwen2}, nil
	case "tekken":
		return preConfig{family: preTekken, ignoreMerges: true, addBOS: true}, nil
	case "gpt-4o", "llama4", "kanana2", "talkie":
		return preConfig{family: preGPT4o}, nil
	}
	return preConfig{}, fmt.Errorf("%w: unknown pre-tokenizer type %q", ErrUnsupported, name)
}

// stages returns the expression list of a family, in llama.cpp's order.
func (f preFamily) stages() []stage {
	switch f {
	case preGPT2:
		return []stage{splitGPT2}
	case preLlama3:
		return []stage{splitLlama3}
	case preQwen2:
		return []stage{matcher(matchQwen2)}
	case preTekken:
		return []stage{matcher(matchTekken)}
	case preGPT4o:
		return []stage{matcher(matchGPT4o)}
	case preDeepseekLLM:
		return []stage{
			matcher(matchCRLF),         // [\r\n]
			matcher(matchDSLLMLetters), // \s?[A-Za-zµÀ-ÖØ-ö...]+
			matcher(matchDSLLMPunct),   // \s?[!-/:-~！-／：-～‘-‟　-。]+
			splitTrailingSpace,         // \s+$
			matcher(matchCJK),          // [一-龥ࠀ-一가-퟿]+
			matcher(runOf(func(i cpInfo, _ rune) bool { return i.cat == catNumber })), // \p{N}+
		}
	case preDeepseekCoder:
		return []stage{
			matcher(matchCRLF),               // [\r\n]
			matcher(spaceThenRun(catLetter)), // \s?\p{L}+
			matcher(spaceThenRun(catPunct)),  // \s?\p{P}+
			matcher(matchCJK),                // [一-龥ࠀ-一가-퟿]+
			matcher(oneOf(func(i cpInfo, _ rune) bool { return i.cat == catNumber })), // \p{N}
		}
	case preFalcon:
		return []stage{
			matcher(runOf(punctOr("$+<=>^~|`"))), // [\p{P}\$\+<=>\^~\|`]+
			splitGPT2,
			matcher(matchThreeDigits), // [0-9][0-9][0-9]
		}
	case preStarcoder:
		return []stage{
			matcher(oneOf(func(i cpInfo, _ rune) bool { return i.cat == catNumber })), // \p{N}
			splitGPT2,
		}
	default: // preDefault
		return []stage{
			matcher(runOf(punctOr("$+<=>^~|"))), // [\p{P}\$\+<=>\^~\|]+
			splitGPT2,                           // GPT-2
			matcher(runOf(func(i cpInfo, _ rune) bool { return i.cat == catNumber })), // \p{N}+
			matcher(matchThreeDigits), // [0-9][0-9][0-9]
		}
	}
}

// preTokenize splits t into words (codepoint ranges) with the given stages.
// bufs is scratch memory kept between calls; the result aliases one of them.
func preTokenize(t *cpText, stages []stage, bufs *[2][]seg) []seg {
	cur := append(bufs[0][:0], seg{0, int32(len(t.cps))})
	next := bufs[1]
	if len(t.cps) == 0 {
		return cur[:0]
	}
	for _, st := range stages {
		next = st(t, cur, next[:0])
		cur, next = next, cur
	}
	bufs[0], bufs[1] = cur, next
	return cur
}

// matchFn reports the length of the match that starts at codepoint i of
// the segment ending at end, or 0 when the expression does not match there.
type matchFn func(t *cpText, i, end int) int

// matcher turns a match function into a stage: the leftmost match is taken,
// scanning resumes at its end, and unmatched gaps become pieces too
// (llama.cpp's unicode_regex_split_stl).
func matcher(m matchFn) stage {
	return func(t *cpText, in []seg, out []seg) []seg {
		for _, s := range in {
			prev := int(s.a)
			for i := int(s.a); i < int(s.b); {
				n := m(t, i, int(s.b))
				if n <= 0 {
					i++
					continue
				}
				if i > prev {
					out = append(out, seg{int32(prev), int32(i)})
				}
				out = append(out, seg{int32(i), int32(i + n)})
				i += n
				prev = i
			}
			if prev < int(s.b) {
				out = append(out, seg{int32(prev), s.b})
			}
		}
		return out
	}
}

// classFn decides membership of one codepoint in a character class.
type classFn func(info cpInfo, r rune) bool

func runOf(c classFn) matchFn {
	return func(t *cpText, i, end int) int {
		j := i
		for j < end && c(t.info[j], t.cps[j]) {
			j++
		}
		return j - i
	}
}

func oneOf(c classFn) matchFn {
	return func(t *cpText, i, end int) int {
		if c(t.info[i], t.cps[i]) {
			return 1
		}
		return 0
	}
}

// spaceThenRun is \s?X+ for a category X.
func spaceThenRun(c cat) matchFn {
	return spaceThenClass(func(info cpInfo, _ rune) bool { return info.cat == c })
}

func spaceThenClass(c classFn) matchFn {
	return func(t *cpText, i, end int) int {
		j := i
		if t.info[i].space && i+1 < end && c(t.info[i+1], t.cps[i+1]) {
			j = i + 1
		}
		k := j
		for k < end && c(t.info[k], t.cps[k]) {
			k++
		}
		if k == j {
			return 0
		}
		return k - i
	}
}

func punctOr(extra string) classFn {
	var ascii [128]bool
	for i := 0; i < len(extra); i++ {
		ascii[extra[i]] = true
	}
	return func(info cpInfo, r rune) bool {
		return info.cat == catPunct || (r >= 0 && r < 128 && ascii[r])
	}
}

func matchCRLF(t *cpText, i, end int) int {
	if c := t.cps[i]; c == '\r' || c == '\n' {
		return 1
	}
	return 0
}

func matchThreeDigits(t *cpText, i, end int) int {
	if i+3 > end {
		return 0
	}
	for k := i; k < i+3; k++ {
		if c := t.cps[k]; c < '0' || c > '9' {
			return 0
		}
	}
	return 3
}

// splitTrailingSpace is \s+$: the whitespace run that ends a segment.
func splitTrailingSpace(t *cpText, in []seg, out []seg) []seg {
	for _, s := range in {
		ts := s.b
		for ts > s.a && t.info[ts-1].space {
			ts--
		}
		if ts > s.a {
			out = append(out, seg{s.a, ts})
		}
		if ts < s.b {
			out = append(out, seg{ts, s.b})
		}
	}
	return out
}
