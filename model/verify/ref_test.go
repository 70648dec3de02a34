package verify

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"oengine/model/gguf"
)

func TestEntryUnmarshal(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    Entry
		wantErr bool
	}{
		{"ok", `[30391, 15.7901, -1.73561]`, Entry{30391, 15.7901, -1.73561}, false},
		{"two_values", `[1, 2]`, Entry{}, true},
		{"fractional_id", `[1.5, 2, 3]`, Entry{}, true},
		{"negative_id", `[-1, 2, 3]`, Entry{}, true},
		{"not_array", `{"a":1}`, Entry{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e Entry
			err := json.Unmarshal([]byte(c.in), &e)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if !c.wantErr && e != c.want {
				t.Fatalf("got %+v want %+v", e, c.want)
			}
		})
	}
}

func TestLoadReferenceValidates(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		body    string
		wantErr string
	}{
		{"ok", `{"n_vocab":10,"cases":[{"tokens":[1],"prompt_topk":[[[2,1,-1]]],"greedy":[3],"greedy_topk":[[[3,1,-1]]]}]}`, ""},
		{"topk_length", `{"cases":[{"tokens":[1,2],"prompt_topk":[[[2,1,-1]]],"greedy":[],"greedy_topk":[]}]}`, "prompt_topk"},
		{"empty_list", `{"cases":[{"tokens":[1],"prompt_topk":[[]],"greedy":[],"greedy_topk":[]}]}`, "empty top-k"},
		{"no_tokens", `{"cases":[{"tokens":[],"prompt_topk":[],"greedy":[],"greedy_topk":[]}]}`, "0 tokens"},
		{"bad_json", `{"cases":[`, "unexpected end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name+".json")
			if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadReference(p)
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, c.wantErr)
			}
		})
	}
}

func TestWeightClassOfReferenceModels(t *testing.T) {
	models := filepath.Join(testdataDir(t), "models")
	want := map[string]string{
		"tiny-llama-f16": ClassFloat, "tiny-llama-q8_0": ClassQuantized, "tiny-llama-q4_0": ClassQuantized,
		"tiny-llama-q4_k_m": ClassQuantized, "tiny-qwen2-q8_0": ClassQuantized, "tiny-qwen3-q4_k_m": ClassQuantized,
	}
	for name, class := range want {
		f, err := gguf.Open(filepath.Join(models, name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		if got := WeightClass(f); got != class {
			t.Errorf("%s: class %s, want %s", name, got, class)
		}
		f.Close()
	}
	if tol := ToleranceFor(ClassFloat); tol != (Tolerance{0.1, 0.01, 0.1}) {
		t.Errorf("float tolerance %+v", tol)
	}
	if tol := ToleranceFor(ClassBF16); tol != (Tolerance{0.15, 0.03, 0.25}) {
		t.Errorf("bf16 tolerance %+v", tol)
	}
	if tol := ToleranceFor(ClassQuantized); tol != (Tolerance{1, 0.2, 0.5}) {
		t.Errorf("quantized tolerance %+v", tol)
	}
}

func TestReportString(t *testing.T) {
	r := Report{Model: "m.gguf", Arch: "llama", Class: ClassFloat, Tol: ToleranceFor(ClassFloat), PageSize: 16,
		Cases: []CaseReport{
			{Index: 0, PromptTokens: 3, ForcedTokens: 5, TokensChecked: true, TokensMatch: true, Compared: 10, MaxAbs: 0.02, MeanAbs: 0.01, Pass: true},
			{Index: 1, PromptTokens: 4, ForcedTokens: 6, Compared: 30, MaxAbs: 0.5, MeanAbs: 0.03, Pass: false, Failures: []string{"max abs logprob error 0.5"}},
		}}
	s := r.String()
	for _, want := range []string{"model m.gguf", "case 0:", "tokens ok", "case 1:", "tokens not checked", "- max abs logprob error 0.5", "FAIL: 1/2 cases", "max abs 0.5000", "mean abs 0.0250"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}
