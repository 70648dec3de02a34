package openai

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"oengine/engine"
	"oengine/ggml"
	"oengine/model/gguf"
	"oengine/model/synth"
	"oengine/model/tokenizer"
	"oengine/sampling"
)

// TestCompletionSuffix: a completion with suffix on a model with
// fill-in-the-middle tokens (a small synthetic model with Qwen3's
// vocabulary, which has <|fim_prefix|> ...) prompts the engine with
// FIM_PRE prefix FIM_SUF suffix FIM_MID: the route's usage counts exactly
// those tokens and its text is what the engine generates from them; a
// model without FIM tokens refuses suffix.
func TestCompletionSuffix(t *testing.T) {
	vf, err := gguf.Open(filepath.Join(testdata(t), "tokenizer", "ggml-vocab-qwen3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer vf.Close()
	path := filepath.Join(t.TempDir(), "fim.gguf")
	if err := synth.WriteFile(synth.Options{Arch: "qwen2", Type: ggml.TypeQ8_0, Seed: 11, Vocab: vf,
		Dims: synth.Dims{Dim: 64, Layers: 2, Heads: 2, KVHeads: 1, FFN: 128, CtxLen: 512, RopeBase: 10000}}, path); err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, harnessOpts{modelFile: path})
	const prefix, suffix = "def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n"
	pre, suf, mid, ok := h.tok.FIM()
	if !ok {
		t.Fatal("the Qwen3 vocabulary's FIM tokens are not found")
	}
	want := []int32{pre}
	want = append(want, h.tok.Encode(prefix, tokenizer.EncodeOptions{})...)
	want = append(want, suf)
	want = append(want, h.tok.Encode(suffix, tokenizer.EncodeOptions{})...)
	want = append(want, mid)

	body, _ := json.Marshal(map[string]any{"model": "tiny", "prompt": prefix, "suffix": suffix, "max_tokens": 6,
		"temperature": 0, "ignore_eos": true})
	status, raw := h.post(t, "/v1/completions", string(body))
	var rep struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if status != 200 || json.Unmarshal(raw, &rep) != nil || len(rep.Choices) != 1 || rep.Usage.PromptTokens != len(want) {
		t.Fatalf("status %d, %s; want %d prompt tokens", status, raw, len(want))
	}
	zero := 0.0
	st, err := h.e.Submit(ctxT(t), engine.Request{TokenIDs: want, MaxTokens: 6, Sampling: sampling.Options{Temperature: &zero},
		Stop: engine.StopParams{IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for {
		ev, err := st.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(ev.Text)
		if ev.Terminal() {
			break
		}
	}
	if rep.Choices[0].Text != text.String() {
		t.Fatalf("the route wrote %q, the engine from the FIM prompt %q", rep.Choices[0].Text, text.String())
	}
	for _, c := range []struct{ body, param string }{
		{`{"model":"tiny","prompt":[1,2],"suffix":"x","max_tokens":1}`, "suffix"},
		{`{"model":"tiny","prompt":"a","suffix":"x","echo":true,"max_tokens":1}`, "echo"},
	} {
		status, raw := h.post(t, "/v1/completions", c.body)
		if status != 400 || !strings.Contains(string(raw), `"param":"`+c.param+`"`) {
			t.Fatalf("%s: %d %s", c.body, status, raw)
		}
	}
	h.idle(t, false)

	// The tiny Llama model has no FIM tokens.
	plain := startHarness(t, harnessOpts{})
	status, raw = plain.post(t, "/v1/completions", `{"model":"tiny","prompt":"a","suffix":"b","max_tokens":1}`)
	if status != 400 || !strings.Contains(string(raw), "fill-in-the-middle") || !strings.Contains(string(raw), "unsupported_feature") {
		t.Fatalf("a model without FIM tokens: %d %s", status, raw)
	}
}
