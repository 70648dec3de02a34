package engine

import "oengine/model/tokenizer"

// tokAdapter adapts *tokenizer.Tokenizer to Tokenizer.
type tokAdapter struct{ t *tokenizer.Tokenizer }

// WrapTokenizer adapts a GGUF tokenizer.
func WrapTokenizer(t *tokenizer.Tokenizer) Tokenizer { return tokAdapter{t: t} }

func (a tokAdapter) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	return a.t.Encode(text, tokenizer.EncodeOptions{AddSpecial: addSpecial, ParseSpecial: parseSpecial})
}

func (a tokAdapter) IsEOG(id int32) bool { return a.t.IsEOG(id) }

func (a tokAdapter) NewDecoder() Decoder { return a.t.NewDecoder() }
