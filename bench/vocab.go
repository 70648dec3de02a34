package bench

import (
	"fmt"
	"math/rand/v2"
	"unicode"
	"unicode/utf8"

	"oengine/model/gguf"
	"oengine/model/tokenizer"
)

// Vocab is the pool that token-id prompts are drawn from: the ids of a
// model's vocabulary that detokenize to ordinary text. Control, unknown,
// unused, user-defined and byte tokens are left out, and so is any token
// whose text is empty, not valid UTF-8, or holds a control character.
type Vocab struct {
	IDs    []uint32 // ordinary ids, ascending
	Size   int      // the whole vocabulary's size
	Source string   // where it came from, for the report ("server", "file x.gguf")
}

// Draw returns n ids drawn uniformly (with replacement) from the pool.
func (v *Vocab) Draw(r *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = v.IDs[r.IntN(len(v.IDs))]
	}
	return out
}

// ordinaryText reports whether a token's detokenized text is ordinary:
// non-empty, valid UTF-8 without the replacement character (a lone byte of
// a multi-byte character), and free of control characters.
func ordinaryText(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// VocabFromTokenizer keeps the normal-typed tokens of t whose piece is
// ordinary text.
func VocabFromTokenizer(t *tokenizer.Tokenizer, source string) (*Vocab, error) {
	v := &Vocab{Size: t.VocabSize(), Source: source}
	types := t.Vocab().Types
	for id := range v.Size {
		if types != nil && types[id] != tokenizer.TypeNormal {
			continue
		}
		if t.IsControl(int32(id)) || !ordinaryText(string(t.Piece(int32(id)))) {
			continue
		}
		v.IDs = append(v.IDs, uint32(id))
	}
	if len(v.IDs) == 0 {
		return nil, fmt.Errorf("bench: %s: no ordinary token in the vocabulary", source)
	}
	return v, nil
}

// VocabFromGGUF reads the vocabulary of a GGUF file (only its metadata is
// used; tensors are not loaded).
func VocabFromGGUF(path string) (*Vocab, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: vocabulary: %w", err)
	}
	defer f.Close()
	t, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("bench: vocabulary of %s: %w", path, err)
	}
	return VocabFromTokenizer(t, "file "+path)
}

// vocabFromTexts builds the pool from token texts as a server detokenizes
// them, by id ("" for ids it did not report). A server gives no token
// types, so byte tokens are recognised by their text: a byte above 0x7f
// alone is not valid UTF-8, and an ASCII byte token has the same text as an
// ordinary token with a higher id, so of the ids that share a text only the
// last is kept.
func vocabFromTexts(texts []string, source string) (*Vocab, error) {
	last := map[string]int{}
	for id, s := range texts {
		if ordinaryText(s) {
			last[s] = id
		}
	}
	v := &Vocab{Size: len(texts), Source: source}
	for id, s := range texts {
		if ordinaryText(s) && last[s] == id {
			v.IDs = append(v.IDs, uint32(id))
		}
	}
	if len(v.IDs) == 0 {
		return nil, fmt.Errorf("bench: %s: no ordinary token in the vocabulary", source)
	}
	return v, nil
}
