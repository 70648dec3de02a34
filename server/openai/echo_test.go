package openai

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestCompletionEchoLogprobs: echo with logprobs (how evaluation harnesses
// such as lm-evaluation-harness score a text) returns every prompt token
// with its logprob, the first null, then the generated token's, and the
// logprobs are llama.cpp's: each position's three best alternatives, and
// each prompt token's logprob where llama.cpp's reference lists it among
// its position's top 8.
func TestCompletionEchoLogprobs(t *testing.T) {
	cases := llamaCppReference(t)
	h := startHarness(t, harnessOpts{})
	checked := 0
	for _, c := range cases[:3] {
		for _, stream := range []bool{false, true} {
			body, _ := json.Marshal(map[string]any{"model": "tiny", "prompt": c.Tokens, "echo": true, "logprobs": 3,
				"max_tokens": 1, "temperature": 0, "stream": stream})
			status, raw := h.post(t, "/v1/completions", string(body))
			if status != 200 {
				t.Fatalf("status %d, %s", status, raw)
			}
			var lp struct {
				Tokens        []string             `json:"tokens"`
				TokenLogprobs []*float64           `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
			}
			if stream {
				// The first chunk carries the echoed prompt and its logprobs.
				for _, line := range strings.Split(string(raw), "\n") {
					var ck struct {
						Choices []struct {
							Logprobs *json.RawMessage `json:"logprobs"`
						} `json:"choices"`
					}
					if d, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(d), &ck) == nil && len(ck.Choices) == 1 && ck.Choices[0].Logprobs != nil {
						_ = json.Unmarshal(*ck.Choices[0].Logprobs, &lp)
						break
					}
				}
				if len(lp.Tokens) != len(c.Tokens) {
					t.Fatalf("stream: first logprobs chunk has %d tokens, the prompt %d\n%s", len(lp.Tokens), len(c.Tokens), raw)
				}
				continue
			}
			var rep struct {
				Choices []struct {
					Logprobs json.RawMessage `json:"logprobs"`
				} `json:"choices"`
			}
			if json.Unmarshal(raw, &rep) != nil || len(rep.Choices) != 1 || json.Unmarshal(rep.Choices[0].Logprobs, &lp) != nil {
				t.Fatalf("reply %s", raw)
			}
			n := len(c.Tokens)
			if len(lp.Tokens) != n+1 || len(lp.TokenLogprobs) != n+1 || lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil {
				t.Fatalf("%d prompt tokens: %d logprobs, first %v / %v", n, len(lp.TokenLogprobs), lp.TokenLogprobs[0], lp.TopLogprobs[0])
			}
			want := func(pos int, id int32) (float64, bool) { // llama.cpp's logprob of id after pos tokens
				for _, e := range c.PromptTopK[pos-1] {
					if int32(e[0]) == id {
						return e[2], true
					}
				}
				return 0, false
			}
			for i := 1; i <= n; i++ {
				id := c.Greedy[0]
				if i < n {
					id = c.Tokens[i]
				}
				if lp.TokenLogprobs[i] == nil || len(lp.TopLogprobs[i]) == 0 || len(lp.TopLogprobs[i]) > 3 {
					t.Fatalf("token %d: logprob %v, top %v", i, lp.TokenLogprobs[i], lp.TopLogprobs[i])
				}
				if w, ok := want(i, id); ok {
					if math.Abs(*lp.TokenLogprobs[i]-w) > 0.02 {
						t.Fatalf("%q token %d (%d): logprob %v, llama.cpp %v", c.Prompt, i, id, *lp.TokenLogprobs[i], w)
					}
					checked++
				}
				// The alternatives: llama.cpp's three best at this position.
				var top []float64
				for _, v := range lp.TopLogprobs[i] {
					top = append(top, v)
				}
				slices.SortFunc(top, func(a, b float64) int { return cmp.Compare(b, a) })
				for k, v := range top {
					if w := c.PromptTopK[i-1][k][2]; math.Abs(v-w) > 0.02 {
						t.Fatalf("%q position %d: top logprobs %v, llama.cpp's %v", c.Prompt, i, top, c.PromptTopK[i-1][:3])
					}
					checked++
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d logprobs compared with llama.cpp's", checked)
	}
	t.Logf("%d logprobs equal llama.cpp's within 0.02", checked)
	h.idle(t, false)
}
