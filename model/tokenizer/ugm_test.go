package tokenizer

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"oengine/model/gguf"
)

// The unigram vocabularies (testdata/README.md): SentencePiece's test
// models converted as llama.cpp's converter writes T5's tokenizer.
var (
	ugmPath   = filepath.Join("testdata", "ugm-test_model.gguf")    // English, 1000 pieces
	ugmJaPath = filepath.Join("testdata", "ugm-test_ja_model.gguf") // Japanese, 8000 pieces
)

func ugmTok(t testing.TB) *Tokenizer   { return localTokenizer(t, ugmPath) }
func ugmJaTok(t testing.TB) *Tokenizer { return localTokenizer(t, ugmJaPath) }

// ggufVariant is the GGUF file at path with every key copied through
// model/gguf's Writer and then set changing what it likes, parsed back.
func ggufVariant(t testing.TB, path string, set func(f *gguf.File, w *gguf.Writer)) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, k := range f.Keys() {
		v, _ := f.Value(k)
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	set(f, w)
	return parsed(t, w)
}

// parsed is w's GGUF image parsed back.
func parsed(t testing.TB, w *gguf.Writer) *gguf.File {
	t.Helper()
	img, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Parse(img)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func variantTok(t testing.TB, path string, set func(f *gguf.File, w *gguf.Writer)) *Tokenizer {
	t.Helper()
	tok, err := FromGGUF(ggufVariant(t, path, set))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// ugmExtra are the tokens that ugmUserVariant appends to the English
// vocabulary: user-defined ones (one holding a ▁ inside, one that the
// charsmap would change), an unused one, and a normal token of two ▁.
var ugmExtra = []struct {
	text  string
	typ   int32
	score float32
}{
	{"<extra_id_0>", TypeUserDefined, 0},
	{"ｶﾀｶﾅ", TypeUserDefined, 0},
	{"▁New▁York", TypeUserDefined, 0},
	{"ﬁ", TypeUserDefined, 0},
	{"xyzzy", TypeUnused, -2},
	{"▁▁", TypeNormal, -3},
}

// ugmUserVariant appends ugmExtra to the vocabulary and makes token 100
// unused (testdata/README.md: how ugm-user.out was written).
func ugmUserVariant(f *gguf.File, w *gguf.Writer) {
	toks, _ := f.Strings(keyTokens)
	scores, _ := f.Float32s(keyScores)
	types, _ := f.Int32s(keyTypes)
	types[100] = TypeUnused
	for _, e := range ugmExtra {
		toks, scores, types = append(toks, e.text), append(scores, e.score), append(types, e.typ)
	}
	w.SetStrings(keyTokens, toks)
	w.SetFloat32s(keyScores, scores)
	w.SetInt32s(keyTypes, types)
}

// ugmNoMergeVariant keeps every space (remove_extra_whitespaces false);
// ugmNoPrefixVariant also adds no space prefix.
func ugmNoMergeVariant(_ *gguf.File, w *gguf.Writer) { w.SetBool(keyRemoveExtraWS, false) }
func ugmNoPrefixVariant(_ *gguf.File, w *gguf.Writer) {
	w.SetBool(keyRemoveExtraWS, false)
	w.SetBool(keyAddSpacePrefix, false)
}

// ugmXLMRVariant adds BOS as XLM-RoBERTa's vocabulary does.
func ugmXLMRVariant(_ *gguf.File, w *gguf.Writer) { w.SetBool(keyAddBOS, true) }

// TestUGMVectors: testdata/ugm.inp (English and Japanese sentences,
// spaces, tabs and line breaks, NFKC cases, CJK, emoji, unknown runs,
// invalid UTF-8, long words, special-token texts) against llama.cpp's ids
// (testdata/README.md), plain and with add_special and parse_special, on
// both unigram vocabularies, the English one with user-defined and unused
// tokens, and the English one keeping every space, with and without a
// space prefix.
func TestUGMVectors(t *testing.T) {
	user := variantTok(t, ugmPath, ugmUserVariant)
	special := EncodeOptions{AddSpecial: true, ParseSpecial: true}
	cases := []struct {
		out  string
		tok  *Tokenizer
		opts EncodeOptions
	}{
		{"ugm-test_model.out", ugmTok(t), EncodeOptions{}},
		{"ugm-test_model-special.out", ugmTok(t), special},
		{"ugm-test_ja_model.out", ugmJaTok(t), EncodeOptions{}},
		{"ugm-test_ja_model-special.out", ugmJaTok(t), special},
		{"ugm-user.out", user, EncodeOptions{}},
		{"ugm-user-special.out", user, special},
		{"ugm-nomerge.out", variantTok(t, ugmPath, ugmNoMergeVariant), EncodeOptions{}},
		{"ugm-noprefix.out", variantTok(t, ugmPath, ugmNoPrefixVariant), EncodeOptions{}},
	}
	inp := filepath.Join("testdata", "ugm.inp")
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.out, ".out"), func(t *testing.T) {
			vs := readVectorsOut(t, inp, filepath.Join("testdata", c.out))
			for i, v := range vs {
				if got := c.tok.Encode(v.input, c.opts); !equalIDs(got, v.want) {
					t.Errorf("case %d %q:\n got  %v\n want %v", i, v.input, got, v.want)
				}
			}
			if len(vs) < 70 {
				t.Errorf("%d cases", len(vs))
			}
		})
	}
}

// llamaDetokenize is Decode (or DecodeSpecial) as llama.cpp's
// llama_detokenize gives it: with add_space_prefix, one space is removed
// from the start of the first token's piece.
func llamaDetokenize(tok *Tokenizer, ids []int32, special bool) string {
	var b []byte
	for i, id := range ids {
		p := tok.Piece(id)
		if special {
			p = tok.PieceSpecial(id)
		}
		if i == 0 && tok.Vocab().AddSpacePrefix && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		b = append(b, p...)
	}
	return string(b)
}

// TestUGMDecode: the pieces of each ugm.inp encoding, joined as llama.cpp
// joins them, equal llama_detokenize's text (the -decode files: plain ids,
// special tokens rendered as nothing; -decode-special: add_special and
// parse_special ids, special tokens rendered). Decode must be that text
// with the first space kept, and the streaming decoders must agree.
func TestUGMDecode(t *testing.T) {
	user := variantTok(t, ugmPath, ugmUserVariant)
	inputs := readInputs(t, filepath.Join("testdata", "ugm.inp"))
	for _, c := range []struct {
		out     string
		tok     *Tokenizer
		opts    EncodeOptions
		special bool
	}{
		{"ugm-test_model-decode.out", ugmTok(t), EncodeOptions{}, false},
		{"ugm-test_model-decode-special.out", ugmTok(t), EncodeOptions{AddSpecial: true, ParseSpecial: true}, true},
		{"ugm-test_ja_model-decode.out", ugmJaTok(t), EncodeOptions{}, false},
		{"ugm-test_ja_model-decode-special.out", ugmJaTok(t), EncodeOptions{AddSpecial: true, ParseSpecial: true}, true},
		{"ugm-user-decode.out", user, EncodeOptions{}, false},
		{"ugm-nomerge-decode.out", variantTok(t, ugmPath, ugmNoMergeVariant), EncodeOptions{}, false},
		{"ugm-noprefix-decode.out", variantTok(t, ugmPath, ugmNoPrefixVariant), EncodeOptions{}, false},
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
			ids := c.tok.Encode(in, c.opts)
			if got := llamaDetokenize(c.tok, ids, c.special); got != want {
				t.Errorf("%s case %d %q: detokenized %q, want %q", c.out, i, in, got, want)
			}
			whole, streamed := decodeBoth(c.tok, ids, c.special)
			if whole != want && whole != " "+want {
				t.Errorf("%s case %d %q: Decode %q, want %q with at most a space before", c.out, i, in, whole, want)
			}
			if streamed != whole {
				t.Errorf("%s case %d %q: streamed %q, Decode %q", c.out, i, in, streamed, whole)
			}
		}
	}
}

// TestUGMVocab: the metadata read as llama.cpp reads it, and a few pieces.
func TestUGMVocab(t *testing.T) {
	tok := ugmTok(t)
	v := tok.Vocab()
	if v.Model != ModelUGM || v.BOS != 1 || v.EOS != 2 || v.UNK != 0 || v.PAD != 0 || v.SEP != -1 {
		t.Errorf("specials BOS %d EOS %d UNK %d PAD %d SEP %d", v.BOS, v.EOS, v.UNK, v.PAD, v.SEP)
	}
	if v.AddBOS || !v.AddEOS || !v.AddSpacePrefix || !v.RemoveExtraWhitespaces || len(v.Charsmap) != 237484 {
		t.Errorf("flags BOS %v EOS %v prefix %v merge %v charsmap %d", v.AddBOS, v.AddEOS, v.AddSpacePrefix, v.RemoveExtraWhitespaces, len(v.Charsmap))
	}
	if !tok.IsEOG(2) || !tok.IsControl(1) {
		t.Errorf("IsEOG(</s>) %v IsControl(<s>) %v", tok.IsEOG(2), tok.IsControl(1))
	}
	for _, c := range []struct {
		id            int32
		piece, pieceS string
	}{
		{0, "", "<unk>"},
		{2, "", "</s>"},
		{3, "\r", "\r"},
		{4, " ", " "},
	} {
		if got, gotS := string(tok.Piece(c.id)), string(tok.PieceSpecial(c.id)); got != c.piece || gotS != c.pieceS {
			t.Errorf("Piece(%d) = %q, %q; want %q, %q", c.id, got, gotS, c.piece, c.pieceS)
		}
	}

	// Defaults when the keys are absent: llama.cpp's T5 ids, EOS added,
	// no prefix, no merging, no charsmap.
	w := gguf.NewWriter()
	w.SetString(keyModel, ModelUGM)
	w.SetStrings(keyTokens, []string{"<pad>", "</s>", "<unk>", "▁", "a"})
	w.SetInt32s(keyTypes, []int32{TypeControl, TypeControl, TypeUnknown, TypeNormal, TypeNormal})
	w.SetFloat32s(keyScores, []float32{0, 0, 0, -1, -2})
	d, err := FromGGUF(parsed(t, w))
	if err != nil {
		t.Fatal(err)
	}
	dv := d.Vocab()
	if dv.BOS != -1 || dv.EOS != 1 || dv.UNK != 2 || dv.PAD != 0 || dv.AddBOS || !dv.AddEOS || dv.AddSpacePrefix || dv.RemoveExtraWhitespaces || dv.Charsmap != nil {
		t.Errorf("defaults %+v", *dv)
	}
	// No prefix, no merging, no charsmap: spaces are ▁ one for one, and
	// "b" is unknown; add_special appends </s>.
	if got := d.Encode(" a  ab", EncodeOptions{AddSpecial: true}); !slices.Equal(got, []int32{3, 4, 3, 3, 4, 2, 1}) {
		t.Errorf("Encode = %v", got)
	}
}

// ugmTinyVocab is a unigram vocabulary of an unknown token and "a", no
// special token else.
func ugmTinyVocab() *Vocab {
	return &Vocab{
		Model: ModelUGM, Tokens: []string{"<unk>", "a"}, Types: []int32{TypeUnknown, TypeNormal},
		BOS: -1, EOS: -1, EOT: -1, UNK: 0, PAD: -1, EOM: -1, SEP: -1, MASK: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1,
	}
}

// TestUGMEmptyToken: llama.cpp renames an empty token [EMPTY_id], and
// the renamed text is what the token trie holds and the piece renders.
func TestUGMEmptyToken(t *testing.T) {
	v := ugmTinyVocab()
	v.Tokens = []string{"<unk>", "", "▁", "a"}
	v.Scores = []float32{0, -1, -2, -2}
	v.Types = []int32{TypeUnknown, TypeNormal, TypeNormal, TypeNormal}
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("a[EMPTY_1]a", EncodeOptions{}); !slices.Equal(got, []int32{3, 1, 3}) {
		t.Errorf("Encode = %v", got)
	}
	if got := string(tok.Piece(1)); got != "[EMPTY_1]" {
		t.Errorf("Piece(1) = %q", got)
	}
}

// TestUGMBadVocab: vocabularies New must refuse rather than tokenize
// wrongly or panic.
func TestUGMBadVocab(t *testing.T) {
	base := ugmTinyVocab
	if _, err := New(base()); err != nil {
		t.Fatalf("the base vocabulary: %v", err)
	}
	noUnk := base()
	noUnk.UNK = -1
	eos := base()
	eos.AddEOS = true
	for name, v := range map[string]*Vocab{"no unknown token": noUnk, "add_eos without EOS": eos} {
		if _, err := New(v); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// A charsmap stored as another type than UINT8 / INT8.
	f := ggufVariant(t, ugmPath, func(_ *gguf.File, w *gguf.Writer) { w.SetInt32s(keyCharsmap, []int32{1, 2}) })
	if _, err := FromGGUF(f); !errors.Is(err, ErrInvalid) {
		t.Errorf("charsmap of INT32: %v, want ErrInvalid", err)
	}
}

// TestUGMPair: EncodePair writes XLM-RoBERTa's <s> a </s></s> b </s> when
// the vocabulary adds BOS and T5's a </s> b </s> when not. llama.cpp's
// tokenization of the pair written out with its special tokens, with
// add_special and parse_special (testdata/ugm-pair.inp, -xlmr.out with
// add_bos_token set, -t5.out as converted), gives the same ids.
func TestUGMPair(t *testing.T) {
	xlmr := variantTok(t, ugmPath, ugmXLMRVariant)
	t5 := ugmTok(t)
	pairs := readInputs(t, filepath.Join("testdata", "ugm-pair.inp"))
	for _, c := range []struct {
		tok      *Tokenizer
		out, sep string
	}{{xlmr, "ugm-pair-xlmr.out", "</s></s>"}, {t5, "ugm-pair-t5.out", "</s>"}} {
		want := readLines(t, filepath.Join("testdata", c.out))
		if len(want) != len(pairs)/2 {
			t.Fatalf("%s: %d lines for %d pairs", c.out, len(want), len(pairs)/2)
		}
		for i := 0; i+1 < len(pairs); i += 2 {
			a, b := pairs[i], pairs[i+1]
			ids, second, err := c.tok.EncodePair(a, b, false)
			if err != nil {
				t.Fatal(err)
			}
			var ref []int32
			for _, f := range strings.Fields(want[i/2]) {
				id, _ := strconv.Atoi(f)
				ref = append(ref, int32(id))
			}
			if !slices.Equal(ids, ref) {
				t.Errorf("%s pair %q / %q:\n got  %v\n want %v", c.out, a, b, ids, ref)
			}
			if rest := c.tok.Encode(b, EncodeOptions{}); !slices.Equal(ids[second:len(ids)-1], rest) {
				t.Errorf("%s pair %q / %q: second %d does not start b's %v in %v", c.out, a, b, second, rest, ids)
			}
			if got := c.tok.Encode(a+c.sep+b, EncodeOptions{AddSpecial: true, ParseSpecial: true}); !slices.Equal(got, ids) && !strings.Contains(a+b, "</s>") {
				t.Errorf("%s pair %q / %q: Encode of the joined text %v, pair %v", c.out, a, b, got, ids)
			}
		}
	}
	// XLM-R: BOS first, EOS twice between; T5: no BOS, one EOS between.
	ids, second, _ := xlmr.EncodePair("a", "b", false)
	if ids[0] != 1 || ids[second-1] != 2 || ids[second-2] != 2 || ids[len(ids)-1] != 2 {
		t.Errorf("XLM-R pair %v second %d", ids, second)
	}
	ids, second, _ = t5.EncodePair("a", "b", false)
	if ids[0] == 1 || ids[second-1] != 2 || ids[second-2] == 2 || ids[len(ids)-1] != 2 {
		t.Errorf("T5 pair %v second %d", ids, second)
	}
	// A document reading </s> is text unless asked otherwise.
	ids, second, _ = t5.EncodePair("q", "</s>", false)
	if slices.Contains(ids[second:len(ids)-1], 2) {
		t.Errorf("a document reading </s>: %v", ids)
	}
}

// TestUGMStablePrefix: the streaming contract of StablePrefix on the
// unigram vocabularies, with inputs rich in what the normalizer joins or
// splits (combining marks, half-width kana, tabs and ideographic spaces
// that become spaces, ▁ typed as text, invalid bytes); the variant with
// a user-defined ▁New▁York (a token holding an inner ▁) never cuts inside
// a fragment; the variants that keep every space cut too.
func TestUGMStablePrefix(t *testing.T) {
	pieces := append(slices.Clone(streamPieces), "e", "\u0301", "ｶ", "ﾞ", "ｶﾀ", "ｶﾀｶﾅ", "ﬁ", "①", "\u3000", "\u200b",
		"New", "York", "<extra_id_0>", "<extra", "xyzzy", "\x00", "\xe3\x81", "\x82", "▁▁", "こんにちは", "ＡＢ")
	user := variantTok(t, ugmPath, ugmUserVariant)
	iters := 500
	if os.Getenv("TOKENIZER_STRESS") != "" {
		iters = 30000
	}
	if testing.Short() {
		iters = 100
	}
	for _, c := range []struct {
		name string
		tok  *Tokenizer
	}{
		{"test_model", ugmTok(t)}, {"test_ja_model", ugmJaTok(t)}, {"user", user},
		{"nomerge", variantTok(t, ugmPath, ugmNoMergeVariant)}, {"noprefix", variantTok(t, ugmPath, ugmNoPrefixVariant)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(17, uint64(len(c.name))))
			cuts := 0
			for i := 0; i < iters; i++ {
				text, more := randomFrom(r, pieces, 12), randomFrom(r, pieces, 4)
				for _, parse := range []bool{false, true} {
					o := EncodeOptions{ParseSpecial: parse}
					cut := c.tok.StablePrefixOpts(text, o)
					if cut < 0 || cut > len(text) {
						t.Fatalf("cut %d outside [0,%d]", cut, len(text))
					}
					if cut > 0 {
						cuts++
					}
					whole := c.tok.Encode(text+more, o)
					head := c.tok.Encode(text[:cut], o)
					tail := c.tok.Encode(text[cut:]+more, EncodeOptions{ParseSpecial: parse, Continuation: cut > 0})
					if !equalIDs(whole, append(slices.Clone(head), tail...)) {
						t.Fatalf("parse=%v cut %d of %q + %q:\n whole %v\n head  %v\n tail  %v", parse, cut, text, more, whole, head, tail)
					}
				}
			}
			if cuts < iters/4 {
				t.Errorf("only %d of %d prefixes cut anything", cuts, 2*iters)
			}
		})
	}
	tok := ugmTok(t)
	for _, c := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"hello", 0},
		{"hello world", 5},
		{"hello world ", 11},
		{"hello  world\tagain", 5}, // this charsmap keeps tabs: world\tagain is a word
		{"a b</s>", 3},             // the token stays: the text after it gets a space prefix
		{"cafe\u0301 ok", 6},
		{"cafe", 0},
		{"x \u2581y", 1},
		{"x\u2581 y", 0}, // the head would end with a ▁ of its own
	} {
		if got := tok.StablePrefix(c.text); got != c.want {
			t.Errorf("StablePrefix(%q) = %d, want %d", c.text, got, c.want)
		}
	}
	if got := user.StablePrefix("hello world again"); got != 0 {
		t.Errorf("StablePrefix with an inner-▁ token = %d, want 0", got)
	}
}

// TestUGMSpacer: llama.cpp's whitespace rules for every flag setting,
// including escape_whitespaces off and treat_whitespace_as_suffix on,
// which llama.cpp never sets for unigram vocabularies.
func TestUGMSpacer(t *testing.T) {
	const in = "  a b   cd "
	cases := []struct {
		prefix, merge, escape, suffix bool
		want                          string
	}{
		{false, false, true, false, "▁▁a▁b▁▁▁cd▁"},
		{true, false, true, false, "▁▁▁a▁b▁▁▁cd▁"},
		{false, true, true, false, "▁a▁b▁cd"},
		{true, true, true, false, "▁a▁b▁cd"},
		{true, true, false, false, " a b cd"},
		{true, false, true, true, "▁▁a▁b▁▁▁cd▁▁"},
		{true, true, true, true, "▁a▁b▁cd▁"},
	}
	for _, c := range cases {
		m := &ugmModel{addPrefix: c.prefix, mergeSpaces: c.merge, escape: c.escape, suffix: c.suffix, user: newByteTrie(nil, nil)}
		if got := string(m.normalize(nil, in, true)); got != c.want {
			t.Errorf("prefix %v merge %v escape %v suffix %v: %q, want %q", c.prefix, c.merge, c.escape, c.suffix, got, c.want)
		}
	}
}

// TestUGMUserDefinedScore: a token that llama.cpp's text-based fix-ups
// make user-defined (gpt-oss's <|channel|>, eog.go) scores 0 in the
// search, though the trie took it in as a normal token. The charsmap maps
// Q to its text, which the input cannot hold (it would be split out as a
// special token).
func TestUGMUserDefinedScore(t *testing.T) {
	v := ugmTinyVocab()
	v.Tokens = []string{"<unk>", "<|channel|>", "<", "|", "c", "h", "a", "n", "e", "l", ">"}
	v.Scores = []float32{0, -100, -1, -1, -1, -1, -1, -1, -1, -1, -1}
	v.Types = make([]int32, len(v.Tokens))
	for i := range v.Types {
		v.Types[i] = TypeNormal
	}
	v.Types[0] = TypeUnknown
	v.Charsmap = xcdaOneKey('Q', "<|channel|>")
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("Q", EncodeOptions{}); !slices.Equal(got, []int32{1}) {
		t.Errorf("Encode(Q) = %v, want the user-defined token at score 0", got)
	}
}

// TestUGMLongInput: long inputs of one repeated character, of unknown
// characters and of invalid bytes encode in linear time (one token, one
// merged unknown token, ...) and stay correct at the ends.
func TestUGMLongInput(t *testing.T) {
	tok := ugmTok(t)
	for _, c := range []struct {
		name string
		text string
		n    int // tokens expected, -1 to skip
	}{
		{"unknown run", strings.Repeat("⟁", 200000), 2},      // ▁ and one unknown
		{"invalid bytes", strings.Repeat("\xff", 200000), 2}, // U+FFFD is unknown here
		{"one word", strings.Repeat("ab", 200000), -1},
		{"spaces", strings.Repeat(" ", 400000) + "x", -1},
	} {
		ids := tok.Encode(c.text, EncodeOptions{})
		if c.n >= 0 && len(ids) != c.n {
			t.Errorf("%s: %d tokens", c.name, len(ids))
		}
		tok.StablePrefix(c.text)
	}
}

// BenchmarkEncodeUGM reports Encode throughput (MB/s) on English text with
// the English unigram vocabulary.
func BenchmarkEncodeUGM(b *testing.B) {
	text := benchText(b)
	tok := ugmTok(b)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		tok.Encode(text, EncodeOptions{})
	}
}
