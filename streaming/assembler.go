package streaming

import (
	"unicode"
	"unicode/utf8"

	"oengine/model/tokenizer"
)

// TextTokenizer is what the assembler needs; *tokenizer.Tokenizer
// implements it.
type TextTokenizer interface {
	Encode(text string, opts tokenizer.EncodeOptions) []int32
	// StablePrefixOpts returns the byte length of a prefix of text whose
	// tokens cannot change whatever text is appended later.
	StablePrefixOpts(text string, opts tokenizer.EncodeOptions) int
}

// Assembler turns streamed text and token-id chunks into input tokens so
// that the tokens of a run of text chunks are exactly the tokenization of
// their concatenated text: each text chunk releases the tokens of the
// stable prefix of the text pending so far and holds back the tail that a
// later chunk could still merge with, until the next chunk, a token-id
// chunk or the end of input. Special tokens in text are parsed
// (docs/design.md §2). Not safe for concurrent use.
type Assembler struct {
	tok        TextTokenizer
	pending    string // text received but not yet tokenized
	addSpecial bool   // the BOS rule still applies to the current run
	cont       bool   // the current run has released tokens (the rest continues them)
}

// NewAssembler returns an assembler. bos applies the vocabulary's BOS rule
// to the first text run (the start frame's prompt opening a sequence);
// chunks never add BOS otherwise.
func NewAssembler(tok TextTokenizer, bos bool) *Assembler {
	return &Assembler{tok: tok, addSpecial: bos}
}

func (a *Assembler) opts() tokenizer.EncodeOptions {
	return tokenizer.EncodeOptions{AddSpecial: a.addSpecial, ParseSpecial: true, Continuation: a.cont}
}

// Pending returns the held-back text.
func (a *Assembler) Pending() string { return a.pending }

// Text adds text and returns the tokens that became final.
func (a *Assembler) Text(s string) []int32 {
	a.pending += s
	o := a.opts()
	c := a.safeCut(a.pending, o)
	if c <= 0 {
		return nil
	}
	ids := a.tok.Encode(a.pending[:c], o)
	a.pending = a.pending[c:]
	a.addSpecial, a.cont = false, true
	return ids
}

// Flush ends the current text run and returns its remaining tokens.
func (a *Assembler) Flush() []int32 {
	if a.pending == "" {
		a.addSpecial, a.cont = false, false
		return nil
	}
	ids := a.tok.Encode(a.pending, a.opts())
	a.pending = ""
	a.addSpecial, a.cont = false, false
	return ids
}

// Tokens ends the current text run and returns its remaining tokens
// followed by ids (a token-id chunk passes through unchanged).
func (a *Assembler) Tokens(ids []int32) []int32 {
	out := a.Flush()
	if len(out) == 0 {
		return ids
	}
	return append(out, ids...)
}

// safeCut is the tokenizer's stable prefix, moved back until the text
// after the cut starts with whitespace. The tokenizer's cut alone was seen
// to split a complete special token whose tail is also the prefix of
// another special token (falcon "<|endoftext|>") and a contraction still
// being typed (gpt-2 "'r" before "'re"); a word boundary before whitespace
// is where no later text can merge across.
func (a *Assembler) safeCut(text string, o tokenizer.EncodeOptions) int {
	c := a.tok.StablePrefixOpts(text, o)
	for c > 0 {
		if c < len(text) {
			if r, _ := utf8.DecodeRuneInString(text[c:]); unicode.IsSpace(r) {
				return c
			}
		}
		next := a.tok.StablePrefixOpts(text[:c], o)
		if next >= c {
			return 0
		}
		c = next
	}
	return 0
}
