package engine

import "oengine/model/tokenizer"

// tokAdapter adapts *tokenizer.Tokenizer to Tokenizer.
type tokAdapter struct{ t *tokenizer.Tokenizer }

// WrapTokenizer adapts a GGUF tokenizer.
func WrapTokenizer(t *tokenizer.Tokenizer) Tokenizer { return tokAdapter{t: t} }

func (a tokAdapter) Encode(text string, opts tokenizer.EncodeOptions) []int32 {
	return a.t.Encode(text, opts)
}

func (a tokAdapter) IsEOG(id int32) bool { return a.t.IsEOG(id) }

func (a tokAdapter) EncodePair(x, y string, parseSpecial bool) ([]int32, int, error) {
	return a.t.EncodePair(x, y, parseSpecial)
}

func (a tokAdapter) NewDecoder(special bool) Decoder {
	if special {
		return a.t.NewDecoderSpecial()
	}
	return a.t.NewDecoder()
}
