package streaming

import (
	"math/rand/v2"
	"oengine/internal/refdata"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"oengine/model/gguf"
	"oengine/model/tokenizer"
)

// testdata returns ../shared/testdata from the repository root, skipping
// when it is absent.
func testdata(t testing.TB) string {
	t.Helper()
	return refdata.Dir(t)
}

var (
	tokMu    sync.Mutex
	tokCache = map[vocabFile]*tokenizer.Tokenizer{}
)

// vocabFile is the path of a test vocabulary (the cache key).
type vocabFile string

func vocab(t testing.TB, name string) *tokenizer.Tokenizer {
	t.Helper()
	path := filepath.Join(testdata(t), "tokenizer", "ggml-vocab-"+name+".gguf")
	tokMu.Lock()
	defer tokMu.Unlock()
	if tk := tokCache[vocabFile(path)]; tk != nil {
		return tk
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	tokCache[vocabFile(path)] = tk
	return tk
}

var vocabs = []string{"llama-spm", "llama3", "qwen3", "gpt-2", "phi-3", "falcon", "deepseek-llm"}

// fragments build random conversational text: words, whitespace runs,
// punctuation, digits, multi-byte scripts, emoji and special-token texts.
var fragments = []string{
	"Hello", "world", "the", "streaming", "input", " ", "  ", "\n", "\n\n", "\t",
	"42", "2026", "3.14", ",", ".", "?!", "'re", "'s", "don't", "-", "(x)",
	"über", "naïve", "Привет", "日本語", "你好", "🙂", "👩‍💻", "é", "\u00a0",
	"<|im_start|>", "<|im_end|>", "<|eot_id|>", "</s>", "<s>", "<|endoftext|>", "<|", "<|im",
}

func randText(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(fragments[r.IntN(len(fragments))])
	}
	return b.String()
}

// randSplit cuts s into pieces at random rune boundaries (chunks are
// proto3 strings: valid UTF-8), some of them empty.
func randSplit(r *rand.Rand, s string) []string {
	var cuts []int
	for i := range s {
		if i > 0 && r.IntN(4) == 0 {
			cuts = append(cuts, i)
		}
	}
	var out []string
	prev := 0
	for _, c := range cuts {
		out = append(out, s[prev:c])
		prev = c
		if r.IntN(10) == 0 {
			out = append(out, "")
		}
	}
	return append(out, s[prev:])
}

// TestTextChunksEqualWholeText is the property of issue 5: for random texts
// split at random points, the streamed tokens equal the tokenization of the
// concatenated text, with and without the BOS rule, on every vocabulary.
func TestTextChunksEqualWholeText(t *testing.T) {
	iters := 80
	if os.Getenv("STREAMING_STRESS") != "" {
		iters = 5000
	}
	if testing.Short() {
		iters = 20
	}
	for _, name := range vocabs {
		t.Run(name, func(t *testing.T) {
			tk := vocab(t, name)
			r := rand.New(rand.NewPCG(5, uint64(len(name))))
			held := 0
			for i := 0; i < iters; i++ {
				whole := randText(r, 1+r.IntN(14))
				bos := i%2 == 0
				want := tk.Encode(whole, tokenizer.EncodeOptions{AddSpecial: bos, ParseSpecial: true})
				a := NewAssembler(tk, bos)
				var got []int32
				for _, piece := range randSplit(r, whole) {
					got = append(got, a.Text(piece)...)
					held = max(held, len(a.Pending()))
				}
				got = append(got, a.Flush()...)
				if !slices.Equal(got, want) {
					t.Fatalf("text %q (bos %v):\n streamed %v\n whole    %v", whole, bos, got, want)
				}
			}
			t.Logf("longest held-back tail: %d bytes", held)
		})
	}
}

// TestMixedChunks: token-id chunks pass through and end a text run; each
// run is tokenized as a whole.
func TestMixedChunks(t *testing.T) {
	tk := vocab(t, "qwen3")
	r := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 50; i++ {
		run1, run2 := randText(r, 6), randText(r, 6)
		ids := []int32{int32(r.IntN(1000)), int32(r.IntN(1000))}
		o := tokenizer.EncodeOptions{ParseSpecial: true}
		want := append(append(tk.Encode(run1, o), ids...), tk.Encode(run2, o)...)
		a := NewAssembler(tk, false)
		var got []int32
		for _, p := range randSplit(r, run1) {
			got = append(got, a.Text(p)...)
		}
		got = append(got, a.Tokens(ids)...)
		for _, p := range randSplit(r, run2) {
			got = append(got, a.Text(p)...)
		}
		got = append(got, a.Flush()...)
		if !slices.Equal(got, want) {
			t.Fatalf("%q + %v + %q:\n got  %v\n want %v", run1, ids, run2, got, want)
		}
	}
}

// TestEarlyRelease: on prose most tokens are released before the end.
func TestEarlyRelease(t *testing.T) {
	tk := vocab(t, "llama3")
	a := NewAssembler(tk, true)
	words := strings.Fields("the quick brown fox jumps over the lazy dog and keeps on running far away")
	released := 0
	for i, w := range words {
		if i > 0 {
			w = " " + w
		}
		released += len(a.Text(w))
	}
	rest := len(a.Flush())
	if released == 0 || rest > 3 {
		t.Fatalf("released %d tokens early, %d at the end", released, rest)
	}
}
