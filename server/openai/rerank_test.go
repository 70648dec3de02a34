package openai

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"oengine/bench"
	"oengine/engine"
	pb "oengine/proto/openengine/v1"
	"oengine/server"
)

const rerankModel = "../../engine/testdata/embed/tiny-bert-rerank-f16.gguf"

type rerankReply struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Results []struct {
		Index          int     `json:"index"`
		RelevanceScore float64 `json:"relevance_score"`
		Document       *struct {
			Text string `json:"text"`
		} `json:"document"`
	} `json:"results"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// post sends body to path and returns the status and the raw reply.
func (h *harness) post(t *testing.T, path, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(h.base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// engineScore is the harness engine's own relevance logit of a pair and
// the pair's tokens.
func (h *harness) engineScore(t *testing.T, query, doc string) (float64, int) {
	t.Helper()
	ev := h.engineDone(t, engine.Request{Prompt: query, Embed: &engine.EmbedOptions{Pooling: engine.PoolingRank, Pair: doc}})
	return float64(ev.Embedding[0]), ev.Usage.PromptTokens
}

// TestRerank: POST /v1/rerank (and /rerank, /v2/rerank) scores every
// document against the query with the reranker's head, the engine's
// logits through a sigmoid (raw with raw_scores), sorted most relevant
// first, cut to top_n, with the documents when asked; usage counts every
// pair's tokens.
func TestRerank(t *testing.T) {
	h := startHarness(t, harnessOpts{modelFile: rerankModel})
	q := "What is the capital of France?"
	docs := []string{"Paris is the capital and largest city of France.", "The Eiffel Tower was completed in 1889.",
		"Photosynthesis converts light energy into chemical energy."}
	logits, tokens := make([]float64, len(docs)), 0
	for i, d := range docs {
		var n int
		logits[i], n = h.engineScore(t, q, d)
		tokens += n
	}
	body := `{"model":"tiny","query":` + jsonString(q) + `,"documents":[` + jsonString(docs[0]) + `,{"text":` + jsonString(docs[1]) + `},` +
		jsonString(docs[2]) + `],"top_n":2,"return_documents":true}`
	for _, path := range []string{"/v1/rerank", "/rerank", "/v2/rerank"} {
		status, raw := h.post(t, path, body)
		var rep rerankReply
		if err := json.Unmarshal(raw, &rep); err != nil || status != 200 {
			t.Fatalf("%s: status %d, %s (%v)", path, status, raw, err)
		}
		if rep.Model != "tiny" || rep.Object != "list" || !strings.HasPrefix(rep.ID, "rerank-") || len(rep.Results) != 2 ||
			rep.Usage.PromptTokens != tokens || rep.Usage.TotalTokens != tokens {
			t.Fatalf("%s: reply %s (want %d tokens)", path, raw, tokens)
		}
		best, second := order(logits)
		for k, want := range []int{best, second} {
			r := rep.Results[k]
			if r.Index != want || math.Abs(r.RelevanceScore-1/(1+math.Exp(-logits[want]))) > 1e-6 ||
				r.Document == nil || r.Document.Text != docs[want] {
				t.Fatalf("%s: result %d is %+v, want document %d (logit %g)", path, k, r, want, logits[want])
			}
		}
	}
	status, raw := h.post(t, "/v1/rerank", `{"model":"tiny","query":`+jsonString(q)+`,"documents":[`+jsonString(docs[2])+`],"raw_scores":true}`)
	var rep rerankReply
	if err := json.Unmarshal(raw, &rep); err != nil || status != 200 || len(rep.Results) != 1 ||
		math.Abs(rep.Results[0].RelevanceScore-logits[2]) > 1e-6 || rep.Results[0].Document != nil {
		t.Fatalf("raw scores: status %d, %s", status, raw)
	}
	h.idle(t, false)
}

// order returns the indices of the largest and second largest values.
func order(v []float64) (int, int) {
	best, second := 0, -1
	for i := 1; i < len(v); i++ {
		switch {
		case v[i] > v[best]:
			best, second = i, best
		case second < 0 || v[i] > v[second]:
			second = i
		}
	}
	return best, second
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestRerankRefused: bad requests are 400s naming the field, before
// anything runs; a model without a classification head answers 400
// unsupported_feature; rank pooling is not an embedding.
func TestRerankRefused(t *testing.T) {
	h := startHarness(t, harnessOpts{modelFile: rerankModel})
	long := strings.Repeat("word ", 600)
	for _, tc := range []struct {
		body   string
		status int
		param  string
	}{
		{`{"model":"tiny","documents":["a"]}`, 400, "query"},
		{`{"model":"tiny","query":"","documents":["a"]}`, 400, "query"},
		{`{"model":"tiny","query":"q"}`, 400, "documents"},
		{`{"model":"tiny","query":"q","documents":[]}`, 400, "documents"},
		{`{"model":"tiny","query":"q","documents":["a",""]}`, 400, "documents"},
		{`{"model":"tiny","query":"q","documents":[7]}`, 400, "documents"},
		{`{"model":"tiny","query":"q","documents":["a"],"top_n":0}`, 400, "top_n"},
		{`{"model":"tiny","query":"q","documents":[` + strings.TrimSuffix(strings.Repeat(`"a",`, MaxEmbeddingInputs+1), ",") + `]}`, 400, "documents"},
		{`{"model":"nope","query":"q","documents":["a"]}`, 404, "model"},
		{`{"model":"tiny","query":"q","documents":["` + long + `"]}`, 400, ""},
	} {
		status, raw := h.post(t, "/v1/rerank", tc.body)
		var eb errorBody
		if err := json.Unmarshal(raw, &eb); err != nil || status != tc.status || eb.Error.Message == "" {
			t.Errorf("%.60s: status %d, %s", tc.body, status, raw)
			continue
		}
		if tc.param != "" && (eb.Error.Param == nil || *eb.Error.Param != tc.param) {
			t.Errorf("%.60s: param %v (%s)", tc.body, eb.Error.Param, eb.Error.Message)
		}
		if tc.param == "" && eb.Error.Code != "context_length_exceeded" {
			t.Errorf("a pair over the context: %s", raw)
		}
	}
	status, raw := h.post(t, "/v1/embeddings", `{"model":"tiny","input":"a","pooling":"rank"}`)
	if status != 400 || !strings.Contains(string(raw), "/v1/rerank") {
		t.Errorf("embeddings with rank pooling: %d %s", status, raw)
	}
	h.idle(t, false)

	plain := startHarness(t, harnessOpts{modelFile: "../../engine/testdata/embed/tiny-bert-f16.gguf"})
	status, raw = plain.post(t, "/v1/rerank", `{"model":"tiny","query":"q","documents":["a"]}`)
	var eb errorBody
	if err := json.Unmarshal(raw, &eb); err != nil || status != 400 || eb.Error.Code != "unsupported_feature" {
		t.Fatalf("a model without a head: %d %s", status, raw)
	}
}

// TestRerankCohereSDK runs testdata/rerank.mjs, a rerank with Cohere's
// official npm SDK (cohere-ai, its v2 client), against a live server
// with a reranker: the SDK's request is served and its parser takes the
// reply, and the order is the engine's. It needs node and
// testdata/node_modules (npm ci there); without them it skips, unless
// OENGINE_REQUIRE_NODE=1 (CI) makes it fail.
func TestRerankCohereSDK(t *testing.T) {
	requireNode(t, "cohere-ai")
	h := startHarness(t, harnessOpts{modelFile: rerankModel})
	out := runNode(t, "rerank.mjs", h.base, h.name)
	var results []struct {
		Index          int     `json:"index"`
		RelevanceScore float64 `json:"relevanceScore"`
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &results); err != nil || len(results) != 2 {
		t.Fatalf("rerank.mjs printed %s (%v)", out, err)
	}
	q := "What is the capital of France?"
	docs := []string{"Paris is the capital and largest city of France.", "The Eiffel Tower was completed in 1889.",
		"Photosynthesis converts light energy into chemical energy."}
	logits := make([]float64, len(docs))
	for i, d := range docs {
		logits[i], _ = h.engineScore(t, q, d)
	}
	best, second := order(logits)
	if results[0].Index != best || results[1].Index != second ||
		math.Abs(results[0].RelevanceScore-1/(1+math.Exp(-logits[best]))) > 1e-6 {
		t.Fatalf("SDK results %+v, engine logits %v", results, logits)
	}
	h.idle(t, false)
}

// rerankAs posts a rerank as the client holding key, with a request id.
func (h *harness) rerankAs(ctx context.Context, key, id, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/v1/rerank", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestRerankClientGone: a client that leaves while its pairs run cancels
// them all (the rest never start): the engine ends idle with every page
// back, and the request counts as failed on the rerank route, not as a
// rejection.
func TestRerankClientGone(t *testing.T) {
	h := startHarness(t, harnessOpts{modelFile: rerankModel, maxWaiting: 64})
	release := h.model.hold()
	docs := make([]string, 40)
	for i := range docs {
		docs[i] = jsonString(strings.Repeat("gone ", 20+i))
	}
	body := `{"model":"tiny","query":"q","documents":[` + strings.Join(docs, ",") + `]}`
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := h.rerankAs(ctx, "", "", body)
		done <- err
	}()
	eventually(t, "pairs admitted", func() bool { return h.e.Stats().Requests >= embedWindow })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled rerank succeeded")
	}
	// The server has seen the client leave once it counts the failure;
	// only then may the held pairs finish (before, a finished pair would
	// let the request refill its window, on a loaded machine several
	// times before the departure is noticed).
	eventually(t, "failure counted", func() bool {
		body := metricsText(t, h)
		return strings.Contains(body, `oengine:request_failure_total{code="CANCELLED",model_name="tiny",route="/v1/rerank"} 1`) &&
			!strings.Contains(body, `oengine:request_rejected_total{reason="CANCELLED"}`)
	})
	release()
	eventually(t, "pairs cancelled", func() bool { l := h.e.Load(); return l.Running+l.Waiting == 0 })
	if n := h.e.Stats().Requests; n > embedWindow {
		t.Fatalf("%d pairs reached the engine, at most the window of %d should", n, embedWindow)
	}
	h.idle(t, false)
}

// TestRerankAbortIsolation: a rerank's pairs are its client's: another
// API key cannot abort one by its id (the request then completes), its
// owner can.
func TestRerankAbortIsolation(t *testing.T) {
	h := startHarness(t, harnessOpts{modelFile: rerankModel})
	abort := h.twoKeys(t)
	for _, tc := range []struct {
		key     string
		aborted bool
	}{{"bob-secret-0123456789", false}, {"alice-secret-0123456789", true}} {
		release := h.model.hold()
		defer release() // a failed check must not leave the model held
		before := h.e.Stats().Requests
		type reply struct {
			status int
			body   []byte
			err    error
		}
		done := make(chan reply, 1)
		go func() {
			s, b, err := h.rerankAs(context.Background(), "alice-secret-0123456789", "rr-shared",
				`{"model":"tiny","query":"q","documents":["first","second"]}`)
			done <- reply{s, b, err}
		}()
		eventually(t, "pairs admitted", func() bool { return h.e.Stats().Requests >= before+2 })
		if got := abort(tc.key, "rr-shared-1"); got != tc.aborted {
			t.Fatalf("%s aborting alice's pair: %v, want %v", tc.key, got, tc.aborted)
		}
		release()
		// Bob's attempt leaves the rerank whole; alice's may land after
		// the held step finished, so only its status is asserted.
		if r := <-done; !tc.aborted && (r.err != nil || r.status != 200) {
			t.Fatalf("after %s's abort attempt, alice's rerank: %d %s %v", tc.key, r.status, r.body, r.err)
		}
		h.idle(t, false)
	}
}

// TestRerankQwen3: a causal reranker (Qwen3-Reranker's form: its prompt
// template, the last token's state through the "yes" and "no" rows)
// served through /v1/rerank gives llama.cpp's probability of "yes" as the
// relevance score, sorts by it, computes the prompt the pairs of a request
// share once (usage's cached tokens), and still generates (it is a
// decoder).
func TestRerankQwen3(t *testing.T) {
	h := startHarness(t, harnessOpts{modelFile: "../../engine/testdata/embed/tiny-qwen3-rerank-f16.gguf"})
	raw, err := os.ReadFile("../../engine/testdata/embed/tiny-qwen3-rerank-f16.rank.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Prompts []struct {
			Prompt    string    `json:"prompt"`
			Embedding []float64 `json:"embedding"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil || len(ref.Prompts) != 7 {
		t.Fatalf("reference: %v, %d pairs", err, len(ref.Prompts))
	}
	// Pairs 0 and 1 share their query: one request ranks both.
	q, d0, _ := strings.Cut(ref.Prompts[0].Prompt, "\t")
	_, d1, _ := strings.Cut(ref.Prompts[1].Prompt, "\t")
	status, body := h.post(t, "/v1/rerank", `{"model":"tiny","query":`+jsonString(q)+`,"documents":[`+jsonString(d0)+`,`+jsonString(d1)+`]}`)
	var rep rerankReply
	if err := json.Unmarshal(body, &rep); err != nil || status != 200 || len(rep.Results) != 2 {
		t.Fatalf("status %d, %s", status, body)
	}
	// The first pair computes the shared prompt up to the document; the
	// second takes it from the prefix cache.
	if c := rep.Usage.PromptTokensDetails.CachedTokens; c < 200 || c >= rep.Usage.PromptTokens/2 {
		t.Fatalf("%d of %d prompt tokens cached: the second pair did not reuse the first's prefix", c, rep.Usage.PromptTokens)
	}
	want := []float64{ref.Prompts[0].Embedding[0], ref.Prompts[1].Embedding[0]}
	best, _ := order(want)
	for k, r := range rep.Results {
		if k == 0 && r.Index != best || math.Abs(r.RelevanceScore-want[r.Index]) > 0.01 {
			t.Fatalf("result %d: %+v, llama.cpp's P(yes) %v", k, r, want)
		}
	}
	for i, p := range ref.Prompts[2:] {
		q, d, _ := strings.Cut(p.Prompt, "\t")
		status, body := h.post(t, "/v1/rerank", `{"model":"tiny","query":`+jsonString(q)+`,"documents":[`+jsonString(d)+`]}`)
		var rep rerankReply
		if err := json.Unmarshal(body, &rep); err != nil || status != 200 || len(rep.Results) != 1 ||
			math.Abs(rep.Results[0].RelevanceScore-p.Embedding[0]) > 0.01 {
			t.Fatalf("pair %d: status %d, %s; llama.cpp's P(yes) %g", i+2, status, body, p.Embedding[0])
		}
	}
	// A document over the context (2048) is refused, or cut with truncate.
	long := strings.Repeat("Paris is the capital of France. ", 120)
	status, body = h.post(t, "/v1/rerank", `{"model":"tiny","query":"capital?","documents":[`+jsonString(long)+`]}`)
	if status != 400 || !strings.Contains(string(body), "context_length_exceeded") {
		t.Fatalf("a pair over the context: status %d, %s", status, body)
	}
	status, body = h.post(t, "/v1/rerank", `{"model":"tiny","query":"capital?","documents":[`+jsonString(long)+`],"truncate":true}`)
	rep = rerankReply{}
	if err := json.Unmarshal(body, &rep); err != nil || status != 200 || len(rep.Results) != 1 || rep.Usage.PromptTokens > 2048 || rep.Usage.PromptTokens < 2040 {
		t.Fatalf("a truncated pair: status %d, %s", status, body)
	}
	status, body = h.post(t, "/v1/completions", `{"model":"tiny","prompt":"hello","max_tokens":4,"temperature":0}`)
	if status != 200 || !strings.Contains(string(body), `"completion_tokens":4`) {
		t.Fatalf("completion on the reranker: status %d, %s", status, body)
	}
	h.idle(t, false)
}

// TestBenchRerankTarget: the load generator's rerank target (bench serve
// --target openai-rerank) runs against this route: every request has its
// documents scored, nothing is generated, and the report carries the
// input throughput (every pair's tokens).
func TestBenchRerankTarget(t *testing.T) {
	h := startHarness(t, harnessOpts{modelFile: rerankModel})
	tgt := bench.NewOpenAIRerank(h.base, h.name, 4)
	defer tgt.Close()
	in, _ := bench.ParseDist("200") // the tokens of a request's pairs, calibrated
	reps, err := bench.RunServe(ctxT(t), tgt, bench.ServeConfig{Scenario: "generate",
		Workload: bench.Workload{Input: in, Output: in, Seed: 1},
		Load:     bench.Load{Concurrency: 3, Requests: 9, Seed: 1}, RequestTimeout: time.Minute}, bench.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	if len(reps) != 1 || r.Target != "openai-rerank" || r.Succeeded != 9 || r.OutTokens != 0 || r.InputMismatches != 0 ||
		r.InTokens < 9*180 || r.InTokens > 9*220 || r.OutputAsked != "none" || !(r.InTokPerS > 0) || r.E2Ems.P50 <= 0 || bench.CheckErrorRate(reps, 0) != nil {
		t.Fatalf("report %+v", r)
	}
	h.idle(t, false)
}

// twoKeys gives the harness the API keys alice-secret-0123456789 and
// bob-secret-0123456789 and returns abort, which asks Control.Abort, as
// key, for the request id and reports whether it was aborted.
func (h *harness) twoKeys(t *testing.T) (abort func(key, id string) bool) {
	t.Helper()
	keys, err := server.NewKeys([]server.Key{{Name: "alice", Secret: "alice-secret-0123456789"}, {Name: "bob", Secret: "bob-secret-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	h.s.SetKeys(keys)
	conn, err := grpc.NewClient(h.s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return func(key, id string) bool {
		ctx := metadata.AppendToOutgoingContext(ctxT(t), "authorization", "Bearer "+key)
		resp, err := pb.NewControlClient(conn).Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: id}})
		return err == nil && resp.GetStatus() == pb.AbortStatus_ABORT_STATUS_ABORTED
	}
}
