package tokenizer

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"oengine/model/gguf"
)

// bgePath is llama.cpp's BERT test vocabulary (bge-small-en-v1.5,
// testdata/README.md).
var bgePath = filepath.Join("testdata", "ggml-vocab-bert-bge.gguf")

func bgeTok(t testing.TB) *Tokenizer { return localTokenizer(t, bgePath) }

// bgeVariant is the bge vocabulary with metadata keys set or replaced, as
// a GGUF image parsed back (how testdata/README.md's cased, nostrip and
// striponly files were written for llama.cpp).
func bgeVariant(t *testing.T, set func(w *gguf.Writer)) (*Vocab, error) {
	t.Helper()
	return VocabFromGGUF(ggufVariant(t, bgePath, func(_ *gguf.File, w *gguf.Writer) { set(w) }))
}

func bgeVariantTok(t *testing.T, set func(w *gguf.Writer)) *Tokenizer {
	t.Helper()
	v, err := bgeVariant(t, set)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestBERTExtraVectors: testdata/bert-extra.inp (accents, CJK, emoji,
// control and unassigned codepoints, invalid UTF-8, long and unknown
// words, symbols, special-token texts, ...) against llama.cpp's ids
// (testdata/README.md: llama_tokenize through scripts/llamacpp-ref's
// tokdump with the bge vocabulary), with and without add_special and
// parse_special, and with the normalizer keys set otherwise.
func TestBERTExtraVectors(t *testing.T) {
	setNorm := func(lower bool, strip ...bool) func(w *gguf.Writer) {
		return func(w *gguf.Writer) {
			w.SetBool(keyLowercase, lower)
			if len(strip) > 0 {
				w.SetBool(keyStripAccents, strip[0])
			}
		}
	}
	cases := []struct {
		out  string
		tok  *Tokenizer
		opts EncodeOptions
	}{
		{"bert-extra.out", bgeTok(t), EncodeOptions{}},
		{"bert-extra-special.out", bgeTok(t), EncodeOptions{AddSpecial: true, ParseSpecial: true}},
		{"bert-extra-cased.out", bgeVariantTok(t, setNorm(false)), EncodeOptions{}},
		{"bert-extra-nostrip.out", bgeVariantTok(t, setNorm(true, false)), EncodeOptions{}},
		{"bert-extra-striponly.out", bgeVariantTok(t, setNorm(false, true)), EncodeOptions{}},
	}
	inp := filepath.Join("testdata", "bert-extra.inp")
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.out, ".out"), func(t *testing.T) {
			for i, v := range readVectorsOut(t, inp, filepath.Join("testdata", c.out)) {
				if got := c.tok.Encode(v.input, c.opts); !equalIDs(got, v.want) {
					t.Errorf("case %d %q:\n got  %v\n want %v", i, v.input, got, v.want)
				}
			}
		})
	}
}

// TestBERTDecode: Decode of the ids of each bert-extra input equals
// llama.cpp's llama_detokenize of them (testdata/bert-extra-decode.out,
// remove_special and unparse_special off), and DecodeSpecial of the ids
// encoded with add_special and parse_special equals llama_detokenize with
// unparse_special on (bert-extra-decode-special.out). The streaming
// decoders must give the same text.
func TestBERTDecode(t *testing.T) {
	tok := bgeTok(t)
	inputs := readInputs(t, filepath.Join("testdata", "bert-extra.inp"))
	for _, c := range []struct {
		out     string
		opts    EncodeOptions
		special bool
	}{
		{"bert-extra-decode.out", EncodeOptions{}, false},
		{"bert-extra-decode-special.out", EncodeOptions{AddSpecial: true, ParseSpecial: true}, true},
	} {
		lines := readLines(t, filepath.Join("testdata", c.out))
		if len(lines) != len(inputs) {
			t.Fatalf("%s: %d lines for %d inputs", c.out, len(lines), len(inputs))
		}
		for i, in := range inputs {
			want, err := strconv.Unquote(lines[i])
			if err != nil {
				t.Fatalf("%s line %d: %v", c.out, i+1, err)
			}
			whole, streamed := decodeBoth(tok, tok.Encode(in, c.opts), c.special)
			if whole != want {
				t.Errorf("%s case %d %q: decoded %q, want %q", c.out, i, in, whole, want)
			}
			if streamed != want {
				t.Errorf("%s case %d %q: streamed %q, want %q", c.out, i, in, streamed, want)
			}
		}
	}
}

func TestBERTVocab(t *testing.T) {
	tok := bgeTok(t)
	v := tok.Vocab()
	if v.Model != ModelWPM || v.BOS != 101 || v.EOS != -1 || v.UNK != 100 || v.SEP != 102 || v.PAD != 0 || v.MASK != 103 {
		t.Errorf("specials BOS %d EOS %d UNK %d SEP %d PAD %d MASK %d", v.BOS, v.EOS, v.UNK, v.SEP, v.PAD, v.MASK)
	}
	if !v.AddBOS || v.AddEOS || !v.AddSEP || !v.Lowercase || !v.StripAccents || tok.SEP() != 102 {
		t.Errorf("flags %+v", v)
	}
	if got := tok.Encode("Hello world", EncodeOptions{AddSpecial: true}); !slices.Equal(got, []int32{101, 7592, 2088, 102}) {
		t.Errorf("AddSpecial: %v, want [CLS] hello world [SEP]", got)
	}
	if got := tok.Encode("", EncodeOptions{AddSpecial: true}); !slices.Equal(got, []int32{101, 102}) {
		t.Errorf("AddSpecial of empty text: %v, want [CLS] [SEP]", got)
	}
	for _, c := range []struct {
		id            int32
		piece, pieceS string
	}{
		{7592, " hello", " hello"}, // ▁hello
		{2075, "ing", "ing"},       // a continuation piece (BERT's ##ing)
		{101, "", "[CLS]"},
		{100, "", "[UNK]"},
		{1, "[unused0]", "[unused0]"}, // a normal token
	} {
		if got, gotS := string(tok.Piece(c.id)), string(tok.PieceSpecial(c.id)); got != c.piece || gotS != c.pieceS {
			t.Errorf("Piece(%d %q) = %q, %q; want %q, %q", c.id, tok.TokenText(c.id), got, gotS, c.piece, c.pieceS)
		}
	}
	if !tok.IsEOG(0) || tok.IsEOG(102) {
		t.Errorf("IsEOG([PAD]) %v, IsEOG([SEP]) %v: llama.cpp takes [PAD] for a FIM pad", tok.IsEOG(0), tok.IsEOG(102))
	}
}

// TestBERTVocabKeys: metadata overrides, llama.cpp's way.
func TestBERTVocabKeys(t *testing.T) {
	cases := []struct {
		name  string
		set   func(w *gguf.Writer)
		check func(v *Vocab) bool
	}{
		{"strip follows lowercase", func(w *gguf.Writer) { w.SetBool(keyLowercase, false) },
			func(v *Vocab) bool { return !v.Lowercase && !v.StripAccents }},
		{"strip set apart", func(w *gguf.Writer) { w.SetBool(keyLowercase, false); w.SetBool(keyStripAccents, true) },
			func(v *Vocab) bool { return !v.Lowercase && v.StripAccents }},
		{"add keys ignored", func(w *gguf.Writer) {
			w.SetBool(keyAddBOS, false)
			w.SetBool(keyAddEOS, true)
			w.SetBool("tokenizer.ggml.add_sep_token", false)
		}, func(v *Vocab) bool { return v.AddBOS && !v.AddEOS && v.AddSEP }},
		{"ids from keys", func(w *gguf.Writer) {
			w.SetUint32("tokenizer.ggml.bos_token_id", 5)
			w.SetUint32("tokenizer.ggml.seperator_token_id", 6)
			w.SetUint32("tokenizer.ggml.mask_token_id", 7)
			w.SetUint32("tokenizer.ggml.unknown_token_id", 1<<30) // out of range: the default stays
		}, func(v *Vocab) bool { return v.BOS == 5 && v.SEP == 6 && v.MASK == 7 && v.UNK == 100 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := bgeVariant(t, c.set)
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(v) {
				t.Errorf("vocab %+v", *v)
			}
		})
	}
	v, err := bgeVariant(t, func(*gguf.Writer) {})
	if err != nil {
		t.Fatal(err)
	}
	v.UNK = -1
	if _, err := New(v); !errors.Is(err, ErrInvalid) {
		t.Errorf("New without UNK: %v, want ErrInvalid", err)
	}
	v.UNK, v.SEP = 100, -1
	if _, err := New(v); !errors.Is(err, ErrInvalid) {
		t.Errorf("New with AddSEP and no SEP: %v, want ErrInvalid", err)
	}
}

// TestBERTStablePrefix: the streaming contract of StablePrefix on the
// WordPiece vocabulary, with inputs rich in what ends or continues a word.
func TestBERTStablePrefix(t *testing.T) {
	tok := bgeTok(t)
	pieces := append(slices.Clone(streamPieces), "[CLS]", "[SEP]", "[SE", "\x01", "\u0301", "\u200b", "工", "$", "Éa", "\u0378")
	r := rand.New(rand.NewPCG(5, 9))
	for i := 0; i < 600; i++ {
		text, more := randomFrom(r, pieces, 10), randomFrom(r, pieces, 4)
		for _, parse := range []bool{false, true} {
			o := EncodeOptions{ParseSpecial: parse}
			c := tok.StablePrefixOpts(text, o)
			whole := tok.Encode(text+more, o)
			head := tok.Encode(text[:c], o)
			tail := tok.Encode(text[c:]+more, EncodeOptions{ParseSpecial: parse, Continuation: c > 0})
			if !equalIDs(whole, append(slices.Clone(head), tail...)) {
				t.Fatalf("parse=%v cut %d of %q + %q:\n whole %v\n head  %v\n tail  %v", parse, c, text, more, whole, head, tail)
			}
		}
	}
	for _, c := range []struct {
		text string
		want int
	}{
		{"hello world", 6},
		{"hello world ", 12},
		{"a, b", 3},
		{"a,b", 2},
		{"工作", 6},
		{"x \x01y", 2},
	} {
		if got := tok.StablePrefix(c.text); got != c.want {
			t.Errorf("StablePrefix(%q) = %d, want %d", c.text, got, c.want)
		}
	}
}

func randomFrom(r *rand.Rand, pieces []string, maxPieces int) string {
	var b strings.Builder
	for n := r.IntN(maxPieces + 1); n > 0; n-- {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func TestCleanSpaces(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{" hello , world !", " hello, world!"},
		{" what ? ! ok .", " what?! ok."},
		{" . x", ". x"},
		{" ' ", "'"},
		{"a ' b", "a'b"},
		{" ' ' a", "'' a"}, // the space after a match is spent
		{"  ' re", "'re"},  // pass 2 then pass 3
		{"it 's i 'm we 're you 've", "it's i'm we're you've"},
		{"don 't i 'd we 'll", "don 't i 'd we 'll"},
		{"x 's", "x's"},
		{"x 'r", "x 'r"},
		{"' s", "' s"},
	}
	for _, c := range cases {
		if got := string(cleanSpaces([]byte(c.in))); got != c.want {
			t.Errorf("cleanSpaces(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestCleanCut checks that cleaning text cut at cleanCut and cleaning the
// rest with anything appended gives the cleaning of the whole, over an
// alphabet of the bytes that cleanSpaces looks at.
func TestCleanCut(t *testing.T) {
	const alphabet = " '.?,!smrevtdlx"
	r := rand.New(rand.NewPCG(11, 13))
	rnd := func(n int) []byte {
		b := make([]byte, r.IntN(n+1))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return b
	}
	for i := 0; i < 20000; i++ {
		head, more := rnd(14), rnd(8)
		c := cleanCut(head)
		if c < 0 || c > len(head) || bytes.Contains(head[max(0, c-cleanWindow):c], []byte{' '}) {
			t.Fatalf("cleanCut(%q) = %d", head, c)
		}
		whole := cleanSpaces(append(slices.Clone(head), more...))
		parts := append(cleanSpaces(slices.Clone(head[:c])), cleanSpaces(append(slices.Clone(head[c:]), more...))...)
		if !bytes.Equal(whole, parts) {
			t.Fatalf("%q cut at %d + %q: whole %q, parts %q", head, c, more, whole, parts)
		}
	}
}

// BenchmarkEncodeBERT reports Encode throughput (MB/s) on English text
// with the WordPiece vocabulary.
func BenchmarkEncodeBERT(b *testing.B) {
	text := benchText(b)
	tok := bgeTok(b)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		tok.Encode(text, EncodeOptions{})
	}
}

// TestEncodePair: a pair is [CLS] a [SEP] b [SEP] (the same ids as the
// text "a [SEP] b" with special tokens parsed and added, which llama.cpp's
// tokenizer gives for bert-bge: 101 ... 102 ... 102), second points at b's
// first token, and a vocabulary without the template refuses.
func TestEncodePair(t *testing.T) {
	tok := bgeTok(t)
	ids, second, err := tok.EncodePair("What is the capital of France?", "Paris is the capital.", false)
	if err != nil {
		t.Fatal(err)
	}
	want := tok.Encode("What is the capital of France? [SEP] Paris is the capital.", EncodeOptions{AddSpecial: true, ParseSpecial: true})
	if !slices.Equal(ids, want) || ids[0] != 101 || ids[second-1] != 102 || ids[len(ids)-1] != 102 || ids[second] == 102 {
		t.Fatalf("pair %v (second %d), want %v", ids, second, want)
	}
	// Special-token text in a document is text unless asked otherwise.
	ids, second, _ = tok.EncodePair("q", "[SEP]", false)
	if len(ids) <= 4 || ids[second] == 102 {
		t.Fatalf("a document reading [SEP]: %v", ids)
	}
	if _, _, err := loadTokenizer(t, "tokenizer/ggml-vocab-llama-spm.gguf").EncodePair("a", "b", false); !errors.Is(err, ErrNoPairTemplate) {
		t.Fatalf("SentencePiece vocabulary: %v", err)
	}
}
