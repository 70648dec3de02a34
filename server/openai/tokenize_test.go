package openai

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// refCase is one case of the tiny model's llama.cpp reference: the
// prompt, llama.cpp's tokens of it (BOS first), the top 8 [id, logit,
// logprob] of each prompt position and its greedy continuation.
type refCase struct {
	Prompt     string         `json:"prompt"`
	Tokens     []int32        `json:"tokens"`
	PromptTopK [][][3]float64 `json:"prompt_topk"`
	Greedy     []int32        `json:"greedy"`
}

// llamaCppReference reads tiny-llama-f16's llama.cpp reference cases.
func llamaCppReference(t *testing.T) []refCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata(t), "models", "tiny-llama-f16.ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []refCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &ref); err != nil || len(ref.Cases) == 0 {
		t.Fatalf("reference: %v", err)
	}
	return ref.Cases
}

// TestTokenize: POST /tokenize gives llama.cpp's tokens of the reference
// prompts in llama.cpp's form (content) and vLLM's (prompt), pieces and
// vocabulary strings, a conversation's tokens as chat completions counts
// them, and clear refusals.
func TestTokenize(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	for _, c := range llamaCppReference(t) {
		body, _ := json.Marshal(map[string]any{"content": c.Prompt, "add_special": true})
		status, raw := h.post(t, "/tokenize", string(body))
		var cpp struct{ Tokens []int32 }
		if status != 200 || json.Unmarshal(raw, &cpp) != nil || !slices.Equal(cpp.Tokens, c.Tokens) {
			t.Fatalf("content %q: status %d, %s; llama.cpp's tokens %v", c.Prompt, status, raw, c.Tokens)
		}
		body, _ = json.Marshal(map[string]any{"model": "tiny", "prompt": c.Prompt, "return_token_strs": true})
		status, raw = h.post(t, "/tokenize", string(body))
		var v vllmTokens
		if status != 200 || json.Unmarshal(raw, &v) != nil || !slices.Equal(v.Tokens, c.Tokens) || v.Count != len(c.Tokens) ||
			v.MaxModelLen != h.e.Limits().ContextLen || len(v.TokenStrs) != len(c.Tokens) || v.TokenStrs[0] != "<s>" ||
			!strings.HasPrefix(v.TokenStrs[1], "▁") {
			t.Fatalf("prompt %q: status %d, %s; llama.cpp's tokens %v", c.Prompt, status, raw, c.Tokens)
		}
		// Detokenized with BOS's text, as llama.cpp's /detokenize gives it.
		body, _ = json.Marshal(map[string]any{"tokens": c.Tokens})
		status, raw = h.post(t, "/detokenize", string(body))
		var d struct{ Prompt, Content string }
		if status != 200 || json.Unmarshal(raw, &d) != nil || d.Prompt != "<s> "+c.Prompt || d.Content != d.Prompt {
			t.Fatalf("detokenize %v: status %d, %s", c.Tokens, status, raw)
		}
	}

	// Pieces: text, or bytes where a token holds part of a character.
	text := "smile 🙂"
	status, raw := h.post(t, "/tokenize", `{"content":"smile 🙂","with_pieces":true}`)
	var pieces struct {
		Tokens []struct {
			ID    int32           `json:"id"`
			Piece json.RawMessage `json:"piece"`
		} `json:"tokens"`
	}
	if status != 200 || json.Unmarshal(raw, &pieces) != nil {
		t.Fatalf("with_pieces: status %d, %s", status, raw)
	}
	var joined []byte
	bytePieces := 0
	for _, p := range pieces.Tokens {
		var s string
		var bs []byte
		var ints []int
		switch {
		case json.Unmarshal(p.Piece, &s) == nil:
			joined = append(joined, s...)
		case json.Unmarshal(p.Piece, &ints) == nil:
			for _, b := range ints {
				bs = append(bs, byte(b))
			}
			joined = append(joined, bs...)
			bytePieces++
		default:
			t.Fatalf("piece %s", p.Piece)
		}
	}
	if string(joined) != " "+text || bytePieces == 0 {
		t.Fatalf("pieces %s join to %q (%d of bytes)", raw, joined, bytePieces)
	}

	// Control-token texts are parsed unless parse_special is false.
	for _, c := range []struct {
		body string
		bos  bool
	}{{`{"content":"<s>hi"}`, true}, {`{"content":"<s>hi","parse_special":false}`, false}} {
		status, raw := h.post(t, "/tokenize", c.body)
		var cpp struct{ Tokens []int32 }
		if status != 200 || json.Unmarshal(raw, &cpp) != nil || len(cpp.Tokens) == 0 || (cpp.Tokens[0] == 1) != c.bos {
			t.Fatalf("%s: status %d, %s", c.body, status, raw)
		}
	}

	// A conversation: the tokens chat completions prompts the model with.
	msgs := `"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"}]`
	status, raw = h.post(t, "/tokenize", `{"model":"tiny",`+msgs+`}`)
	var chatToks vllmTokens
	if status != 200 || json.Unmarshal(raw, &chatToks) != nil || chatToks.Count == 0 {
		t.Fatalf("messages: status %d, %s", status, raw)
	}
	status, raw = h.post(t, "/tokenize", `{"add_generation_prompt":false,`+msgs+`}`)
	var noGen vllmTokens
	if status != 200 || json.Unmarshal(raw, &noGen) != nil || noGen.Count >= chatToks.Count ||
		!slices.Equal(noGen.Tokens, chatToks.Tokens[:noGen.Count]) {
		t.Fatalf("add_generation_prompt false: status %d, %s; with it %v", status, raw, chatToks.Tokens)
	}
	status, raw = h.post(t, "/v1/chat/completions", `{"model":"tiny","max_tokens":1,"temperature":0,`+msgs+`}`)
	var reply struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if status != 200 || json.Unmarshal(raw, &reply) != nil || reply.Usage.PromptTokens != chatToks.Count {
		t.Fatalf("chat completion: status %d, %s; /tokenize counted %d", status, raw, chatToks.Count)
	}
	status, raw = h.post(t, "/detokenize", mustJSON(t, map[string]any{"tokens": chatToks.Tokens}))
	var d struct{ Prompt string }
	if status != 200 || json.Unmarshal(raw, &d) != nil || !strings.HasPrefix(d.Prompt, "<s>") ||
		!strings.Contains(d.Prompt, "Be brief.") || !strings.Contains(d.Prompt, "Hello there") {
		t.Fatalf("the conversation's tokens read back as %q (%d)", d.Prompt, status)
	}

	for _, c := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"/tokenize", `{"model":"tiny"}`, 400, "exactly one of"},
		{"/tokenize", `{"prompt":"a","content":"a"}`, 400, "exactly one of"},
		{"/tokenize", `{"messages":[]}`, 400, "messages"},
		{"/tokenize", `{"model":"none","prompt":"a"}`, 404, "model_not_found"},
		{"/detokenize", `{"tokens":[1,32000]}`, 400, "tokens[1]: id 32000 is outside the vocabulary"},
		{"/detokenize", `{"tokens":[-1]}`, 400, "outside the vocabulary"},
		{"/detokenize", `{"tokens":"abc"}`, 400, "tokens"},
	} {
		status, raw := h.post(t, c.path, c.body)
		if status != c.status || !strings.Contains(string(raw), c.want) {
			t.Fatalf("%s %s: status %d, %s (want %d naming %q)", c.path, c.body, status, raw, c.status, c.want)
		}
	}
	if status, raw := h.post(t, "/detokenize", `{"tokens":[]}`); status != 200 || !strings.Contains(string(raw), `"prompt":""`) {
		t.Fatalf("no tokens: status %d, %s", status, raw)
	}
	h.idle(t, false)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
