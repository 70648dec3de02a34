package openai

import (
	"net/http"
	"slices"
	"time"

	"oengine/engine"
)

// cohereEmbedRequest is Cohere's v2 embed request (POST /v2/embed), the
// one its SDKs send: texts, model, input_type, embedding_types, truncate,
// output_dimension.
type cohereEmbedRequest struct {
	Model          string   `json:"model"`
	Texts          []string `json:"texts"`
	InputType      string   `json:"input_type"`
	EmbeddingTypes []string `json:"embedding_types"`
	// Truncate: "END" (the default, as Cohere's) keeps each text's longest
	// prefix that fits, "NONE" refuses a text over the model's limit.
	Truncate        string `json:"truncate"`
	OutputDimension *int   `json:"output_dimension"`
}

func (e *cohereEmbedRequest) modelName() string { return e.Model }

// cohereEmbed serves POST /v2/embed: each text pooled as /v1/embeddings
// pools it (the server's default pooling), cut to output_dimension and
// scaled to unit length, in Cohere's "embeddings_by_type" reply with float
// vectors. input_type is checked, not used: the model's prompts are the
// client's (docs/api.md, "Embeddings").
func (a *api) cohereEmbed(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req cohereEmbedRequest
	ms, ok := a.begin(w, r, &req)
	if !ok {
		return
	}
	lim := ms.m.Backend.Limits()
	ins := textInputs(req.Texts)
	ierr := inputsCheck("texts", "texts", ins)
	var aerr *apiError
	switch {
	case lim.EmbeddingDim == 0:
		aerr = noEmbeddings(ms, lim)
	case len(req.Texts) == 0:
		aerr = invalid("texts", "texts must be a non-empty list of strings (images are not supported)")
	case ierr != nil:
		aerr = ierr
	case req.InputType == "image":
		aerr = unsupported("input_type", "input_type \"image\": this model embeds text only")
	case req.InputType != "" && !slices.Contains([]string{"search_document", "search_query", "classification", "clustering"}, req.InputType):
		aerr = invalid("input_type", "input_type %q: want search_document, search_query, classification or clustering", req.InputType)
	case req.Truncate != "" && req.Truncate != "END" && req.Truncate != "NONE":
		aerr = unsupported("truncate", "truncate %q: want END (keep each text's beginning) or NONE", req.Truncate)
	default:
		aerr = badDimensions("output_dimension", req.OutputDimension, lim)
	}
	for _, t := range req.EmbeddingTypes {
		if aerr == nil && t != "float" {
			aerr = unsupported("embedding_types", "embedding type %q: only \"float\" is served", t)
		}
	}
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	vecs, run, id, ok := a.embedEach(w, r, ms, start, ins, engine.EmbedOptions{Truncate: req.Truncate != "NONE"}, req.OutputDimension, true)
	if !ok {
		return
	}
	defer run.done()
	writeJSON(w, http.StatusOK, map[string]any{
		"response_type": "embeddings_by_type", "id": id,
		"embeddings": map[string]any{"float": vecs}, "texts": req.Texts,
		"meta": map[string]any{"api_version": map[string]string{"version": "2"},
			"billed_units": map[string]int{"input_tokens": run.promptTokens}},
	})
}
