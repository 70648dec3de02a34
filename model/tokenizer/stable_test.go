package tokenizer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// streamPieces are the building blocks of random texts for the streaming
// property: words, spaces of every kind, line breaks, digits, punctuation,
// contractions, multi-byte text and special-token texts (also cut short).
var streamPieces = []string{
	"hello", "world", "The", " ", "  ", "   ", "\n", "\n\n", "\t", " \n ", "\r\n",
	"123", "4567", "3", ".", ",", "!!", "...", "'s", "'ll", "n't", "(", ")", "=",
	"é", "Äpfel", "нещо", "我想在", "工作", "🦙", "😶‍🌫️", "\u00a0", "\u3000", "ö",
	"<|im_start|>", "<|im_end|>", "<think>", "</think>", "<s>", "</s>", "<|eot_id|>",
	"<|begin_of_text|>", "<|im_", "<thi", "</", "<|", "<|end",
	"\xe2\x96", "\xff", "▁",
}

func randomText(r *rand.Rand, maxPieces int) string {
	var b strings.Builder
	for n := r.IntN(maxPieces + 1); n > 0; n-- {
		b.WriteString(streamPieces[r.IntN(len(streamPieces))])
	}
	return b.String()
}

// TestStablePrefix checks the streaming contract on every vocabulary:
// Encode(T+A) == Encode(T[:c]) ++ Encode(T[c:]+A, Continuation) with
// c = StablePrefix(T), for random T and A (when c is 0 the tail is the
// whole text and is not a continuation).
func TestStablePrefix(t *testing.T) {
	iters := 400
	if os.Getenv("TOKENIZER_STRESS") != "" {
		iters = 20000
	}
	if testing.Short() {
		iters = 80
	}
	for _, name := range vectorVocabs {
		t.Run(name, func(t *testing.T) {
			tok := loadTokenizer(t, filepath.Join("tokenizer", "ggml-vocab-"+name+".gguf"))
			r := rand.New(rand.NewPCG(1, uint64(len(name))))
			for i := 0; i < iters; i++ {
				text, more := randomText(r, 12), randomText(r, 4)
				for _, parse := range []bool{true, false} {
					o := EncodeOptions{ParseSpecial: parse}
					c := tok.StablePrefixOpts(text, o)
					if c < 0 || c > len(text) {
						t.Fatalf("cut %d outside [0,%d]", c, len(text))
					}
					whole := tok.Encode(text+more, o)
					head := tok.Encode(text[:c], o)
					o.Continuation = c > 0 // with nothing consumed the tail is the whole text
					tail := tok.Encode(text[c:]+more, o)
					if !equalIDs(whole, append(append([]int32(nil), head...), tail...)) {
						t.Fatalf("parse=%v cut %d of %q + %q:\n whole %v\n head  %v\n tail  %v",
							parse, c, text, more, whole, head, tail)
					}
				}
			}
			// The prefix must be useful: on plain prose only the last words
			// stay behind.
			prose := "The quick brown fox jumps over the lazy dog, and then it runs far away"
			if c := tok.StablePrefix(prose); c < len(prose)-len(" runs far away") {
				t.Errorf("StablePrefix(prose) = %d of %d bytes: too short", c, len(prose))
			}
		})
	}
}

func TestStablePrefixCases(t *testing.T) {
	tok := loadTokenizer(t, filepath.Join("tokenizer", "ggml-vocab-qwen3.gguf"))
	cases := []struct {
		name, text string
		want       int
	}{
		{"empty", "", 0},
		{"one word", "hello", 0},
		{"two words", "hello world", 5},
		{"trailing spaces", "hello world  ", 11},
		{"partial special", "hello world<|im_", 5},
		{"complete special", "hi<|im_end|>", len("hi<|im_end|>")},
		{"newlines", "a\n\nb", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := tok.StablePrefix(c.text); got != c.want {
				t.Errorf("StablePrefix(%q) = %d, want %d", c.text, got, c.want)
			}
		})
	}
}
