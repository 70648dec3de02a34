package verify

import (
	"fmt"

	"oengine/model/gguf"
	"oengine/model/tokenizer"
)

// encoder tokenizes a prompt the way the reference did.
type encoder interface {
	Encode(text string) ([]int32, error)
}

// ggufEncoder encodes with the model's own tokenizer, special tokens added
// (BOS when the vocabulary asks) and not parsed in the text, as llama.cpp
// wrote the reference tokens.
type ggufEncoder struct{ t *tokenizer.Tokenizer }

func (e ggufEncoder) Encode(text string) ([]int32, error) {
	return e.t.Encode(text, tokenizer.EncodeOptions{AddSpecial: true}), nil
}

// newEncoder builds the model's tokenizer from its metadata.
func newEncoder(f *gguf.File) (encoder, error) {
	t, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	return ggufEncoder{t}, nil
}
