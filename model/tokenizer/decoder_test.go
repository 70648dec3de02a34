package tokenizer

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCompletePrefix(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want int
	}{
		{"empty", "", 0},
		{"ascii", "abc", 3},
		{"complete two-byte", "aé", 3},
		{"half of é", "a\xc3", 1},
		{"two of three", "a\xe2\x96", 1},
		{"three of four", "\xf0\x9f\xa6", 0},
		{"complete four", "🦙", 4},
		{"stray continuation", "a\x80", 2},
		{"invalid lead", "a\xff", 2},
		{"overlong lead", "a\xc0", 2},
		{"bad second byte", "\xe2a", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := completePrefix([]byte(c.in)); got != c.want {
				t.Errorf("completePrefix(%q) = %d, want %d", c.in, got, c.want)
			}
		})
	}
}

// TestDecoderStream feeds random id sequences, rich in byte tokens and
// pieces of multi-byte characters, through a Decoder: the concatenated
// output must equal Decode, and when the whole text is valid UTF-8 every
// single Push result must be valid UTF-8 too.
func TestDecoderStream(t *testing.T) {
	for _, name := range []string{"llama-spm", "qwen3", "gpt-2", "bert-bge", "ugm-ja"} {
		t.Run(name, func(t *testing.T) {
			var tok *Tokenizer
			switch name {
			case "bert-bge":
				tok = bgeTok(t) // WordPiece: the decoder also cleans spaces
			case "ugm-ja":
				tok = ugmJaTok(t) // unigram
			default:
				tok = loadTokenizer(t, filepath.Join("tokenizer", "ggml-vocab-"+name+".gguf"))
			}
			// Ids from encoding multi-byte text (split across byte tokens in
			// byte-level BPE) plus random ids from the whole vocabulary.
			var pool []int32
			for _, s := range []string{"🦙 llamas", "Äpfel, нещо на Български", "我想在apple工作", "😶‍🌫️ ✅", "\xe2\x96\x81", "it 's ' a ' , x ."} {
				pool = append(pool, tok.Encode(s, EncodeOptions{})...)
			}
			if name == "llama-spm" {
				for b := 0; b < 256; b++ {
					pool = append(pool, int32(3+b)) // <0x00>..<0xFF>
				}
			}
			r := rand.New(rand.NewPCG(7, 7))
			valid := 0
			for iter := 0; iter < 2000; iter++ {
				ids := make([]int32, r.IntN(12))
				for i := range ids {
					if r.IntN(4) == 0 {
						ids[i] = int32(r.IntN(tok.VocabSize()))
					} else {
						ids[i] = pool[r.IntN(len(pool))]
					}
				}
				want := string(tok.Decode(ids))
				d := tok.NewDecoder()
				var got strings.Builder
				allValid := utf8.ValidString(want)
				for _, id := range ids {
					out := d.Push(id)
					if allValid && !utf8.ValidString(out) {
						t.Fatalf("ids %v: Push(%d) returned invalid UTF-8 %q", ids, id, out)
					}
					got.WriteString(out)
				}
				got.WriteString(d.Flush())
				if got.String() != want {
					t.Fatalf("ids %v: stream %q != Decode %q", ids, got.String(), want)
				}
				if d.Pending() != 0 {
					t.Fatalf("Pending after Flush = %d", d.Pending())
				}
				if allValid {
					valid++
				}
			}
			if valid < 100 {
				t.Errorf("only %d valid-UTF-8 sequences were exercised", valid)
			}
		})
	}
}

func TestDecoderSpecial(t *testing.T) {
	tok := loadTokenizer(t, filepath.Join("tokenizer", "ggml-vocab-qwen3.gguf"))
	ids := tok.Encode("<|im_start|>user\nhi<|im_end|>", EncodeOptions{ParseSpecial: true})
	d := tok.NewDecoderSpecial()
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(d.Push(id))
	}
	sb.WriteString(d.Flush())
	if got, want := sb.String(), "<|im_start|>user\nhi<|im_end|>"; got != want {
		t.Errorf("special stream = %q, want %q", got, want)
	}
	if got := string(tok.Decode(ids)); got != "user\nhi" {
		t.Errorf("Decode = %q, want control tokens dropped", got)
	}
}
