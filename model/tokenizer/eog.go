package tokenizer

import (
	"log/slog"
	"sort"
	"strings"
)

// Texts llama.cpp recognises as end-of-turn / end-of-generation tokens.
var (
	eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	eogTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
		"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
		"[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~["}
	fimTexts = [][]string{
		{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"},
		{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"},
		{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"},
		{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
		{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
		{"<|file_sep|>"},
	}
)

// deriveSpecials reproduces llama.cpp's text-based fix-ups: EOT / EOM / FIM
// detection (forcing such tokens to control), "unused" control tokens, the
// end-of-generation set, gpt-oss's always-rendered tokens, the special
// token list used to split input, and Phi-3's whitespace stripping.
// Where llama.cpp picks among several candidates in hash-map order, the
// first text in its list wins here.
func (t *Tokenizer) deriveSpecials() {
	v := t.v
	find := func(texts []string) int32 {
		for _, s := range texts {
			if id, ok := t.ids[s]; ok {
				return id
			}
		}
		return -1
	}
	forceControl := func(id int32) {
		if id >= 0 && t.attrs[id]&attrControl == 0 {
			slog.Debug("tokenizer: control-looking token was not control-type", "id", id, "text", v.Tokens[id])
			t.attrs[id] |= attrControl
		}
	}
	if t.eot < 0 {
		t.eot = find(eotTexts)
		forceControl(t.eot)
	}
	if t.eom < 0 {
		t.eom = find([]string{"<|eom_id|>"})
		forceControl(t.eom)
	}
	fim := []int32{v.FIMPre, v.FIMSuf, v.FIMMid, v.FIMPad, v.FIMRep, v.FIMSep}
	for i, texts := range fimTexts {
		if fim[i] < 0 {
			fim[i] = find(texts)
			forceControl(fim[i])
		}
	}
	t.fimPre, t.fimSuf, t.fimMid = fim[0], fim[1], fim[2]
	for id, s := range v.Tokens {
		if t.attrs[id]&attrControl != 0 && strings.Contains(s, "unused") {
			t.attrs[id] |= attrUnused
		}
	}
	t.eog = make(map[int32]bool)
	for _, id := range fim[3:] {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	for _, s := range eogTexts {
		if id, ok := t.ids[s]; ok {
			t.eog[id] = true
			forceControl(id)
		}
	}
	for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		if id, ok := t.ids[s]; ok {
			t.attrs[id] = attrUserDefined
		}
	}
	for _, id := range []int32{v.EOS, t.eot, t.eom} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	// o200k_harmony / solar-open: <|end|> is not EOG when <|return|> and
	// <|call|> (or <|calls|> and <|flush|>) are.
	has := func(s string) bool { id, ok := t.ids[s]; return ok && t.eog[id] }
	if endID, ok := t.ids["<|end|>"]; ok && t.eog[endID] {
		call := has("<|call|>") || has("<|calls|>")
		if (has("<|return|>") && call) || (call && has("<|flush|>")) {
			delete(t.eog, endID)
			t.attrs[endID] = attrUserDefined
		}
	}
	// Gemma 4 / PaddleOCR: </s> is not EOG when <|tool_response> is.
	if sID, ok := t.ids["</s>"]; ok && t.eog[sID] && has("<|tool_response>") {
		delete(t.eog, sID)
		t.attrs[sID] = attrNormal
	}

	for id, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.specials = append(t.specials, int32(id))
			t.maxSpecial = max(t.maxSpecial, len(v.Tokens[id]))
		}
	}
	sort.SliceStable(t.specials, func(i, j int) bool {
		return len(v.Tokens[t.specials[i]]) > len(v.Tokens[t.specials[j]])
	})
	for k, id := range t.specials {
		if s := v.Tokens[id]; s != "" {
			t.specialsByByte[s[0]] = append(t.specialsByByte[s[0]], int32(k))
		}
	}
	name := strings.ToLower(v.Name)
	if strings.Contains(name, "phi-3") || strings.Contains(name, "phi3") {
		for _, id := range t.specials {
			t.attrs[id] |= attrRStrip
		}
		if id, ok := t.ids["</s>"]; ok {
			t.attrs[id] |= attrRStrip
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if id, ok := t.ids[s]; ok {
				t.attrs[id] &^= attrRStrip
			}
		}
	}
}

// IsEOG reports whether generating id ends generation: EOS, EOT, EOM and
// the tokens llama.cpp recognises by text (<|im_end|>, <|eot_id|>,
// <|endoftext|>, FIM pad / repo / file-separator tokens, ...).
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// EOGTokens lists the end-of-generation set in increasing order.
func (t *Tokenizer) EOGTokens() []int32 {
	out := make([]int32, 0, len(t.eog))
	for id := range t.eog {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
