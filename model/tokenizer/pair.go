package tokenizer

import (
	"errors"
	"strings"
)

// ErrNoPairTemplate is EncodePair's error for a vocabulary without a
// template for two texts.
var ErrNoPairTemplate = errors.New("tokenizer: this vocabulary has no template for a pair of texts (tokenizer.chat_template.rerank, WordPiece's [CLS] a [SEP] b [SEP], unigram's <s> a </s></s> b </s> or a </s> b </s>)")

// EncodePair tokenizes two texts as one input of a cross-encoder (a
// reranker's query and document) the way the model was trained on pairs
// and Hugging Face's tokenizers write them. second is the index of b's
// first token (where BERT's token type 1 begins; len(ids) when no token
// is b's alone).
//
//   - A vocabulary with a rerank template (tokenizer.chat_template.rerank,
//     Qwen3-Reranker's prompt): the template with a for each {query} and
//     b for each {document}, tokenized as one text, no BOS or EOS added
//     (as llama.cpp's server formats it).
//
//   - WordPiece: [CLS] a [SEP] b [SEP]. llama.cpp's reranking leaves out
//     the last [SEP].
//
//   - Unigram that adds BOS (XLM-RoBERTa: bge-reranker-v2-m3 and kin):
//     <s> a </s> </s> b </s>, BOS and EOS being <s> and </s>.
//
//   - Unigram that adds no BOS (T5): a </s> b </s>.
//
//   - Another vocabulary that adds EOS or SEP to a text: llama.cpp's form,
//     [BOS] a [EOS] [SEP] b [EOS], each as the vocabulary adds it.
//
// Other vocabularies (those that would run a into b), and those missing a
// token the form needs, give ErrNoPairTemplate.
func (t *Tokenizer) EncodePair(a, b string, parseSpecial bool) (ids []int32, second int, err error) {
	opts := EncodeOptions{ParseSpecial: parseSpecial}
	switch tmpl := t.v.RerankTemplate; {
	case strings.Contains(tmpl, "{query}") && strings.Contains(tmpl, "{document}"):
		text := strings.NewReplacer("{query}", a, "{document}", b).Replace(tmpl)
		ids = t.Encode(text, opts)
		return ids, len(ids), nil
	case t.wpm != nil && t.v.SEP >= 0 && t.v.BOS >= 0:
		ids = append(ids, t.v.BOS)
		ids = append(ids, t.Encode(a, opts)...)
		ids = append(ids, t.v.SEP)
		second = len(ids)
		ids = append(ids, t.Encode(b, opts)...)
		return append(ids, t.v.SEP), second, nil
	case t.ugm != nil && t.v.EOS >= 0 && (!t.v.AddBOS || t.v.BOS >= 0):
		if t.v.AddBOS {
			ids = append(ids, t.v.BOS)
		}
		ids = append(ids, t.Encode(a, opts)...)
		ids = append(ids, t.v.EOS)
		if t.v.AddBOS {
			ids = append(ids, t.v.EOS)
		}
		second = len(ids)
		ids = append(ids, t.Encode(b, opts)...)
		return append(ids, t.v.EOS), second, nil
	case t.v.AddEOS || t.v.AddSEP:
		// Another vocabulary that marks where a text ends (ModernBERT's
		// BPE: [CLS] a [SEP] b [SEP]): llama.cpp's form, BOS if the
		// vocabulary adds it, a, EOS (else SEP) if it adds EOS, SEP if it
		// adds SEP, b, and EOS again.
		eos := t.v.EOS
		if eos < 0 {
			eos = t.v.SEP
		}
		if t.v.AddBOS && t.v.BOS < 0 || t.v.AddEOS && eos < 0 || t.v.AddSEP && t.v.SEP < 0 {
			break
		}
		if t.v.AddBOS {
			ids = append(ids, t.v.BOS)
		}
		ids = append(ids, t.Encode(a, opts)...)
		if t.v.AddEOS {
			ids = append(ids, eos)
		}
		if t.v.AddSEP {
			ids = append(ids, t.v.SEP)
		}
		second = len(ids)
		ids = append(ids, t.Encode(b, opts)...)
		if t.v.AddEOS {
			ids = append(ids, eos)
		}
		return ids, second, nil
	}
	return nil, 0, ErrNoPairTemplate
}
