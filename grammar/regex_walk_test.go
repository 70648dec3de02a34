package grammar

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// TestRegexWalksMatchGoRegexp generates seeded outputs under regex
// constraints through the DFA Index over real tokenizer vocabularies and
// a byte vocabulary, and checks each with Go's regexp (an independent
// recognizer), anchored at both ends.
func TestRegexWalksMatchGoRegexp(t *testing.T) {
	patterns := []string{
		`[a-z]+( [a-z]+){0,4}\.`,
		`\d{3}-\d{4}`,
		`(yes|no|maybe)`,
		`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`,
		`[A-Z][a-z]{1,8}, [A-Z]{2} \d{5}`,
		`\w+@\w+\.(com|org)`,
		`(ab|cd)*e`,
		`"[^"\\]{0,20}"`,
		`[α-ω]{1,3}é?`,
	}
	vocabs := []struct {
		name string
		v    func(testing.TB) *Vocab
	}{
		{"bytes", func(testing.TB) *Vocab { return byteVocab() }},
		{"llama-spm-32k", func(t testing.TB) *Vocab { return loadVocab(t, "ggml-vocab-llama-spm.gguf") }},
		{"qwen3-151k", func(t testing.TB) *Vocab { return loadVocab(t, "ggml-vocab-qwen3.gguf") }},
	}
	for _, vc := range vocabs {
		v := vc.v(t)
		for i, pat := range patterns {
			d, err := CompileRegex(pat)
			if err != nil {
				t.Fatalf("%q: %v", pat, err)
			}
			re := regexp.MustCompile(`^(?:` + pat + `)$`)
			ix := NewIndex(d, v)
			r := rand.New(rand.NewPCG(uint64(i), 17))
			for range 5 {
				out := randomWalk(t, ix, r, 3+r.IntN(10))
				if t.Failed() {
					return
				}
				if !re.Match(out) {
					t.Errorf("%s %q: generated %q, which Go's regexp refuses", vc.name, pat, out)
				}
			}
		}
	}
}
