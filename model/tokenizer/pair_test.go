package tokenizer

import (
	"errors"
	"slices"
	"testing"
)

// TestEncodePairTemplate: a vocabulary with a rerank template pairs two
// texts by putting them in it, as one text, special tokens parsed, no BOS
// added; a text holding "{document}" stays text (the template is filled
// in one pass). Without a template, a byte-level BPE vocabulary that adds
// EOS takes llama.cpp's form [BOS] a [EOS] b [EOS]; one that adds only BOS
// has no pair form.
func TestEncodePairTemplate(t *testing.T) {
	v := ByteLevelVocab(nil)
	im := int32(len(v.Tokens))
	v.Tokens = append(v.Tokens, "<|im_start|>")
	v.Types = append(v.Types, TypeControl)
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tok.EncodePair("a", "b", true); !errors.Is(err, ErrNoPairTemplate) {
		t.Fatalf("BOS only: %v", err)
	}

	v.AddEOS = true
	tok, _ = New(v)
	ids, second, err := tok.EncodePair("ab", "c", true)
	want := []int32{v.BOS, 'a', 'b', v.EOS, 'c', v.EOS}
	if err != nil || !slices.Equal(ids, want) || second != 4 {
		t.Fatalf("[BOS] a [EOS] b [EOS]: %v from %d (%v), want %v from 4", ids, second, err, want)
	}

	v.AddEOS = false
	v.RerankTemplate = "<|im_start|>Q:{query}|D:{document}|{query}"
	tok, _ = New(v)
	ids, second, err = tok.EncodePair("x{document}", "y", true)
	want = tok.Encode("<|im_start|>Q:x{document}|D:y|x{document}", EncodeOptions{ParseSpecial: true})
	if err != nil || !slices.Equal(ids, want) || second != len(ids) || ids[0] != im || slices.Contains(ids, v.BOS) {
		t.Fatalf("template: %v from %d (%v), want %v from %d", ids, second, err, want, len(want))
	}
	// A template without both places is not one.
	v.RerankTemplate = "{query} only"
	tok, _ = New(v)
	if _, _, err := tok.EncodePair("a", "b", true); !errors.Is(err, ErrNoPairTemplate) {
		t.Fatalf("template without {document}: %v", err)
	}
}
