package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"oengine/bench"
	"oengine/engine"
	"oengine/model/tokenizer"
)

// engineEmbedding is the harness engine's own pooled vector of prompt.
func (h *harness) engineEmbedding(t *testing.T, prompt string, p engine.Pooling) []float32 {
	t.Helper()
	return h.engineDone(t, engine.Request{Prompt: prompt, Embed: &engine.EmbedOptions{Pooling: p}}).Embedding
}

// engineDone runs an embedding request on the harness engine itself and
// returns its terminal event (an error event ends t).
func (h *harness) engineDone(t *testing.T, r engine.Request) engine.Event {
	t.Helper()
	st, err := h.e.Submit(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := st.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case engine.EventDone:
			return ev
		case engine.EventError:
			t.Fatal(ev.Err)
		}
	}
}

// unit returns v scaled to length 1, as the route computes it.
func unit(v []float32) []float32 {
	out := append([]float32(nil), v...)
	unitLength(out)
	return out
}

// sameFloats reports whether the SDK's float64 values are exactly want's
// float32 values.
func sameFloats(got []float64, want []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	for i, g := range got {
		if float32(g) != want[i] {
			return fmt.Errorf("value %d: %v, want %v", i, g, want[i])
		}
	}
	return nil
}

// TestEmbeddingsSDK drives POST /v1/embeddings with the official OpenAI Go
// SDK: a list of inputs comes back in order, unit length, equal to the
// engine's pooled vectors; dimensions truncates before scaling; token-id
// inputs equal their text; the pooling and normalize extensions apply;
// usage counts the prompt tokens.
func TestEmbeddingsSDK(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	c := h.client()
	ctx := ctxT(t)
	texts := []string{"The capital of France is", "Once upon a time, there was a little girl named Lily.", "a"}
	resp, err := c.Embeddings.New(ctx, oa.EmbeddingNewParams{Model: "tiny",
		Input: oa.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}})
	if err != nil {
		t.Fatal(err)
	}
	wantTokens := 0
	for _, s := range texts {
		wantTokens += len(h.tok.Encode(s, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true}))
	}
	if resp.Object != "list" || len(resp.Data) != len(texts) || resp.Model != "tiny" ||
		resp.Usage.PromptTokens != int64(wantTokens) || resp.Usage.TotalTokens != int64(wantTokens) {
		t.Fatalf("response %d items, model %q, usage %+v (want %d tokens)", len(resp.Data), resp.Model, resp.Usage, wantTokens)
	}
	raw := make([][]float32, len(texts))
	for i, d := range resp.Data {
		raw[i] = h.engineEmbedding(t, texts[i], engine.PoolingDefault)
		if d.Index != int64(i) || d.Object != "embedding" {
			t.Fatalf("item %d: index %d object %q", i, d.Index, d.Object)
		}
		if err := sameFloats(d.Embedding, unit(raw[i])); err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
		n := 0.0
		for _, v := range d.Embedding {
			n += v * v
		}
		if math.Abs(n-1) > 1e-5 {
			t.Fatalf("input %d: squared length %v", i, n)
		}
	}
	// The inputs differ, so their vectors do.
	if sameFloats(resp.Data[0].Embedding, unit(raw[1])) == nil {
		t.Fatal("two inputs gave one vector")
	}

	// dimensions: the first 64 values, scaled to unit length.
	r64, err := c.Embeddings.New(ctx, oa.EmbeddingNewParams{Model: "tiny-alias", Dimensions: oa.Int(64),
		Input: oa.EmbeddingNewParamsInputUnion{OfString: oa.String(texts[0])}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sameFloats(r64.Data[0].Embedding, unit(raw[0][:64])); err != nil {
		t.Fatalf("dimensions 64: %v", err)
	}

	// Token ids, one list and a list of lists.
	ids := h.tok.Encode(texts[0], tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	ids64 := make([]int64, len(ids))
	for i, id := range ids {
		ids64[i] = int64(id)
	}
	rIDs, err := c.Embeddings.New(ctx, oa.EmbeddingNewParams{Model: "tiny",
		Input: oa.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{ids64, ids64}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := sameFloats(rIDs.Data[i].Embedding, unit(raw[0])); err != nil {
			t.Fatalf("token ids %d: %v", i, err)
		}
	}

	// oengine's extensions: mean pooling, and the raw vector.
	rMean, err := c.Embeddings.New(ctx, oa.EmbeddingNewParams{Model: "tiny",
		Input: oa.EmbeddingNewParamsInputUnion{OfString: oa.String(texts[1])}},
		option.WithJSONSet("pooling", "mean"), option.WithJSONSet("normalize", false))
	if err != nil {
		t.Fatal(err)
	}
	if err := sameFloats(rMean.Data[0].Embedding, h.engineEmbedding(t, texts[1], engine.PoolingMean)); err != nil {
		t.Fatalf("mean pooling, not normalized: %v", err)
	}

	// The request metrics count each input under the route.
	body := metricsText(t, h)
	for _, want := range []string{
		`oengine:request_success_total{finished_reason="stop",model_name="tiny",route="/v1/embeddings"} 7`,
		`oengine:e2e_request_latency_seconds_count{model_name="tiny",route="/v1/embeddings"} 4`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	h.idle(t, false)
}

// TestEmbeddingsBase64: encoding_format base64 carries the float vector's
// little-endian float32 bytes.
func TestEmbeddingsBase64(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	get := func(format string) []byte {
		body := `{"model":"tiny","input":["hello world","again"],"encoding_format":"` + format + `"}`
		resp, err := http.Post(h.base+"/v1/embeddings", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Request-Id") == "" {
			t.Fatalf("%s: status %d %q: %s", format, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		return b
	}
	var fl struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	var b64 struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(get("float"), &fl); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(get("base64"), &b64); err != nil {
		t.Fatal(err)
	}
	if len(fl.Data) != 2 || len(b64.Data) != 2 {
		t.Fatalf("%d and %d items", len(fl.Data), len(b64.Data))
	}
	for i := range 2 {
		raw, err := base64.StdEncoding.DecodeString(b64.Data[i].Embedding)
		if err != nil || len(raw) != 4*len(fl.Data[i].Embedding) {
			t.Fatalf("item %d: %d bytes, %v", i, len(raw), err)
		}
		for j, want := range fl.Data[i].Embedding {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])); got != want {
				t.Fatalf("item %d value %d: base64 %v, float %v", i, j, got, want)
			}
		}
	}
	h.idle(t, false)
}

// TestEmbeddingsMany: more inputs than run at once come back in order, each
// equal to its vector computed alone.
func TestEmbeddingsMany(t *testing.T) {
	h := startHarness(t, harnessOpts{maxWaiting: 64})
	var texts []string
	for i := range 3*embedWindow + 5 {
		texts = append(texts, strings.Repeat("word ", 1+i%9)+fmt.Sprint(i))
	}
	resp, err := embed(h.client(), ctxT(t), oa.EmbeddingNewParams{Model: "tiny",
		Input: oa.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != len(texts) {
		t.Fatalf("%d items for %d inputs", len(resp.Data), len(texts))
	}
	for i, d := range resp.Data {
		if err := sameFloats(d.Embedding, unit(h.engineEmbedding(t, texts[i], engine.PoolingDefault))); err != nil || d.Index != int64(i) {
			t.Fatalf("input %d (index %d): %v", i, d.Index, err)
		}
	}
	h.idle(t, false)
}

// TestEmbeddingsQueueFull: the engine's queue limit refuses a request
// whose first input finds the queue full (429 overloaded), never one
// already accepted: a request of more inputs than the queue holds, sent
// beside other clients' requests, returns every vector.
func TestEmbeddingsQueueFull(t *testing.T) {
	h := startHarness(t, harnessOpts{maxRunning: 1, maxWaiting: 1})
	texts := make([]string, 3*embedWindow)
	for i := range texts {
		texts[i] = strings.Repeat("queue ", 1+i%7) + fmt.Sprint(i)
	}
	type result struct {
		status int
		body   []byte
	}
	post := func(input any) result {
		body, _ := json.Marshal(map[string]any{"model": "tiny", "input": input})
		resp, err := http.Post(h.base+"/v1/embeddings", "application/json", bytes.NewReader(body))
		if err != nil {
			return result{0, []byte(err.Error())}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return result{resp.StatusCode, b}
	}
	type reply struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	const others = 4
	big := make(chan result, 1)
	small := make(chan result, others)
	admitted := h.e.Stats().Requests
	go func() { big <- post(texts) }()
	// The others start once its first input is accepted.
	eventually(t, "the first input accepted", func() bool { return h.e.Stats().Requests > admitted })
	for i := range others {
		go func() { small <- post(fmt.Sprintf("another client %d", i)) }()
	}
	r := <-big
	var rep reply
	if err := json.Unmarshal(r.body, &rep); err != nil || r.status != 200 || len(rep.Data) != len(texts) {
		t.Fatalf("the request of %d inputs: status %d, %.300s", len(texts), r.status, r.body)
	}
	for i, d := range rep.Data {
		if err := sameFloats(d.Embedding, unit(h.engineEmbedding(t, texts[i], engine.PoolingDefault))); err != nil || d.Index != i {
			t.Fatalf("input %d (index %d): %v", i, d.Index, err)
		}
	}
	for range others {
		// Another client's single input is either computed or refused whole.
		r := <-small
		var rep reply
		switch {
		case r.status == http.StatusTooManyRequests && strings.Contains(string(r.body), `"code":"overloaded"`):
		case r.status == 200 && json.Unmarshal(r.body, &rep) == nil && len(rep.Data) == 1:
		default:
			t.Fatalf("another client: status %d, %.300s", r.status, r.body)
		}
	}
	h.idle(t, false)
}

// TestEmbeddingsRefused: bad requests get 4xx with OpenAI's error body and
// the offending field, and leave nothing behind.
func TestEmbeddingsRefused(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	many := make([]string, MaxEmbeddingInputs+1)
	for i := range many {
		many[i] = "x"
	}
	manyJSON, _ := json.Marshal(many)
	long := strings.Repeat("hello ", h.e.Limits().ContextLen)
	for _, tc := range []struct {
		body   string
		status int
		param  string
	}{
		{`{"model":"tiny"}`, 400, "input"},
		{`{"model":"tiny","input":""}`, 400, "input"},
		{`{"model":"tiny","input":["a",""]}`, 400, "input"},
		{`{"model":"tiny","input":[]}`, 400, "input"},
		{`{"model":"tiny","input":[[]]}`, 400, "input"},
		{`{"model":"tiny","input":{"a":1}}`, 400, "input"},
		{`{"model":"tiny","input":` + string(manyJSON) + `}`, 400, "input"},
		{`{"model":"tiny","input":"a","encoding_format":"int8"}`, 400, "encoding_format"},
		{`{"model":"tiny","input":"a","dimensions":0}`, 400, "dimensions"},
		{`{"model":"tiny","input":"a","dimensions":257}`, 400, "dimensions"},
		{`{"model":"tiny","input":"a","pooling":"max"}`, 400, "pooling"},
		{`{"model":"nope","input":"a"}`, 404, "model"},
		{`{"model":"tiny","input":[99999999]}`, 400, ""},
		{`{"model":"tiny","input":"` + long + `"}`, 400, ""},
		{`{"model":"tiny","input":"a"`, 400, ""},
	} {
		resp, err := http.Post(h.base+"/v1/embeddings", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var eb errorBody
		err = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		short := tc.body[:min(len(tc.body), 60)]
		if err != nil || resp.StatusCode != tc.status || eb.Error.Message == "" {
			t.Errorf("%s: status %d, body %+v, %v", short, resp.StatusCode, eb, err)
			continue
		}
		if tc.param != "" && (eb.Error.Param == nil || *eb.Error.Param != tc.param) {
			t.Errorf("%s: param %v, want %q (%s)", short, eb.Error.Param, tc.param, eb.Error.Message)
		}
	}
	// Through the SDK, an error is an *oa.Error with the status.
	_, err := embed(h.client(), ctxT(t), oa.EmbeddingNewParams{Model: "tiny", Dimensions: oa.Int(0),
		Input: oa.EmbeddingNewParamsInputUnion{OfString: oa.String("a")}})
	var apiErr *oa.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("SDK error %v", err)
	}
	h.idle(t, false)
}

// TestEmbeddingsClientGone: a client that leaves while its inputs run
// cancels them all; no page or request stays behind.
func TestEmbeddingsClientGone(t *testing.T) {
	h := startHarness(t, harnessOpts{maxWaiting: 64})
	release := h.model.hold()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		texts := make([]string, 40)
		for i := range texts {
			texts[i] = strings.Repeat("gone ", 20+i)
		}
		_, err := embed(h.client(), ctx, oa.EmbeddingNewParams{Model: "tiny",
			Input: oa.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}})
		done <- err
	}()
	eventually(t, "inputs admitted", func() bool { return h.e.Stats().Requests >= embedWindow })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled request succeeded")
	}
	release()
	eventually(t, "inputs cancelled", func() bool { l := h.e.Load(); return l.Running+l.Waiting == 0 })
	h.idle(t, false)
	// Accepted, then failed: counted as a failure, not as a rejection.
	eventually(t, "failure counted", func() bool {
		body := metricsText(t, h)
		return strings.Contains(body, `oengine:request_failure_total{code="CANCELLED",model_name="tiny",route="/v1/embeddings"} 1`) &&
			!strings.Contains(body, `oengine:request_rejected_total{reason="CANCELLED"}`)
	})
}

// metricsText is the server's /metrics page.
func metricsText(t *testing.T, h *harness) string {
	t.Helper()
	resp, err := http.Get(h.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

// embed is c.Embeddings.New on a client value.
func embed(c oa.Client, ctx context.Context, p oa.EmbeddingNewParams, opts ...option.RequestOption) (*oa.CreateEmbeddingResponse, error) {
	return c.Embeddings.New(ctx, p, opts...)
}

// runBench runs the load generator's generate scenario against tgt
// (24-token inputs, 8 output tokens, EOS ignored) and closes it.
func runBench(t *testing.T, tgt bench.Target, conc, requests int) []bench.Report {
	t.Helper()
	defer tgt.Close()
	in, _ := bench.ParseDist("24")
	out, _ := bench.ParseDist("8")
	reps, err := bench.RunServe(ctxT(t), tgt, bench.ServeConfig{Scenario: "generate",
		Workload: bench.Workload{Input: in, Output: out, Seed: 1, IgnoreEOS: true},
		Load:     bench.Load{Concurrency: conc, Requests: requests, Seed: 1}, RequestTimeout: time.Minute}, bench.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	return reps
}

// TestBenchEmbeddingsTarget: the load generator's embeddings target (bench
// serve --target openai-embeddings) runs against this route: every request
// succeeds with the input length asked, nothing is generated, and the
// report carries the input throughput.
func TestBenchEmbeddingsTarget(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	reps := runBench(t, bench.NewOpenAIEmbeddings(h.base, h.name), 3, 9)
	r := reps[0]
	if len(reps) != 1 || r.Target != "openai-embeddings" || r.Succeeded != 9 || r.OutTokens != 0 || r.InputMismatches != 0 || r.OutputMismatches != 0 ||
		r.InTokens < 9*23 || r.OutputAsked != "none" || !(r.InTokPerS > 0) || r.E2Ems.P50 <= 0 || bench.CheckErrorRate(reps, 0) != nil {
		t.Fatalf("report %+v", r)
	}
	h.idle(t, false)
}

// TestEmbeddingsAbortIsolation: with API keys, an embeddings request's
// inputs have the ids X-Request-Id-i in their owner's scope: the owner can
// abort one, another key cannot (the request completes).
func TestEmbeddingsAbortIsolation(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	abort := h.twoKeys(t)
	for _, tc := range []struct {
		key     string
		aborted bool
	}{{"bob-secret-0123456789", false}, {"alice-secret-0123456789", true}} {
		release := h.model.hold()
		defer release() // a failed check must not leave the model held
		before := h.e.Stats().Requests
		done := make(chan error, 1)
		go func() {
			alice := h.client(option.WithAPIKey("alice-secret-0123456789"), option.WithHeader("X-Request-Id", "emb-shared"))
			r, err := embed(alice, context.Background(), oa.EmbeddingNewParams{Model: "tiny",
				Input: oa.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"first", "second"}}})
			if err == nil && len(r.Data) != 2 {
				err = fmt.Errorf("%d vectors", len(r.Data))
			}
			done <- err
		}()
		eventually(t, "inputs admitted", func() bool { return h.e.Stats().Requests >= before+2 })
		if got := abort(tc.key, "emb-shared-1"); got != tc.aborted {
			t.Fatalf("%s aborting alice's input: %v, want %v", tc.key, got, tc.aborted)
		}
		release()
		// Bob's attempt leaves the request whole. Alice's abort may land
		// after the held step already finished both inputs, so only its
		// status is asserted: the ids are hers to name.
		if err := <-done; !tc.aborted && err != nil {
			t.Fatalf("after %s's abort attempt, alice's embeddings: %v", tc.key, err)
		}
		h.idle(t, false)
	}
}

// TestEncoderServed: a BERT-style encoder (engine/testdata/embed) serves
// /v1/embeddings through the official SDK, its vectors the engine's,
// normalized; a completion or chat request is a 400 unsupported_feature
// that names the reason, and the server stays idle and whole after it.
func TestEncoderServed(t *testing.T) {
	h := startHarness(t, harnessOpts{modelFile: "../../engine/testdata/embed/tiny-bert-f16.gguf"})
	c := h.client()
	ctx := ctxT(t)
	texts := []string{"The capital of France is", "Once upon a time, there was a little girl named Lily."}
	resp, err := c.Embeddings.New(ctx, oa.EmbeddingNewParams{Model: "tiny",
		Input: oa.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range resp.Data {
		if err := sameFloats(d.Embedding, unit(h.engineEmbedding(t, texts[i], engine.PoolingDefault))); err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
	}
	if resp.Usage.PromptTokens < 20 {
		t.Fatalf("usage %+v", resp.Usage)
	}
	// An input over the context (512): refused, or cut to fit with
	// truncate (oengine's field, sent through the SDK's extra fields).
	long := strings.Repeat("Once upon a time, there was a little girl named Lily. ", 60)
	_, err = c.Embeddings.New(ctx, oa.EmbeddingNewParams{Model: "tiny", Input: oa.EmbeddingNewParamsInputUnion{OfString: oa.String(long)}})
	if apiErr := (*oa.Error)(nil); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" {
		t.Fatalf("an input over the context: %v", err)
	}
	resp, err = c.Embeddings.New(ctx, oa.EmbeddingNewParams{Model: "tiny", Input: oa.EmbeddingNewParamsInputUnion{OfString: oa.String(long)}},
		option.WithJSONSet("truncate", true))
	if err != nil {
		t.Fatal(err)
	}
	ev := h.engineDone(t, engine.Request{Prompt: long, Embed: &engine.EmbedOptions{Truncate: true}})
	if err := sameFloats(resp.Data[0].Embedding, unit(ev.Embedding)); err != nil || resp.Usage.PromptTokens != int64(ev.Usage.PromptTokens) ||
		resp.Usage.PromptTokens > 512 || resp.Usage.PromptTokens < 500 {
		t.Fatalf("truncated input: %v, usage %+v (engine %+v)", err, resp.Usage, ev.Usage)
	}
	_, err = c.Chat.Completions.New(ctx, oa.ChatCompletionNewParams{Model: "tiny",
		Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("hello")}})
	var apiErr *oa.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unsupported_feature" || !strings.Contains(apiErr.Message, "encoder") {
		t.Fatalf("chat on an encoder: %v", err)
	}
	_, err = c.Completions.New(ctx, oa.CompletionNewParams{Model: "tiny", MaxTokens: oa.Int(4),
		Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String("hello")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unsupported_feature" {
		t.Fatalf("completion on an encoder: %v", err)
	}
	h.idle(t, false)
}

// TestCohereEmbedSDK: Cohere's npm SDK embeds through /v2/embed: its
// request is served, its parser takes the reply, the vectors are the
// engine's normalized, a text over the context is cut (Cohere's default
// truncate END) or refused (NONE), and unsupported inputs are the SDK's
// 400 errors.
func TestCohereEmbedSDK(t *testing.T) {
	requireNode(t, "cohere-ai")
	h := startHarness(t, harnessOpts{modelFile: "../../engine/testdata/embed/tiny-bert-f16.gguf"})
	long := strings.Repeat("Once upon a time, there was a little girl named Lily. ", 60)
	out := runNode(t, "embed.mjs", h.base, h.name, long)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var vecs [][]float32
	var cutTokens int
	if len(lines) < 2 || json.Unmarshal([]byte(lines[len(lines)-2]), &vecs) != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &cutTokens) != nil || len(vecs) != 2 {
		t.Fatalf("embed.mjs printed %s", out)
	}
	for i, text := range []string{"The capital of France is", "Once upon a time, there was a little girl named Lily."} {
		want := unit(h.engineDone(t, engine.Request{Prompt: text, Embed: &engine.EmbedOptions{}}).Embedding)
		for j := range want {
			if math.Abs(float64(vecs[i][j]-want[j])) > 1e-6 {
				t.Fatalf("text %d value %d: %g from the SDK, engine %g", i, j, vecs[i][j], want[j])
			}
		}
	}
	if cutTokens > 512 || cutTokens < 500 {
		t.Fatalf("the truncated text counted %d tokens (context 512)", cutTokens)
	}
	h.idle(t, false)
}
