package openai

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"oengine/engine"
)

// teiRefusal checks a TEI route's error reply: the status, and TEI's body
// {"error": message, "error_type": kind} with a message naming want.
func teiRefusal(t *testing.T, what string, status int, body []byte, wantStatus int, kind, want string) {
	t.Helper()
	var e struct {
		Error     string `json:"error"`
		ErrorType string `json:"error_type"`
	}
	if status != wantStatus || json.Unmarshal(body, &e) != nil || e.ErrorType != kind || !strings.Contains(e.Error, want) {
		t.Fatalf("%s: status %d, %s (want %d, error_type %s, a message naming %q)", what, status, body, wantStatus, kind, want)
	}
}

// TestTEIEmbed: POST /embed answers text-embeddings-inference's request
// with the engine's own vectors (unit length unless normalize is false,
// cut to dimensions), one list per input, and refuses bad requests in
// TEI's error form.
func TestTEIEmbed(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	var vecs [][]float64
	status, body := h.post(t, "/embed", `{"inputs":"the quick brown fox"}`)
	if status != 200 || json.Unmarshal(body, &vecs) != nil || len(vecs) != 1 {
		t.Fatalf("one string: status %d, %.300s", status, body)
	}
	if err := sameFloats(vecs[0], unit(h.engineEmbedding(t, "the quick brown fox", engine.PoolingDefault))); err != nil {
		t.Fatal(err)
	}
	texts := []string{"jumps over", "the lazy dog", "again"}
	req, _ := json.Marshal(map[string]any{"inputs": texts, "normalize": false, "dimensions": 8})
	status, body = h.post(t, "/embed", string(req))
	if status != 200 || json.Unmarshal(body, &vecs) != nil || len(vecs) != len(texts) {
		t.Fatalf("three strings: status %d, %.300s", status, body)
	}
	for i, text := range texts {
		if err := sameFloats(vecs[i], h.engineEmbedding(t, text, engine.PoolingDefault)[:8]); err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
	}
	for _, c := range []struct{ body, want string }{
		{`{"inputs":[]}`, "inputs"},
		{`{"inputs":["a",""]}`, "inputs[1] is empty"},
		{`{"inputs":"a","truncation_direction":"Left"}`, "truncation_direction"},
		{`{"inputs":"a","prompt_name":"query"}`, "prompt_name"},
		{`{"inputs":"a","dimensions":0}`, "dimensions"},
	} {
		status, body := h.post(t, "/embed", c.body)
		teiRefusal(t, c.body, status, body, http.StatusBadRequest, "Validation", c.want)
	}
	// POST / (a client given the base URL alone) is /embed for this shape.
	status, root := h.post(t, "/", string(req))
	if status != 200 || string(root) != string(body) {
		t.Fatalf("POST /: status %d, %.300s; /embed gave %.300s", status, root, body)
	}
	status, body = h.post(t, "/", `{"inputs":[]}`)
	teiRefusal(t, "POST / with no inputs", status, body, http.StatusBadRequest, "Validation", "inputs")
	status, body = h.post(t, "/", `[1,`)
	teiRefusal(t, "POST / with malformed JSON", status, body, http.StatusBadRequest, "Validation", "malformed JSON")
	status, body = h.post(t, "/embed", `{"model":"none","inputs":"a"}`)
	teiRefusal(t, "unknown model", status, body, http.StatusNotFound, "Validation", `"none"`)
	h.idle(t, false)
}

// TestTEISimilarity: POST /similarity answers the cosine similarity of the
// source sentence's embedding to each sentence's, from the engine's own
// vectors.
func TestTEISimilarity(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	src, sentences := "a cat sat on the mat", []string{"a cat sat on the mat", "a dog lay on the rug", "stock prices fell"}
	req, _ := json.Marshal(map[string]any{"inputs": map[string]any{"source_sentence": src, "sentences": sentences}})
	status, body := h.post(t, "/similarity", string(req))
	var got []float64
	if status != 200 || json.Unmarshal(body, &got) != nil || len(got) != len(sentences) {
		t.Fatalf("status %d, %.300s", status, body)
	}
	s := unit(h.engineEmbedding(t, src, engine.PoolingDefault))
	for i, text := range sentences {
		v := unit(h.engineEmbedding(t, text, engine.PoolingDefault))
		want := 0.0
		for j := range v {
			want += float64(v[j]) * float64(s[j])
		}
		if math.Abs(got[i]-want) > 1e-12 {
			t.Fatalf("sentence %d: similarity %v, the engine's vectors give %v", i, got[i], want)
		}
	}
	if math.Abs(got[0]-1) > 1e-6 || got[2] >= got[0] {
		t.Fatalf("similarities %v: the source to itself must be 1 and the highest", got)
	}
	if status, root := h.post(t, "/", string(req)); status != 200 || string(root) != string(body) {
		t.Fatalf("POST /: status %d, %.300s; /similarity gave %.300s", status, root, body)
	}
	for _, c := range []struct{ body, want string }{
		{`{"inputs":{"sentences":["a"]}}`, "source_sentence"},
		{`{"inputs":{"source_sentence":"a","sentences":[]}}`, "sentences"},
		{`{"inputs":{"source_sentence":"a","sentences":["b",""]}}`, "sentences[1] is empty"},
		{`{"inputs":{"source_sentence":"a","sentences":["b"]},"parameters":{"truncation_direction":"Left"}}`, "truncation_direction"},
	} {
		status, body := h.post(t, "/similarity", c.body)
		teiRefusal(t, c.body, status, body, http.StatusBadRequest, "Validation", c.want)
	}
	h.idle(t, false)
}

// TestTEIRerank: POST /rerank with TEI's texts answers TEI's bare list
// ({index, score, text}, the most relevant first) with the engine's own
// scores, and refuses bad requests in TEI's error form; the Jina form on
// the same path is unchanged (TestRerank).
func TestTEIRerank(t *testing.T) {
	h := startHarness(t, harnessOpts{modelFile: rerankModel})
	q := "What is the capital of France?"
	texts := []string{"The Eiffel Tower was completed in 1889.", "Paris is the capital and largest city of France.",
		"Photosynthesis converts light energy into chemical energy."}
	for _, raw := range []bool{false, true} {
		req, _ := json.Marshal(map[string]any{"query": q, "texts": texts, "return_text": true, "raw_scores": raw})
		status, body := h.post(t, "/rerank", string(req))
		var got []struct {
			Index int     `json:"index"`
			Score float64 `json:"score"`
			Text  string  `json:"text"`
		}
		if status != 200 || json.Unmarshal(body, &got) != nil || len(got) != len(texts) {
			t.Fatalf("raw %v: status %d, %.300s", raw, status, body)
		}
		for k, g := range got {
			logit, _ := h.engineScore(t, q, texts[g.Index])
			want := logit
			if !raw {
				want = 1 / (1 + math.Exp(-logit))
			}
			if math.Abs(g.Score-want) > 1e-6 || g.Text != texts[g.Index] || (k > 0 && g.Score > got[k-1].Score) {
				t.Fatalf("raw %v, result %d %+v: want score %v, text %q, sorted (%s)", raw, k, g, want, texts[g.Index], body)
			}
		}
	}
	status, body := h.post(t, "/rerank", fmt.Sprintf(`{"query":%q,"texts":["a"]}`, q))
	if status != 200 || strings.Contains(string(body), `"text"`) {
		t.Fatalf("without return_text: status %d, %s", status, body)
	}
	if status, root := h.post(t, "/", fmt.Sprintf(`{"query":%q,"texts":["a"]}`, q)); status != 200 || string(root) != string(body) {
		t.Fatalf("POST /: status %d, %.300s; /rerank gave %.300s", status, root, body)
	}
	for _, c := range []struct{ body, want string }{
		{`{"query":"q","texts":[]}`, "texts"},
		{`{"query":"q","texts":["a",""]}`, "texts[1] is empty"},
		{`{"query":"","texts":["a"]}`, "query"},
		{`{"query":"q","texts":["a"],"truncation_direction":"Left"}`, "truncation_direction"},
	} {
		status, body := h.post(t, "/rerank", c.body)
		teiRefusal(t, c.body, status, body, http.StatusBadRequest, "Validation", c.want)
	}
	h.idle(t, false)
}

// TestTEISDK: Hugging Face's official JavaScript client
// (@huggingface/inference, its featureExtraction and sentenceSimilarity
// pointed at this server's /embed and /similarity, and featureExtraction
// at its base URL) gets the engine's vectors and similarities, and a
// refusal's message.
func TestTEISDK(t *testing.T) {
	requireNode(t, "@huggingface/inference")
	h := startHarness(t, harnessOpts{})
	out := runNode(t, "tei.mjs", h.base)
	var got struct {
		Vectors      [][]float64 `json:"vectors"`
		Root         [][]float64 `json:"root"`
		Similarities []float64   `json:"similarities"`
		Refusal      string      `json:"refusal"`
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil || len(got.Vectors) != 2 || len(got.Root) != 2 || len(got.Similarities) != 2 {
		t.Fatalf("tei.mjs printed %s (%v)", out, err)
	}
	texts := []string{"Embeddings from a client nobody here wrote.", "A second input."}
	for i, text := range texts {
		want := unit(h.engineEmbedding(t, text, engine.PoolingDefault))
		if err := sameFloats(got.Vectors[i], want); err != nil {
			t.Fatalf("vector %d: %v", i, err)
		}
		if err := sameFloats(got.Root[i], want); err != nil {
			t.Fatalf("vector %d from the base URL: %v", i, err)
		}
	}
	s := unit(h.engineEmbedding(t, texts[0], engine.PoolingDefault))
	for i, text := range texts {
		v := unit(h.engineEmbedding(t, text, engine.PoolingDefault))
		want := 0.0
		for j := range v {
			want += float64(v[j]) * float64(s[j])
		}
		if math.Abs(got.Similarities[i]-want) > 1e-12 {
			t.Fatalf("similarity %d: %v, want %v", i, got.Similarities[i], want)
		}
	}
	if !strings.Contains(got.Refusal, "inputs[0] is empty") {
		t.Fatalf("the client's error for an empty input: %q", got.Refusal)
	}
	h.idle(t, false)
}
