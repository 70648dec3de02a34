package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRoundTrip: for valid UTF-8, Decode(Encode(s)) == s on byte-level BPE
// (qwen3, which has all 256 byte tokens and user-defined tokens) and, on
// SentencePiece with byte fallback (llama-spm), == " "+s (the space prefix)
// unless s contains U+2581, which SentencePiece cannot tell from a space.
// Byte-level BPE also round-trips invalid UTF-8. Nothing may panic, the
// streaming decoder must agree with Decode, and StablePrefix must stay in
// range; so too on WordPiece (bge) and unigram (SentencePiece's Japanese
// test model, ugm_test.go), which normalize and cannot round-trip. On the
// unigram vocabulary the cut of StablePrefix must also split the encoding.
func FuzzRoundTrip(f *testing.F) {
	f.Add("Hello world")
	f.Add(" this is 🦙.cpp")
	f.Add("\n\n\t  x")
	f.Add("\xff\xc3")
	f.Add("Café [CLS] it 's 我想 ' ok .")
	f.Add("ｶﾀｶﾅ e\u0301 ﬁ ＡＢＣ①</s> \u3000x\u2581 y\x00")
	// Load before fuzzing starts: a slow first execution would look like
	// a hung worker to the fuzzing engine.
	bpe := loadTokenizer(f, "tokenizer/ggml-vocab-qwen3.gguf")
	spm := loadTokenizer(f, "tokenizer/ggml-vocab-llama-spm.gguf")
	wpm := bgeTok(f)
	ugm := ugmJaTok(f)
	f.Fuzz(func(t *testing.T, s string) {
		for _, parse := range []bool{false, true} {
			o := EncodeOptions{ParseSpecial: parse}
			ids := bpe.Encode(s, o)
			dec := bpe.Decode
			if parse {
				dec = bpe.DecodeSpecial
			}
			if got := string(dec(ids)); got != s {
				t.Fatalf("qwen3 parse=%v: Decode(Encode(%q)) = %q", parse, s, got)
			}
			checkStream(t, bpe, ids)
			if c := bpe.StablePrefixOpts(s, o); c < 0 || c > len(s) {
				t.Fatalf("StablePrefix(%q) = %d", s, c)
			}
		}
		for _, parse := range []bool{false, true} {
			o := EncodeOptions{ParseSpecial: parse}
			checkStream(t, wpm, wpm.Encode(s, o))
			if c := wpm.StablePrefixOpts(s, o); c < 0 || c > len(s) {
				t.Fatalf("bge StablePrefix(%q) = %d", s, c)
			}
		}
		for _, parse := range []bool{false, true} {
			o := EncodeOptions{ParseSpecial: parse}
			ids := ugm.Encode(s, o)
			checkStream(t, ugm, ids)
			c := ugm.StablePrefixOpts(s, o)
			if c < 0 || c > len(s) {
				t.Fatalf("ugm StablePrefix(%q) = %d", s, c)
			}
			tail := ugm.Encode(s[c:], EncodeOptions{ParseSpecial: parse, Continuation: c > 0})
			if parts := append(ugm.Encode(s[:c], o), tail...); !equalIDs(ids, parts) {
				t.Fatalf("ugm parse=%v: %q cut at %d: whole %v, parts %v", parse, s, c, ids, parts)
			}
		}
		ids := spm.Encode(s, EncodeOptions{})
		checkStream(t, spm, ids)
		if c := spm.StablePrefix(s); c < 0 || c > len(s) {
			t.Fatalf("spm StablePrefix(%q) = %d", s, c)
		}
		if !utf8.ValidString(s) || strings.Contains(s, spaceMarker) {
			return
		}
		want := s
		if s != "" {
			want = " " + s
		}
		if got := string(spm.Decode(ids)); got != want {
			t.Fatalf("llama-spm: Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
	})
}

func checkStream(t *testing.T, tok *Tokenizer, ids []int32) {
	t.Helper()
	d := tok.NewDecoder()
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(d.Push(id))
	}
	sb.WriteString(d.Flush())
	if want := string(tok.Decode(ids)); sb.String() != want {
		t.Fatalf("stream %q != Decode %q", sb.String(), want)
	}
}
