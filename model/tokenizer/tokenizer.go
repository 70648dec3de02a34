// Package tokenizer turns text into token ids and back the way llama.cpp
// does for GGUF vocabularies: SentencePiece BPE ("llama" models),
// byte-level BPE ("gpt2" models) with the pre-tokenizer that
// tokenizer.ggml.pre selects, WordPiece ("bert" models, wpm.go) and
// SentencePiece unigram ("t5" models: T5, XLM-RoBERTa; ugm.go).
package tokenizer

import (
	"fmt"
	"strings"
	"sync"
)

// attr is llama.cpp's per-token attribute set.
type attr uint16

const (
	attrUnknown attr = 1 << iota
	attrUnused
	attrNormal
	attrControl
	attrUserDefined
	attrByte
	attrNormalized
	attrLStrip
	attrRStrip
)

// EncodeOptions controls Encode.
type EncodeOptions struct {
	// AddSpecial adds BOS / EOS as the vocabulary asks (add_bos_token,
	// add_eos_token); WordPiece vocabularies add [CLS] first and [SEP]
	// last.
	AddSpecial bool
	// ParseSpecial recognises the texts of control tokens in the input.
	// User-defined tokens are always recognised, as in llama.cpp.
	ParseSpecial bool
	// Continuation marks text that continues earlier text: SentencePiece
	// vocabularies (BPE and unigram) then add no leading space to its
	// first fragment.
	Continuation bool
}

// Tokenizer encodes and decodes with one vocabulary. It is safe for
// concurrent use.
type Tokenizer struct {
	v     *Vocab
	isBPE bool

	ids    map[string]int32 // token text -> id
	attrs  []attr
	scores []float32 // SPM, by id

	// pieces[pieceOff[id]:pieceOff[id+1]] is the token's bytes with special
	// tokens rendered as their text (llama.cpp's token-to-piece cache).
	pieces   []byte
	pieceOff []int32

	specials []int32 // control / user-defined / unknown, longest text first
	// specialsByByte[b] lists indices into specials whose text starts with b.
	specialsByByte [256][]int32
	maxSpecial     int // longest special text in bytes
	eog            map[int32]bool
	eot, eom       int32
	// fill-in-the-middle framing tokens (FIM); -1 when absent
	fimPre, fimSuf, fimMid int32

	// SPM
	addSpacePrefix bool
	byteTok        [256]int32

	// unigram
	ugm *ugmModel

	// WordPiece
	wpm *wpmModel

	// BPE
	bpe          *bpeModel
	stages       []stage
	ignoreMerges bool
	noWordCache  bool // tests: encode every word afresh (the reference path)

	// spmSplit is set when no SPM token holds a ▁ that follows a non-▁
	// byte: text can then be merged piecewise, cut before each word's ▁.
	spmSplit   bool
	noSPMSplit bool // tests: merge the whole fragment at once (the reference path)

	scratch sync.Pool // *encodeScratch

	specialPrefixSet // built on first StablePrefix call
}

type encodeScratch struct {
	bpe     bpeScratch
	spm     spmScratch
	wpm     wpmScratch
	ugm     ugmScratch
	frags   []fragment
	tmp     []fragment
	present []int32
	seen    []bool
}

// New builds a tokenizer. It fails on unsupported models or pre-tokenizers,
// duplicate token texts, and BOS/EOS requested but absent.
func New(v *Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("%w: no tokens", ErrInvalid)
	}
	if v.Scores != nil && len(v.Scores) < n || v.Types != nil && len(v.Types) < n {
		return nil, fmt.Errorf("%w: scores or types shorter than the token list", ErrInvalid)
	}
	t := &Tokenizer{v: v, ids: make(map[string]int32, n), attrs: make([]attr, n), eot: v.EOT, eom: v.EOM}
	t.scratch.New = func() any { return new(encodeScratch) }
	for i := range v.Tokens {
		s := tokenName(v, i)
		if j, dup := t.ids[s]; dup {
			return nil, fmt.Errorf("%w: duplicate token %q has ids %d and %d", ErrInvalid, s, j, i)
		}
		t.ids[s] = int32(i)
		t.attrs[i] = attrNormal
		if v.Types != nil {
			t.attrs[i] = attrFromType(v.Types[i])
		}
	}
	switch v.Model {
	case ModelSPM:
		t.addSpacePrefix = v.AddSpacePrefix
		t.scores = v.Scores
		if t.scores == nil {
			t.scores = make([]float32, n)
		}
		t.spmSplit = spmWordsSeparable(v.Tokens)
		for b := 0; b < 256; b++ {
			t.byteTok[b] = -1
			if id, ok := t.ids[fmt.Sprintf("<0x%02X>", b)]; ok {
				t.byteTok[b] = id
			} else if id, ok := t.ids[string([]byte{byte(b)})]; ok {
				t.byteTok[b] = id
			}
		}
	case ModelBPE:
		pc, err := lookupPre(v.Pre)
		if err != nil {
			return nil, err
		}
		t.isBPE = true
		t.stages = pc.family.stages()
		t.ignoreMerges = pc.ignoreMerges
		t.bpe = buildBPE(t.ids, n, v.Merges)
	case ModelWPM:
		if v.UNK < 0 || v.UNK >= int32(n) {
			return nil, fmt.Errorf("%w: WordPiece vocabulary without an unknown token", ErrInvalid)
		}
		t.wpm = newWPM(v.Lowercase, v.StripAccents, v.UNK)
		for s := range t.ids {
			t.wpm.maxLen = max(t.wpm.maxLen, len(s))
		}
	case ModelUGM:
		m, err := newUGM(v, t.attrs)
		if err != nil {
			return nil, err
		}
		t.ugm = m
	default:
		return nil, fmt.Errorf("%w: tokenizer model %q", ErrUnsupported, v.Model)
	}
	for _, sp := range []struct {
		name string
		id   int32
		on   bool
	}{{"BOS", v.BOS, v.AddBOS}, {"EOS", v.EOS, v.AddEOS}, {"SEP", v.SEP, v.AddSEP}} {
		if sp.id >= int32(n) {
			return nil, fmt.Errorf("%w: %s id %d outside the vocabulary", ErrInvalid, sp.name, sp.id)
		}
		if sp.on && sp.id < 0 {
			return nil, fmt.Errorf("%w: add %s is set but there is no %s token", ErrInvalid, sp.name, sp.name)
		}
	}
	t.deriveSpecials()
	if t.ugm != nil {
		t.ugm.scoreUserDefined(t.attrs)
	}
	t.buildPieces()
	return t, nil
}

// tokenName is the text of token id as llama.cpp keeps it: an empty
// token is renamed [EMPTY_id].
func tokenName(v *Vocab, id int) string {
	if v.Tokens[id] == "" {
		return fmt.Sprintf("[EMPTY_%d]", id)
	}
	return v.Tokens[id]
}

func attrFromType(ty int32) attr {
	switch ty {
	case TypeUnknown:
		return attrUnknown
	case TypeUnused:
		return attrUnused
	case TypeNormal:
		return attrNormal
	case TypeControl:
		return attrControl
	case TypeUserDefined:
		return attrUserDefined
	case TypeByte:
		return attrByte
	}
	return 0
}

// buildPieces renders every token once (special tokens as their text).
func (t *Tokenizer) buildPieces() {
	n := len(t.v.Tokens)
	t.pieceOff = make([]int32, n+1)
	buf := make([]byte, 0, n*6)
	for id := range t.v.Tokens {
		s := tokenName(t.v, id)
		a := t.attrs[id]
		switch {
		case a&(attrUnknown|attrControl|attrUserDefined) != 0:
			buf = append(buf, s...)
		case a&attrNormal != 0:
			if t.isBPE {
				buf = byteDecode(buf, s)
			} else {
				buf = appendUnescaped(buf, s)
			}
		case a&attrByte != 0:
			buf = append(buf, parseByteToken(s))
		}
		t.pieceOff[id+1] = int32(len(buf))
	}
	t.pieces = buf
}

// appendUnescaped appends s with every ▁ replaced by a space.
func appendUnescaped(dst []byte, s string) []byte {
	for {
		i := strings.Index(s, spaceMarker)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(append(dst, s[:i]...), ' ')
		s = s[i+len(spaceMarker):]
	}
}

// parseByteToken reads the two hex digits of "<0xNN>" (strtol semantics:
// stop at the first non-hex digit).
func parseByteToken(s string) byte {
	if len(s) < 4 {
		return 0
	}
	var v byte
	for i := 3; i < len(s) && i < 5; i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return v
		}
	}
	return v
}

// Encode tokenizes text.
func (t *Tokenizer) Encode(text string, opts EncodeOptions) []int32 {
	s := t.scratch.Get().(*encodeScratch)
	defer t.scratch.Put(s)
	var out []int32
	frags := t.partition(text, opts.ParseSpecial, s)
	if opts.AddSpecial && t.v.AddBOS {
		out = append(out, t.v.BOS)
	}
	prevSpecial := !opts.Continuation
	for _, f := range frags {
		if f.tok >= 0 {
			out = append(out, f.tok)
			prevSpecial = true
			continue
		}
		raw := text[f.start:f.end]
		switch {
		case t.isBPE:
			out = t.bpeEncode(raw, &s.bpe, out)
		case t.wpm != nil:
			out = t.wpmEncode(raw, &s.wpm, out)
		case t.ugm != nil:
			out = t.ugmEncode(raw, prevSpecial, &s.ugm, out)
		default:
			out = t.spmEncode(escapeSpaces(raw, t.addSpacePrefix && prevSpecial), &s.spm, out)
		}
		prevSpecial = false
	}
	if opts.AddSpecial && t.v.AddEOS {
		out = append(out, t.v.EOS)
	}
	if opts.AddSpecial && t.v.AddSEP {
		out = append(out, t.v.SEP)
	}
	return out
}

// Piece returns the bytes of one token: byte tokens give their byte, SPM's
// ▁ becomes a space, byte-level BPE text is mapped back to bytes, and
// control / unknown tokens give nothing (see PieceSpecial). Ids outside the
// vocabulary give nil.
func (t *Tokenizer) Piece(id int32) []byte {
	if id < 0 || int(id) >= len(t.attrs) || t.attrs[id]&(attrControl|attrUnknown) != 0 {
		return nil
	}
	return t.pieces[t.pieceOff[id]:t.pieceOff[id+1]:t.pieceOff[id+1]]
}

// PieceSpecial is Piece with control and unknown tokens rendered as their
// text.
func (t *Tokenizer) PieceSpecial(id int32) []byte {
	if id < 0 || int(id) >= len(t.attrs) {
		return nil
	}
	return t.pieces[t.pieceOff[id]:t.pieceOff[id+1]:t.pieceOff[id+1]]
}

// Decode concatenates the pieces of ids. Unlike llama.cpp's detokenizer it
// strips no leading space and, but for WordPiece, cleans no spaces, so
// streaming the pieces (Decoder) gives exactly the same bytes. WordPiece
// vocabularies are cleaned as llama.cpp cleans them (cleanSpaces), which
// makes Decode equal llama.cpp's llama_detokenize for them (whose leading
// space stays: a WordPiece vocabulary has no space prefix to remove).
func (t *Tokenizer) Decode(ids []int32) []byte {
	return t.decode(ids, false)
}

// DecodeSpecial is Decode with control tokens rendered as their text.
func (t *Tokenizer) DecodeSpecial(ids []int32) []byte {
	return t.decode(ids, true)
}

func (t *Tokenizer) decode(ids []int32, special bool) []byte {
	var out []byte
	for _, id := range ids {
		if special {
			out = append(out, t.PieceSpecial(id)...)
		} else {
			out = append(out, t.Piece(id)...)
		}
	}
	if t.wpm != nil {
		out = cleanSpaces(out)
	}
	return out
}

// Token is the vocabulary's text of id as the file stores it
// (SentencePiece's ▁ for a space, byte-level BPE's Ġ), what Hugging Face's
// convert_ids_to_tokens gives; "" outside the vocabulary.
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.v.Tokens) {
		return ""
	}
	return t.v.Tokens[id]
}

// FIM returns the fill-in-the-middle tokens that frame a code completion
// between a prefix and a suffix (the file's fim_pre / fim_suf / fim_mid
// ids, else the texts llama.cpp recognises: Qwen's <|fim_prefix|>,
// StarCoder's <fim_prefix>, CodeLlama's <PRE>, DeepSeek's fim▁begin ...);
// ok is false unless all three exist.
func (t *Tokenizer) FIM() (pre, suf, mid int32, ok bool) {
	return t.fimPre, t.fimSuf, t.fimMid, t.fimPre >= 0 && t.fimSuf >= 0 && t.fimMid >= 0
}

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.v.Tokens) }

// BOS is the beginning-of-sequence token, -1 when absent.
func (t *Tokenizer) BOS() int32 { return t.v.BOS }

// EOS is the end-of-sequence token, -1 when absent.
func (t *Tokenizer) EOS() int32 { return t.v.EOS }

// SEP is the separator token (BERT's [SEP], which WordPiece vocabularies
// append with AddSpecial), -1 when absent.
func (t *Tokenizer) SEP() int32 { return t.v.SEP }

// EOT is the end-of-turn token (from metadata or recognised by its text),
// -1 when absent.
func (t *Tokenizer) EOT() int32 { return t.eot }

// AddBOS reports whether Encode with AddSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.v.AddBOS }

// IsControl reports whether id is a control token.
func (t *Tokenizer) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.attrs) && t.attrs[id]&attrControl != 0
}

// TokenText is the vocabulary text of id ("" outside the vocabulary).
func (t *Tokenizer) TokenText(id int32) string {
	if id < 0 || int(id) >= len(t.v.Tokens) {
		return ""
	}
	return t.v.Tokens[id]
}

// TokenID looks a token up by its vocabulary text.
func (t *Tokenizer) TokenID(text string) (int32, bool) {
	id, ok := t.ids[text]
	return id, ok
}

// ChatTemplate is tokenizer.chat_template ("" if absent).
func (t *Tokenizer) ChatTemplate() string { return t.v.ChatTemplate }

// Vocab returns the vocabulary the tokenizer was built from; do not modify it.
func (t *Tokenizer) Vocab() *Vocab { return t.v }
