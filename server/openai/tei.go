package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"oengine/engine"
)

// Hugging Face's text-embeddings-inference (TEI) routes: POST /embed,
// POST /similarity, the TEI form of POST /rerank (texts, answered as a
// bare list) and POST / choosing among them, so clients written for TEI
// reach the engine as they are (docs/api.md, "text-embeddings-inference
// routes").

// teiWriter marks the response of a TEI route: writeError answers in
// TEI's form, {"error": message, "error_type": kind}, the form its
// clients read the message from.
type teiWriter struct{ http.ResponseWriter }

// Unwrap lets http.ResponseController reach the connection's controls.
func (w teiWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// teiError is TEI's error body.
type teiError struct {
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
}

// teiBody is e in TEI's form; the status stays the one the other routes
// give (docs/design.md §1).
func (e *apiError) teiBody() teiError {
	kind := "Validation"
	switch {
	case e.status == http.StatusTooManyRequests:
		kind = "Overloaded"
	case e.status == http.StatusServiceUnavailable:
		kind = "Unhealthy"
	case e.status >= 500:
		kind = "Backend"
	}
	return teiError{Error: e.msg, ErrorType: kind}
}

// teiRoot serves POST / as TEI does for the clients that post to the
// server's base URL (huggingface_hub's and @huggingface/inference's tasks
// given the URL alone): by the request's shape, TEI's rerank (texts),
// similarity (inputs an object) or embed (the rest).
func (a *api) teiRoot(w http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	if aerr := readJSON(w, r, a.cfg.MaxBodyBytes, &raw); aerr != nil {
		a.reject(teiWriter{w}, aerr)
		return
	}
	var shape struct {
		Texts  json.RawMessage `json:"texts"`
		Inputs json.RawMessage `json:"inputs"`
	}
	_ = json.Unmarshal(raw, &shape) // a body that is no object fails in the handler's own read
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
	switch in := bytes.TrimSpace(shape.Inputs); {
	case shape.Texts != nil:
		a.rerank(w, r)
	case len(in) > 0 && in[0] == '{':
		a.teiSimilarity(w, r)
	default:
		a.teiEmbed(w, r)
	}
}

// teiEmbedRequest is TEI's POST /embed.
type teiEmbedRequest struct {
	// Model (oengine): TEI serves one model; "" is the server's default.
	Model  string          `json:"model"`
	Inputs json.RawMessage `json:"inputs"`
	// Normalize: scale each vector to unit length (TEI's default: true).
	Normalize *bool `json:"normalize"`
	// Truncate: an input over the model's limit keeps its longest prefix
	// that fits instead of being refused.
	Truncate            bool    `json:"truncate"`
	TruncationDirection string  `json:"truncation_direction"`
	PromptName          *string `json:"prompt_name"`
	Dimensions          *int    `json:"dimensions"`
}

func (e *teiEmbedRequest) modelName() string { return e.Model }

// teiTruncation refuses what the engine does not do: truncating from the
// left, and sentence-transformers' named prompts (a model's prompts are
// the client's here, docs/api.md "Embeddings").
func teiTruncation(direction string, promptName *string) *apiError {
	switch {
	case direction != "" && direction != "Right" && direction != "right":
		return unsupported("truncation_direction", "truncation_direction %q: only Right (keep each input's beginning) is served", direction)
	case promptName != nil:
		return unsupported("prompt_name", "prompt_name %q: named prompts are not served; put the prompt in the input", *promptName)
	}
	return nil
}

// teiEmbed serves POST /embed: each input pooled as /v1/embeddings pools
// it (the server's default pooling), cut to dimensions and, unless
// normalize is false, scaled to unit length; the reply is the list of
// vectors, one per input (one for a single string too).
func (a *api) teiEmbed(w http.ResponseWriter, r *http.Request) {
	w = teiWriter{w}
	start := time.Now()
	var req teiEmbedRequest
	ms, ok := a.begin(w, r, &req)
	if !ok {
		return
	}
	ins, aerr := inputList(req.Inputs, "inputs")
	lim := ms.m.Backend.Limits()
	switch {
	case aerr != nil:
	case lim.EmbeddingDim == 0:
		aerr = noEmbeddings(ms, lim)
	default:
		if aerr = inputsCheck("inputs", "inputs", ins); aerr == nil {
			if aerr = teiTruncation(req.TruncationDirection, req.PromptName); aerr == nil {
				aerr = badDimensions("dimensions", req.Dimensions, lim)
			}
		}
	}
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	vecs, run, _, ok := a.embedEach(w, r, ms, start, ins, engine.EmbedOptions{Truncate: req.Truncate}, req.Dimensions,
		req.Normalize == nil || *req.Normalize)
	if !ok {
		return
	}
	defer run.done()
	writeJSON(w, http.StatusOK, vecs)
}

// teiSimilarityRequest is TEI's POST /similarity (the sentence-similarity
// task of Hugging Face's clients).
type teiSimilarityRequest struct {
	Model  string `json:"model"` // oengine, as teiEmbedRequest's
	Inputs struct {
		SourceSentence *string  `json:"source_sentence"`
		Sentences      []string `json:"sentences"`
	} `json:"inputs"`
	Parameters struct {
		Truncate            bool    `json:"truncate"`
		TruncationDirection string  `json:"truncation_direction"`
		PromptName          *string `json:"prompt_name"`
	} `json:"parameters"`
}

func (e *teiSimilarityRequest) modelName() string { return e.Model }

// teiSimilarity serves POST /similarity: the cosine similarity of the
// source sentence's embedding to each sentence's, in sentence order.
func (a *api) teiSimilarity(w http.ResponseWriter, r *http.Request) {
	w = teiWriter{w}
	start := time.Now()
	var req teiSimilarityRequest
	ms, ok := a.begin(w, r, &req)
	if !ok {
		return
	}
	in, par := &req.Inputs, &req.Parameters
	lim := ms.m.Backend.Limits()
	var aerr *apiError
	switch {
	case lim.EmbeddingDim == 0:
		aerr = noEmbeddings(ms, lim)
	case in.SourceSentence == nil || *in.SourceSentence == "":
		aerr = invalid("inputs.source_sentence", "inputs.source_sentence must be a non-empty string")
	case len(in.Sentences) == 0:
		aerr = invalid("inputs.sentences", "inputs.sentences must be a non-empty list of strings")
	case len(in.Sentences) >= MaxEmbeddingInputs:
		aerr = invalid("inputs.sentences", "%d sentences exceed the limit of %d per request", len(in.Sentences), MaxEmbeddingInputs-1)
	default:
		aerr = teiTruncation(par.TruncationDirection, par.PromptName)
	}
	for i, s := range in.Sentences {
		if aerr == nil && s == "" {
			aerr = invalid("inputs.sentences", "inputs.sentences[%d] is empty", i)
		}
	}
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	ins := textInputs(append([]string{*in.SourceSentence}, in.Sentences...))
	vecs, run, _, ok := a.embedEach(w, r, ms, start, ins, engine.EmbedOptions{Truncate: par.Truncate}, nil, true)
	if !ok {
		return
	}
	defer run.done()
	writeJSON(w, http.StatusOK, cosines(vecs[0], vecs[1:]))
}

// cosines is the cosine similarity of the unit vector src to each unit
// vector of vs: their dot product, summed in float64 (a zero vector's
// similarity is 0).
func cosines(src []float32, vs [][]float32) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		s := 0.0
		for j, x := range v {
			s += float64(x) * float64(src[j])
		}
		out[i] = s
	}
	return out
}

// teiRerankResult is one text's entry of TEI's rerank reply.
type teiRerankResult struct {
	Index int     `json:"index"`
	Score float64 `json:"score"`
	Text  *string `json:"text,omitempty"`
}
