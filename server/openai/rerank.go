package openai

import (
	"cmp"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"oengine/engine"
	"oengine/server"
)

// RouteRerank is the route label of POST /v1/rerank (served also as
// /rerank and /v2/rerank, the paths of llama.cpp's and Cohere's clients).
const RouteRerank = "/v1/rerank"

// rerankRequest is POST /v1/rerank (docs/api.md, "Reranking"), the
// request Jina's and Cohere's rerank APIs share.
type rerankRequest struct {
	Model           string            `json:"model"`
	Query           *string           `json:"query"`
	Documents       []json.RawMessage `json:"documents"`
	TopN            *int              `json:"top_n"`
	ReturnDocuments bool              `json:"return_documents"`
	// RawScores (oengine, as Hugging Face's text-embeddings-inference):
	// the relevance logits instead of their sigmoid.
	RawScores bool `json:"raw_scores"`
	// Truncate (oengine, as text-embeddings-inference): a pair longer
	// than the model takes keeps the query and the longest prefix of the
	// document that fits instead of being refused.
	Truncate bool `json:"truncate"`
	// Texts, ReturnText and TruncationDirection: text-embeddings-inference's
	// form of the request (texts instead of documents), answered in its
	// form: a bare list of {index, score, text}, the most relevant first.
	Texts               []string `json:"texts"`
	ReturnText          bool     `json:"return_text"`
	TruncationDirection string   `json:"truncation_direction"`
}

func (e *rerankRequest) modelName() string { return e.Model }

// rerankResult is one document's entry of the response.
type rerankResult struct {
	Index          int           `json:"index"`
	RelevanceScore float64       `json:"relevance_score"`
	Document       *rerankDocOut `json:"document,omitempty"`
}

type rerankDocOut struct {
	Text string `json:"text"`
}

// rerank serves POST /v1/rerank: each document is paired with the query
// (the file's rerank template, as Qwen3-Reranker's, else the vocabulary's
// pair form: [CLS] query [SEP] document [SEP] ...) and scored by the
// model's classification head (engine.PoolingRank); the results come
// sorted by relevance, the most relevant first.
func (a *api) rerank(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req rerankRequest
	ms, ok := a.begin(w, r, &req)
	if !ok {
		return
	}
	tei := req.Texts != nil && req.Documents == nil
	var docs []string
	var aerr *apiError
	if tei {
		w = teiWriter{w}
		if docs, aerr = rerankTexts(req.Texts); aerr == nil {
			aerr = teiTruncation(req.TruncationDirection, nil)
		}
	} else {
		docs, aerr = rerankDocuments(req.Documents)
	}
	lim := ms.m.Backend.Limits()
	switch {
	case aerr != nil:
	case lim.RankOutputs == 0:
		aerr = unsupported("model", "model %q has no classification head: it ranks nothing (a reranker's GGUF has one: a cross-encoder's, or Qwen3-Reranker's)", ms.m.Name)
	case req.Query == nil || *req.Query == "":
		aerr = invalid("query", "query must be a non-empty string")
	case req.TopN != nil && *req.TopN < 1:
		aerr = invalid("top_n", "top_n must be at least 1, got %d", *req.TopN)
	}
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	id := requestID(r, "rerank-")
	p := server.PrincipalFrom(r.Context())
	results := make([]rerankResult, len(docs))
	build := func(i int) engine.Request {
		return engine.Request{ID: p.Scope(id + "-" + strconv.Itoa(i)), Prompt: *req.Query,
			Embed: &engine.EmbedOptions{Pooling: engine.PoolingRank, Pair: docs[i], Truncate: req.Truncate}}
	}
	take := func(i int, scores []float32) *apiError {
		if len(scores) == 0 {
			return errorf(http.StatusInternalServerError, "internal_error", "", "no score for document %d", i)
		}
		s := float64(scores[0])
		if !req.RawScores {
			s = 1 / (1 + math.Exp(-s))
		}
		results[i] = rerankResult{Index: i, RelevanceScore: s}
		if req.ReturnDocuments {
			results[i].Document = &rerankDocOut{Text: docs[i]}
		}
		return nil
	}
	// A causal reranker's pairs share the prompt up to the document: the
	// first computes it and the others take it from the prefix cache (an
	// encoder's tokens see the document, so nothing is shared).
	run, ok := a.runEmbeds(w, r, ms, RouteRerank, id, start, len(docs), !lim.EmbeddingsOnly, build, take)
	if !ok {
		return
	}
	defer run.done()
	slices.SortStableFunc(results, func(x, y rerankResult) int { return cmp.Compare(y.RelevanceScore, x.RelevanceScore) })
	if req.TopN != nil && *req.TopN < len(results) {
		results = results[:*req.TopN]
	}
	run.rm.Done(time.Now())
	if tei {
		out := make([]teiRerankResult, len(results))
		for i, res := range results {
			out[i] = teiRerankResult{Index: res.Index, Score: res.RelevanceScore}
			if req.ReturnText {
				out[i].Text = &docs[res.Index]
			}
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "object": "list", "model": ms.m.Name, "results": results,
		"usage": map[string]any{"prompt_tokens": run.promptTokens, "total_tokens": run.promptTokens,
			"prompt_tokens_details": map[string]int{"cached_tokens": run.cachedTokens}},
	})
}

// rerankTexts checks TEI's texts as rerankDocuments checks documents.
func rerankTexts(texts []string) ([]string, *apiError) {
	if len(texts) == 0 {
		return nil, invalid("texts", "texts must be a non-empty list")
	}
	return texts, inputsCheck("texts", "texts", textInputs(texts))
}

// rerankDocuments reads the documents: strings, or objects with a "text"
// string (Jina's and Cohere's older form), at least one and at most
// MaxEmbeddingInputs, none empty.
func rerankDocuments(raw []json.RawMessage) ([]string, *apiError) {
	switch {
	case len(raw) == 0:
		return nil, invalid("documents", "documents must be a non-empty list")
	case len(raw) > MaxEmbeddingInputs:
		return nil, invalid("documents", "%d documents exceed the limit of %d per request", len(raw), MaxEmbeddingInputs)
	}
	docs := make([]string, len(raw))
	for i, d := range raw {
		var obj struct {
			Text *string `json:"text"`
		}
		switch {
		case json.Unmarshal(d, &docs[i]) == nil:
		case json.Unmarshal(d, &obj) == nil && obj.Text != nil:
			docs[i] = *obj.Text
		default:
			return nil, invalid("documents", "documents[%d] must be a string or an object with a text string", i)
		}
		if docs[i] == "" {
			return nil, invalid("documents", "documents[%d] is empty", i)
		}
	}
	return docs, nil
}
