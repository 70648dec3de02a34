package tokenizer

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

func vocabTok(t *testing.T, name string) *Tokenizer {
	t.Helper()
	return loadTokenizer(t, filepath.Join("tokenizer", "ggml-vocab-"+name+".gguf"))
}

func TestEncodeOptions(t *testing.T) {
	qwen, spm, llama3 := vocabTok(t, "qwen3"), vocabTok(t, "llama-spm"), vocabTok(t, "llama3")
	imStart, imEnd, think := int32(151644), int32(151645), int32(151667)
	cases := []struct {
		name string
		tok  *Tokenizer
		text string
		opts EncodeOptions
		want func(got []int32) bool
	}{
		{"control token parsed", qwen, "<|im_start|>user", EncodeOptions{ParseSpecial: true},
			func(g []int32) bool { return len(g) == 2 && g[0] == imStart }},
		{"control token as text", qwen, "<|im_start|>user", EncodeOptions{},
			func(g []int32) bool { return len(g) > 2 && !slices.Contains(g, imStart) }},
		{"user-defined always parsed", qwen, "a<think>b", EncodeOptions{},
			func(g []int32) bool { return len(g) == 3 && g[1] == think }},
		{"end token parsed", qwen, "x<|im_end|>", EncodeOptions{ParseSpecial: true},
			func(g []int32) bool { return len(g) == 2 && g[1] == imEnd }},
		{"qwen adds no BOS", qwen, "hi", EncodeOptions{AddSpecial: true},
			func(g []int32) bool { return len(g) == 1 }},
		{"llama3 adds BOS", llama3, "hi", EncodeOptions{AddSpecial: true},
			func(g []int32) bool { return len(g) == 2 && g[0] == 128000 }},
		{"spm BOS only for empty text", spm, "", EncodeOptions{AddSpecial: true},
			func(g []int32) bool { return len(g) == 1 && g[0] == 1 }},
		{"empty text", spm, "", EncodeOptions{},
			func(g []int32) bool { return len(g) == 0 }},
		{"spm space prefix", spm, "Hello", EncodeOptions{},
			func(g []int32) bool { return len(g) == 1 && spm.TokenText(g[0]) == "▁Hello" }},
		{"spm continuation has no prefix", spm, "Hello", EncodeOptions{Continuation: true},
			func(g []int32) bool { return len(g) == 1 && spm.TokenText(g[0]) == "Hello" }},
		{"spm prefix after special", spm, "a</s>b", EncodeOptions{ParseSpecial: true},
			func(g []int32) bool { return len(g) == 3 && g[1] == 2 && spm.TokenText(g[2]) == "▁b" }},
		{"spm byte fallback", spm, "\x01", EncodeOptions{Continuation: true},
			func(g []int32) bool { return len(g) == 1 && spm.TokenText(g[0]) == "<0x01>" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.tok.Encode(c.text, c.opts)
			if !c.want(got) {
				t.Errorf("Encode(%q, %+v) = %v", c.text, c.opts, got)
			}
		})
	}
}

func TestPieces(t *testing.T) {
	spm, qwen := vocabTok(t, "llama-spm"), vocabTok(t, "qwen3")
	id := func(tok *Tokenizer, s string) int32 {
		i, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("token %q missing", s)
		}
		return i
	}
	cases := []struct {
		name          string
		tok           *Tokenizer
		id            int32
		piece, pieceS string
	}{
		{"spm word", spm, id(spm, "▁Hello"), " Hello", " Hello"},
		{"spm byte", spm, id(spm, "<0x0A>"), "\n", "\n"},
		{"spm byte high", spm, id(spm, "<0xE2>"), "\xe2", "\xe2"},
		{"spm control", spm, 2, "", "</s>"},
		{"spm unknown", spm, 0, "", "<unk>"},
		{"bpe space word", qwen, id(qwen, "Ġworld"), " world", " world"},
		{"bpe newline", qwen, id(qwen, "Ċ"), "\n", "\n"},
		{"bpe byte", qwen, id(qwen, "Ã"), "\xc3", "\xc3"},
		{"bpe control", qwen, 151645, "", "<|im_end|>"},
		{"bpe user-defined", qwen, 151667, "<think>", "<think>"},
		{"out of range", qwen, 1 << 30, "", ""},
		{"negative", qwen, -1, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(c.tok.Piece(c.id)); got != c.piece {
				t.Errorf("Piece(%d) = %q, want %q", c.id, got, c.piece)
			}
			if got := string(c.tok.PieceSpecial(c.id)); got != c.pieceS {
				t.Errorf("PieceSpecial(%d) = %q, want %q", c.id, got, c.pieceS)
			}
		})
	}
}

func TestEndOfGeneration(t *testing.T) {
	cases := []struct {
		vocab   string
		eog     []int32
		notEOG  []int32
		eos     int32
		eot     int32
		control []int32
	}{
		{"llama-spm", []int32{2}, []int32{0, 1, 13}, 2, -1, []int32{1, 2}},
		{"llama3", []int32{128001, 128009}, []int32{128000, 128006, 128008, 40}, 128001, 128009, []int32{128000, 128009}},
		// Qwen: <|endoftext|>, <|im_end|>, the FIM pad / repo / file
		// separator tokens and the plain-text token "</s>" (128247), all
		// recognised by text as llama.cpp does.
		{"qwen3", []int32{128247, 151643, 151645, 151662, 151663, 151664}, []int32{151644, 151667, 151659}, 151645, 151645, []int32{151643, 151644, 151659}},
		{"gpt-2", []int32{50256}, []int32{0, 198}, 50256, 50256, []int32{50256}},
		// DeepSeek's end token is found by its text (full-width bars, ▁).
		{"deepseek-llm", []int32{100001}, []int32{100000, 100002}, 100001, 100001, []int32{100000, 100001}},
	}
	for _, c := range cases {
		t.Run(c.vocab, func(t *testing.T) {
			tok := vocabTok(t, c.vocab)
			for _, id := range c.eog {
				if !tok.IsEOG(id) {
					t.Errorf("IsEOG(%d %q) = false", id, tok.TokenText(id))
				}
			}
			for _, id := range c.notEOG {
				if tok.IsEOG(id) {
					t.Errorf("IsEOG(%d %q) = true", id, tok.TokenText(id))
				}
			}
			if got := tok.EOGTokens(); !slices.Equal(got, c.eog) {
				t.Errorf("EOGTokens = %v, want %v", got, c.eog)
			}
			if tok.EOS() != c.eos || tok.EOT() != c.eot {
				t.Errorf("EOS, EOT = %d, %d; want %d, %d", tok.EOS(), tok.EOT(), c.eos, c.eot)
			}
			for _, id := range c.control {
				if !tok.IsControl(id) {
					t.Errorf("IsControl(%d %q) = false", id, tok.TokenText(id))
				}
			}
		})
	}
}

// TestInvalidUTF8 checks deterministic, panic-free handling of malformed
// input. Byte-level BPE keeps the raw bytes (llama.cpp would substitute
// U+FFFD), so vocabularies with all 256 byte tokens decode back to the
// input. SentencePiece falls back to byte tokens as llama.cpp does, where
// an invalid lead byte swallows what follows it, even the ▁ of a space.
func TestInvalidUTF8(t *testing.T) {
	inputs := []string{"\xff", "a\xc3", "\xc0\x80", "\xed\xa0\x80x", "\xf4\x90\x80\x80", "ab\x80cd", "\xe2\x96", "é\xff é"}
	roundTrip := map[string]bool{"gpt-2": true, "qwen3": true, "llama3": true, "llama-spm": true}
	for _, name := range []string{"gpt-2", "qwen3", "llama3", "deepseek-llm", "falcon", "llama-spm", "phi-3"} {
		tok := vocabTok(t, name)
		for _, in := range inputs {
			ids := tok.Encode(in, EncodeOptions{})
			if again := tok.Encode(in, EncodeOptions{}); !slices.Equal(ids, again) {
				t.Errorf("%s: %q encodes differently twice", name, in)
			}
			if !roundTrip[name] {
				continue
			}
			got := string(tok.Decode(ids))
			want := in
			if !tok.isBPE {
				want = " " + in
				if in == "é\xff é" {
					want = " é\xff\u2581é" // \xff (a 4-byte lead) took the ▁ along
				}
			}
			if got != want {
				t.Errorf("%s: Decode(Encode(%q)) = %q, want %q", name, in, got, want)
			}
		}
	}
}

func TestByteLevelVocab(t *testing.T) {
	v := ByteLevelVocab([]string{"h e", "l l", "he ll", "x y z", "hell o"})
	if len(v.Tokens) != 256+4+2 {
		t.Fatalf("%d tokens, want 262 (bytes, 4 merges, 2 controls)", len(v.Tokens))
	}
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	if tok.BOS() != 260 || tok.EOS() != 261 || !tok.IsEOG(261) || !tok.IsControl(260) {
		t.Errorf("BOS %d EOS %d", tok.BOS(), tok.EOS())
	}
	ids := tok.Encode("hello hello", EncodeOptions{AddSpecial: true})
	hello, _ := tok.TokenID("hello")
	if want := []int32{260, hello, ' ', hello}; !slices.Equal(ids, want) {
		// The second "hello" is " hello" as a word: Ġ (space byte) then the merged token.
		spaceByte, _ := tok.TokenID(byteToString[' '])
		if want2 := []int32{260, hello, spaceByte, hello}; !slices.Equal(ids, want2) {
			t.Errorf("Encode = %v, want %v", ids, want2)
		}
	}
	if got := string(tok.Decode(ids)); got != "hello hello" {
		t.Errorf("Decode = %q", got)
	}
	for b := 0; b < 256; b++ {
		if got := tok.Encode(string([]byte{byte(b)}), EncodeOptions{}); len(got) != 1 || got[0] != int32(b) {
			t.Fatalf("byte %#x encodes to %v", b, got)
		}
	}
}

func TestNewErrors(t *testing.T) {
	base := func() *Vocab { return ByteLevelVocab(nil) }
	cases := []struct {
		name   string
		mutate func(v *Vocab)
		want   error
	}{
		{"unknown model", func(v *Vocab) { v.Model = "rwkv" }, ErrUnsupported},
		{"unknown pre", func(v *Vocab) { v.Pre = "no-such-pre" }, ErrUnsupported},
		{"no tokens", func(v *Vocab) { v.Tokens = nil; v.Types = nil }, ErrInvalid},
		{"duplicate token", func(v *Vocab) { v.Tokens = append([]string(nil), v.Tokens...); v.Tokens[1] = v.Tokens[0] }, ErrInvalid},
		{"add BOS without BOS", func(v *Vocab) { v.BOS = -1 }, ErrInvalid},
		{"BOS out of range", func(v *Vocab) { v.BOS = 1 << 20 }, ErrInvalid},
		{"short types", func(v *Vocab) { v.Types = v.Types[:3] }, ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := base()
			c.mutate(v)
			if _, err := New(v); !errors.Is(err, c.want) {
				t.Errorf("New: %v, want %v", err, c.want)
			}
		})
	}
}

// TestFIM: the fill-in-the-middle tokens come from the file's ids or, as
// in llama.cpp, from their texts (Qwen3's vocabulary has the texts only);
// a vocabulary without them reports none.
func TestFIM(t *testing.T) {
	tok := vocabTok(t, "qwen3")
	pre, suf, mid, ok := tok.FIM()
	if !ok || tok.Token(pre) != "<|fim_prefix|>" || tok.Token(suf) != "<|fim_suffix|>" || tok.Token(mid) != "<|fim_middle|>" {
		t.Fatalf("qwen3: %d %d %d %v", pre, suf, mid, ok)
	}
	if _, _, _, ok := vocabTok(t, "gpt-2").FIM(); ok {
		t.Fatal("gpt-2 has no FIM tokens")
	}
}
