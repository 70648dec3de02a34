// Package verify checks a model's forward pass against reference data
// written by llama.cpp: per-position top-k log-probabilities under teacher
// forcing, the prompt's tokenization and a greedy continuation. The test of
// package verify runs it on the models in shared/testdata; the CLI's
// `oengine verify --model M.gguf --ref M.ref.json` runs it on any model.
package verify

import (
	"encoding/json"
	"fmt"
	"os"
)

// Reference is the content of a .ref.json file.
type Reference struct {
	Model     string `json:"model"`
	NVocab    int    `json:"n_vocab"`
	Reference string `json:"reference"` // producer description
	Cases     []Case `json:"cases"`
}

// Case is one prompt.
type Case struct {
	Prompt     string    `json:"prompt"`
	Tokens     []int32   `json:"tokens"`      // llama.cpp's tokenization (BOS when the model adds one)
	PromptTopK [][]Entry `json:"prompt_topk"` // [len(Tokens)] top entries after each prompt position
	Greedy     []int32   `json:"greedy"`      // greedy continuation
	GreedyTopK [][]Entry `json:"greedy_topk"` // [len(Greedy)] top entries before choosing Greedy[j]
	GreedyHex  string    `json:"greedy_text_hex"`
}

// Entry is one [token_id, logit, logprob] triple.
type Entry struct {
	Token   int32
	Logit   float64
	Logprob float64
}

// UnmarshalJSON reads the [id, logit, logprob] array form.
func (e *Entry) UnmarshalJSON(b []byte) error {
	var a []float64
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	if len(a) != 3 {
		return fmt.Errorf("verify: top-k entry has %d values, want 3", len(a))
	}
	e.Token, e.Logit, e.Logprob = int32(a[0]), a[1], a[2]
	if float64(e.Token) != a[0] || e.Token < 0 {
		return fmt.Errorf("verify: bad token id %v in top-k entry", a[0])
	}
	return nil
}

// LoadReference reads and checks a .ref.json file.
func LoadReference(path string) (*Reference, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	var r Reference
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("verify: %s: %w", path, err)
	}
	for i, c := range r.Cases {
		if len(c.Tokens) == 0 || len(c.PromptTopK) != len(c.Tokens) || len(c.GreedyTopK) != len(c.Greedy) {
			return nil, fmt.Errorf("verify: %s: case %d: %d tokens, %d prompt_topk, %d greedy, %d greedy_topk",
				path, i, len(c.Tokens), len(c.PromptTopK), len(c.Greedy), len(c.GreedyTopK))
		}
		for _, list := range append(append([][]Entry(nil), c.PromptTopK...), c.GreedyTopK...) {
			if len(list) == 0 {
				return nil, fmt.Errorf("verify: %s: case %d: empty top-k list", path, i)
			}
		}
	}
	return &r, nil
}

// margin returns the reference's top-1 minus top-2 logit (+Inf with one entry).
func margin(list []Entry) float64 {
	if len(list) < 2 {
		return 1e300
	}
	return list[0].Logit - list[1].Logit
}
