package tokenizer

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var vectorVocabs = []string{"llama-spm", "phi-3", "gpt-2", "deepseek-llm", "falcon", "llama3", "qwen3"}

type vectorCase struct {
	input string
	want  []int32
}

// readVectors splits NAME.inp on "\n__ggml_vocab_test__\n" exactly as
// llama.cpp's test-tokenizer-0 does and pairs each input with a line of
// NAME.out.
func readVectors(t *testing.T, base string) []vectorCase {
	t.Helper()
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	outb, err := os.ReadFile(base + ".out")
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	raw := string(inp)
	var inputs []string
	for pos := 0; pos < len(raw); {
		next := strings.Index(raw[pos:], sep)
		if next < 0 {
			inputs = append(inputs, raw[pos:])
			break
		}
		inputs = append(inputs, raw[pos:pos+next])
		pos += next + len(sep)
	}
	lines := strings.Split(strings.TrimSuffix(string(outb), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("%d inputs but %d output lines", len(inputs), len(lines))
	}
	cases := make([]vectorCase, len(inputs))
	for i, line := range lines {
		cases[i].input = inputs[i]
		for _, f := range strings.Fields(line) {
			id, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			cases[i].want = append(cases[i].want, int32(id))
		}
	}
	return cases
}

func TestLlamaCppVectors(t *testing.T) {
	dir := filepath.Join(sharedDir(t), "tokenizer")
	for _, name := range vectorVocabs {
		t.Run(name, func(t *testing.T) {
			tok := loadTokenizer(t, filepath.Join("tokenizer", "ggml-vocab-"+name+".gguf"))
			cases := readVectors(t, filepath.Join(dir, "ggml-vocab-"+name+".gguf"))
			pass := 0
			for i, c := range cases {
				got := tok.Encode(c.input, EncodeOptions{})
				if equalIDs(got, c.want) {
					pass++
					continue
				}
				t.Errorf("case %d %q:\n got  %v\n want %v", i, c.input, got, c.want)
			}
			t.Logf("%s: %d/%d cases pass", name, pass, len(cases))
		})
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
