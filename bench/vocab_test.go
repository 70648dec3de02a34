package bench

import (
	"context"
	"math/rand/v2"
	"oengine/internal/refdata"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"oengine/model/gguf"
	"oengine/model/tokenizer"
)

func TestVocabFromTexts(t *testing.T) {
	texts := []string{
		0: "",         // control (the server detokenizes it to nothing)
		1: "\uFFFD",   // a lone high byte
		2: "A",        // ASCII byte token: same text as id 5
		3: " the",     // ordinary
		4: "\n",       // control character
		5: "A",        // the ordinary "A"
		6: "é",        // ordinary
		7: "x\x00",    // control character inside
		8: " quick",   // ordinary
		9: "\xff\xfe", // invalid UTF-8
	}
	v, err := vocabFromTexts(texts, "test")
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{3, 5, 6, 8}
	if v.Size != 10 || len(v.IDs) != len(want) {
		t.Fatalf("pool %v of %d, want %v of 10", v.IDs, v.Size, want)
	}
	for i := range want {
		if v.IDs[i] != want[i] {
			t.Fatalf("pool %v, want %v", v.IDs, want)
		}
	}
	if _, err := vocabFromTexts([]string{"", "\n"}, "empty"); err == nil {
		t.Error("a vocabulary without ordinary tokens was accepted")
	}
}

// TestVocabFromGGUFSkipsSpecial reads the SentencePiece vocabulary of the
// reference model: control and byte tokens must be left out, and every
// kept id must detokenize to its own ordinary text.
func TestVocabFromGGUFSkipsSpecial(t *testing.T) {
	path := filepath.Join(repoRoot(t), "..", "shared", "testdata", "models", "tiny-llama-f16.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("shared testdata missing: %v", err)
	}
	v, err := VocabFromGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	types := tok.Vocab().Types
	if types == nil {
		t.Fatal("the reference vocabulary has no token types")
	}
	kept := map[uint32]bool{}
	for _, id := range v.IDs {
		kept[id] = true
		if ty := types[id]; ty != tokenizer.TypeNormal {
			t.Fatalf("id %d (%q) of type %d in the pool", id, tok.TokenText(int32(id)), ty)
		}
	}
	bytes, controls := 0, 0
	for id, ty := range types {
		switch ty {
		case tokenizer.TypeByte:
			bytes++
		case tokenizer.TypeControl:
			controls++
		}
		if (ty == tokenizer.TypeByte || ty == tokenizer.TypeControl) && kept[uint32(id)] {
			t.Fatalf("special id %d kept", id)
		}
	}
	if bytes == 0 || controls == 0 || len(v.IDs) < v.Size/2 || v.Size != tok.VocabSize() {
		t.Errorf("pool %d of %d, %d byte and %d control tokens in the vocabulary", len(v.IDs), v.Size, bytes, controls)
	}
	// drawn prompts have exactly the asked length
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 17, 128} {
		if ids := v.Draw(r, n); len(ids) != n {
			t.Errorf("drew %d ids, want %d", len(ids), n)
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	return refdata.Root(t)
}

func TestCalibrate(t *testing.T) {
	// A server whose template costs 9 tokens and whose tokenizer splits
	// every word into pieces of three letters.
	probe := func(chat int) Probe {
		return func(_ context.Context, text string) (int, error) {
			return fakeTokens(text, false) + chat, nil
		}
	}
	for _, c := range []struct {
		name   string
		target int
		chat   int
	}{{"plain 128", 128, 0}, {"template 128", 128, 8}, {"plain 1000", 1000, 0}, {"small 20", 20, 8}} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			p := func(ctx context.Context, text string) (int, error) { calls++; return probe(c.chat)(ctx, text) }
			plan, err := Calibrate(context.Background(), p, c.target, 5)
			if err != nil {
				t.Fatal(err)
			}
			if abs(plan.Tokens-c.target) > plan.Tolerance || plan.Tolerance != textTolerance(c.target) || calls != plan.Probes {
				t.Fatalf("calibrated %+v after %d calls", plan.Calibration, calls)
			}
			// rotations of the base text keep its length
			r := rand.New(rand.NewPCG(3, 4))
			for range 10 {
				text := plan.Text(r, c.target)
				if got, _ := probe(c.chat)(context.Background(), text); got != plan.Tokens {
					t.Fatalf("a rotated prompt counts %d tokens, the base %d", got, plan.Tokens)
				}
				if len(strings.Fields(text)) != plan.Words {
					t.Fatalf("rotated prompt of %d words, base %d", len(strings.Fields(text)), plan.Words)
				}
			}
		})
	}
	// A template longer than the target cannot be calibrated.
	if _, err := Calibrate(context.Background(), probe(50), 20, 5); err == nil {
		t.Error("calibrated 20 tokens through a 50-token template")
	}
	// No usage: a clear error.
	none := func(context.Context, string) (int, error) { return 0, nil }
	if _, err := Calibrate(context.Background(), none, 20, 5); err == nil || !strings.Contains(err.Error(), "prompt_tokens") {
		t.Errorf("err %v, want one about missing prompt_tokens", err)
	}
}
