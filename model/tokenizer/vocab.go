package tokenizer

import (
	"errors"
	"fmt"

	"oengine/model/gguf"
)

// Token types as GGUF stores them in tokenizer.ggml.token_type.
const (
	TypeUndefined   int32 = 0
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// Model names (tokenizer.ggml.model).
const (
	ModelSPM = "llama" // SentencePiece
	ModelBPE = "gpt2"  // byte-level BPE
	ModelWPM = "bert"  // WordPiece (BERT and its embedding-model kin)
	ModelUGM = "t5"    // SentencePiece unigram (T5, XLM-RoBERTa and its embedding models and rerankers)
)

var (
	// ErrUnsupported is returned for tokenizer models and pre-tokenizers
	// that this package does not implement.
	ErrUnsupported = errors.New("tokenizer: unsupported")
	// ErrInvalid is returned for vocabularies that cannot be used.
	ErrInvalid = errors.New("tokenizer: invalid vocabulary")
)

// Vocab is everything a tokenizer needs, independent of GGUF. Special ids
// are -1 when absent.
type Vocab struct {
	Model  string    // "llama" (SentencePiece), "gpt2" (byte-level BPE), "bert" (WordPiece) or "t5" (unigram)
	Pre    string    // tokenizer.ggml.pre ("default", "llama-bpe", "qwen2", ...)
	Name   string    // general.name; llama.cpp keys a few per-model rules on it (Phi-3)
	Tokens []string  // token texts, by id
	Scores []float32 // SPM merge priorities, unigram log probabilities, by id; may be nil
	Types  []int32   // Type* by id; nil means all normal
	Merges []string  // "left right", by rank (BPE)

	BOS, EOS, EOT, UNK, PAD, EOM int32
	// SEP and MASK are BERT's [SEP] and [MASK] (WordPiece: BOS is [CLS]).
	SEP, MASK int32
	// FIM tokens that llama.cpp counts as end of generation; -1 when absent
	// (they are also recognised by their text, as llama.cpp does).
	FIMPad, FIMRep, FIMSep int32
	// FIMPre, FIMSuf and FIMMid frame a fill-in-the-middle prompt
	// (Tokenizer.FIM); -1 when absent (also recognised by their text).
	FIMPre, FIMSuf, FIMMid int32

	AddBOS, AddEOS bool
	AddSEP         bool // append SEP after the text (WordPiece: always, as llama.cpp does)
	AddSpacePrefix bool // SPM: prefix the text with a space (tokenizer.ggml.add_space_prefix, default true; unigram: default false)

	// Unigram normalizer: the SentencePiece precompiled_charsmap
	// (tokenizer.ggml.precompiled_charsmap, nil if absent; charsmap.go)
	// and whether runs of spaces collapse to one before each word
	// (tokenizer.ggml.remove_extra_whitespaces, default false).
	Charsmap               []byte
	RemoveExtraWhitespaces bool

	// WordPiece normalizer (tokenizer.ggml.normalizer.*): lowercase the
	// text, and strip accents (keep the first codepoint of each canonical
	// decomposition, drop marks).
	Lowercase, StripAccents bool

	ChatTemplate string // tokenizer.chat_template, "" if absent
	// RerankTemplate is tokenizer.chat_template.rerank ("" if absent): a
	// reranker's prompt with {query} and {document} in it (EncodePair).
	RerankTemplate string
}

// GGUF metadata keys.
const (
	keyModel          = "tokenizer.ggml.model"
	keyPre            = "tokenizer.ggml.pre"
	keyTokens         = "tokenizer.ggml.tokens"
	keyScores         = "tokenizer.ggml.scores"
	keyTypes          = "tokenizer.ggml.token_type"
	keyMerges         = "tokenizer.ggml.merges"
	keyAddBOS         = "tokenizer.ggml.add_bos_token"
	keyAddEOS         = "tokenizer.ggml.add_eos_token"
	keyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
	keyRemoveExtraWS  = "tokenizer.ggml.remove_extra_whitespaces"
	keyCharsmap       = "tokenizer.ggml.precompiled_charsmap"
	keyLowercase      = "tokenizer.ggml.normalizer.lowercase"
	keyStripAccents   = "tokenizer.ggml.normalizer.strip_accents"
	keyChatTemplate   = "tokenizer.chat_template"
	keyRerankTemplate = "tokenizer.chat_template.rerank"
	keyName           = "general.name"
)

// VocabFromGGUF reads the tokenizer.ggml.* metadata. Defaults follow
// llama.cpp: SentencePiece vocabularies default to BOS 1, EOS 2, UNK 0,
// add_bos true and add_space_prefix true; Llama-3-style pre-tokenizers
// default to add_bos true. (llama.cpp's legacy BPE default of BOS = EOS =
// 11 is not copied: an absent id stays -1.) WordPiece vocabularies default
// to BERT's ids, BOS ([CLS]) 101, UNK 100, SEP 102, PAD 0, MASK 103 and no
// EOS; they add BOS and SEP and ignore add_bos_token, add_eos_token and
// add_sep_token, since llama.cpp's WordPiece tokenizer adds [CLS] and
// [SEP] with add_special whatever those keys say. Their normalizer
// lowercases unless tokenizer.ggml.normalizer.lowercase is false and
// strips accents when tokenizer.ggml.normalizer.strip_accents says so,
// defaulting to the lowercase setting. Unigram vocabularies default to
// llama.cpp's T5 ids, EOS 1, UNK 2, PAD 0 and no BOS, add EOS and not BOS,
// and read add_space_prefix and remove_extra_whitespaces (both default
// false) and the precompiled_charsmap (a UINT8 or INT8 array).
func VocabFromGGUF(f *gguf.File) (*Vocab, error) {
	v := &Vocab{BOS: -1, EOS: -1, EOT: -1, UNK: -1, PAD: -1, EOM: -1, SEP: -1, MASK: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1, FIMPre: -1, FIMSuf: -1, FIMMid: -1}
	var ok bool
	if v.Model, ok = f.String(keyModel); !ok {
		return nil, fmt.Errorf("%w: %s missing", ErrInvalid, keyModel)
	}
	v.Pre, _ = f.String(keyPre)
	v.Name, _ = f.String(keyName)
	v.ChatTemplate, _ = f.String(keyChatTemplate)
	v.RerankTemplate, _ = f.String(keyRerankTemplate)
	if v.Tokens, ok = f.Strings(keyTokens); !ok {
		return nil, fmt.Errorf("%w: %s missing or not a string array", ErrInvalid, keyTokens)
	}
	n := len(v.Tokens)
	if _, present := f.Value(keyScores); present {
		if v.Scores, ok = f.Float32s(keyScores); !ok {
			ints, ok2 := f.Int32s(keyScores)
			if !ok2 {
				return nil, fmt.Errorf("%w: %s is not a float32 or int32 array", ErrInvalid, keyScores)
			}
			v.Scores = make([]float32, len(ints))
			for i, x := range ints {
				v.Scores[i] = float32(x)
			}
		}
		if len(v.Scores) < n {
			return nil, fmt.Errorf("%w: %d scores for %d tokens", ErrInvalid, len(v.Scores), n)
		}
	}
	if _, present := f.Value(keyTypes); present {
		if v.Types, ok = f.Int32s(keyTypes); !ok {
			return nil, fmt.Errorf("%w: %s is not an int32 array", ErrInvalid, keyTypes)
		}
		if len(v.Types) < n {
			return nil, fmt.Errorf("%w: %d token types for %d tokens", ErrInvalid, len(v.Types), n)
		}
	}
	switch v.Model {
	case ModelSPM:
		v.BOS, v.EOS, v.UNK = 1, 2, 0
		v.AddBOS, v.AddSpacePrefix = true, true
	case ModelBPE:
		if v.Merges, ok = f.Strings(keyMerges); !ok {
			return nil, fmt.Errorf("%w: %s missing or not a string array", ErrInvalid, keyMerges)
		}
		pc, err := lookupPre(v.Pre)
		if err != nil {
			return nil, err
		}
		v.AddBOS = pc.addBOS
	case ModelWPM:
		v.BOS, v.UNK, v.SEP, v.PAD, v.MASK = 101, 100, 102, 0, 103
	case ModelUGM:
		v.EOS, v.UNK, v.PAD = 1, 2, 0
		v.AddEOS = true
		if val, present := f.Value(keyCharsmap); present {
			if v.Charsmap, ok = val.AsBytes(); !ok {
				return nil, fmt.Errorf("%w: %s is not a UINT8 or INT8 array", ErrInvalid, keyCharsmap)
			}
			if v.Charsmap == nil {
				v.Charsmap = []byte{} // present but empty: New refuses it, as llama.cpp does
			}
		}
		if b, ok := f.Bool(keyRemoveExtraWS); ok {
			v.RemoveExtraWhitespaces = b
		}
	default:
		return nil, fmt.Errorf("%w: tokenizer model %q", ErrUnsupported, v.Model)
	}
	for _, sk := range []struct {
		key string
		id  *int32
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.eot_token_id", &v.EOT},
		{"tokenizer.ggml.eom_token_id", &v.EOM},
		{"tokenizer.ggml.unknown_token_id", &v.UNK},
		{"tokenizer.ggml.padding_token_id", &v.PAD},
		{"tokenizer.ggml.seperator_token_id", &v.SEP}, // sic: llama.cpp's spelling
		{"tokenizer.ggml.mask_token_id", &v.MASK},
		{"tokenizer.ggml.fim_pad_token_id", &v.FIMPad},
		{"tokenizer.ggml.fim_rep_token_id", &v.FIMRep},
		{"tokenizer.ggml.fim_sep_token_id", &v.FIMSep},
		{"tokenizer.ggml.fim_pre_token_id", &v.FIMPre},
		{"tokenizer.ggml.fim_suf_token_id", &v.FIMSuf},
		{"tokenizer.ggml.fim_mid_token_id", &v.FIMMid},
	} {
		if int(*sk.id) >= n {
			*sk.id = -1 // a default outside the vocabulary is disabled
		}
		if id, ok := f.Uint(sk.key); ok && id < uint64(n) {
			*sk.id = int32(id)
		}
	}
	if b, ok := f.Bool(keyAddBOS); ok {
		v.AddBOS = b
	}
	if b, ok := f.Bool(keyAddEOS); ok {
		v.AddEOS = b
	}
	if b, ok := f.Bool(keyAddSpacePrefix); ok {
		v.AddSpacePrefix = b
	}
	if v.Model == ModelWPM {
		v.AddBOS, v.AddEOS, v.AddSEP = true, false, true
		v.Lowercase = true
		if b, ok := f.Bool(keyLowercase); ok {
			v.Lowercase = b
		}
		v.StripAccents = v.Lowercase
		if b, ok := f.Bool(keyStripAccents); ok {
			v.StripAccents = b
		}
	}
	return v, nil
}

// FromGGUF builds the tokenizer of a GGUF file.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	v, err := VocabFromGGUF(f)
	if err != nil {
		return nil, err
	}
	return New(v)
}

// ByteLevelVocab returns a gpt2-style vocabulary: the 256 byte tokens (in
// byte-to-unicode form, id = byte value), one token per extra merge
// ("left right" whose parts are existing tokens; the merged token is
// appended in order), then the control tokens <|bos|> and <|eos|>. AddBOS
// is true. Merges whose parts are unknown are skipped.
func ByteLevelVocab(extraMerges []string) *Vocab {
	v := &Vocab{
		Model: ModelBPE, Pre: "gpt-2",
		BOS: -1, EOS: -1, EOT: -1, UNK: -1, PAD: -1, EOM: -1, SEP: -1, MASK: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1, FIMPre: -1, FIMSuf: -1, FIMMid: -1,
		AddBOS: true,
	}
	have := make(map[string]bool, 256+len(extraMerges)+2)
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, byteToString[b])
		v.Types = append(v.Types, TypeNormal)
		have[byteToString[b]] = true
	}
	for _, m := range extraMerges {
		var l, r string
		for i := 1; i < len(m); i++ {
			if m[i] == ' ' {
				l, r = m[:i], m[i+1:]
				break
			}
		}
		if !have[l] || !have[r] {
			continue
		}
		v.Merges = append(v.Merges, m)
		if !have[l+r] {
			have[l+r] = true
			v.Tokens = append(v.Tokens, l+r)
			v.Types = append(v.Types, TypeNormal)
		}
	}
	v.BOS = int32(len(v.Tokens))
	v.Tokens = append(v.Tokens, "<|bos|>")
	v.EOS = int32(len(v.Tokens))
	v.Tokens = append(v.Tokens, "<|eos|>")
	v.Types = append(v.Types, TypeControl, TypeControl)
	return v
}
