package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// sseEvent is one server-sent event: its name (empty when the stream sends
// none, as OpenAI-style servers do) and its data lines joined.
type sseEvent struct {
	Name string
	Data string
}

// readSSE calls fn for each event of an event stream until the body ends,
// fn returns false, or an error.
func readSSE(r io.Reader, fn func(sseEvent) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	var ev sseEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 || ev.Name != "" {
				ev.Data = strings.Join(data, "\n")
				if !fn(ev) {
					return nil
				}
			}
			ev, data = sseEvent{}, data[:0]
		case strings.HasPrefix(line, ":"): // comment (keep-alive)
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				ev.Name = value
			case "data":
				data = append(data, value)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(data) > 0 { // a last event without its blank line
		ev.Data = strings.Join(data, "\n")
		fn(ev)
	}
	return nil
}

// httpStatusError reads an error response's body into a KindError.
func httpStatusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return &KindError{Kind: fmt.Sprintf("http_%d", resp.StatusCode),
		Msg: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))}
}

// newHTTPClient returns a client for many concurrent streams to one host.
func newHTTPClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns
	tr.MaxIdleConnsPerHost = conns
	tr.MaxConnsPerHost = 0
	return &http.Client{Transport: tr}
}

// OpenAI drives an OpenAI-compatible server with stream=true (llama.cpp's
// llama-server, vLLM, oengine's /v1): /v1/completions, or with Chat
// /v1/chat/completions. ignore_eos is sent as the extension those servers
// accept. Completions take a prompt as a list of token ids, so their input
// length is exact; chat takes text only (docs/bench.md: input methods).
type OpenAI struct {
	Base  string // e.g. http://127.0.0.1:8080
	Model string
	Chat  bool // /v1/chat/completions with one user message per turn
	// Embeddings posts each request's prompt to /v1/embeddings as one
	// input (no output tokens; the request's time is its E2E).
	Embeddings bool
	// RerankDocs > 0 posts each request's prompt to /v1/rerank: its first
	// words as the query, the rest cut into RerankDocs documents (rerank).
	RerankDocs int
	client     *http.Client
}

// NewOpenAI returns a /v1/completions target for the server at base.
func NewOpenAI(base, model string) *OpenAI {
	return &OpenAI{Base: strings.TrimRight(base, "/"), Model: model, client: newHTTPClient(256)}
}

// NewOpenAIChat returns a /v1/chat/completions target.
func NewOpenAIChat(base, model string) *OpenAI {
	o := NewOpenAI(base, model)
	o.Chat = true
	return o
}

// NewOpenAIEmbeddings returns a /v1/embeddings target.
func NewOpenAIEmbeddings(base, model string) *OpenAI {
	o := NewOpenAI(base, model)
	o.Embeddings = true
	return o
}

// NewOpenAIRerank returns a /v1/rerank target: each request ranks docs
// documents against a query, both cut from its prompt.
func NewOpenAIRerank(base, model string, docs int) *OpenAI {
	o := NewOpenAI(base, model)
	o.RerankDocs = max(docs, 1)
	return o
}

func (o *OpenAI) Name() string {
	switch {
	case o.Chat:
		return "openai-chat"
	case o.Embeddings:
		return "openai-embeddings"
	case o.RerankDocs > 0:
		return "openai-rerank"
	}
	return "openai"
}

// AcceptsTokenIDs: completions and embeddings take token ids, chat and
// rerank do not.
func (o *OpenAI) AcceptsTokenIDs() bool { return !o.Chat && o.RerankDocs == 0 }

func (o *OpenAI) Close() error { o.client.CloseIdleConnections(); return nil }

type completionChunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta *struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		Details          *struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// Generate posts one streamed completion. Each chunk with text counts as
// one token for the timings; the final usage sets the counts.
func (o *OpenAI) Generate(ctx context.Context, req Request) Result {
	if o.Embeddings {
		return o.embed(ctx, req)
	}
	if o.RerankDocs > 0 {
		return o.rerank(ctx, req)
	}
	return o.generate(ctx, req, nil)
}

// post sends a JSON body to path; a status other than 200 is an error
// (httpStatusError), the body closed. The caller closes a 200's body.
func (o *OpenAI) post(ctx context.Context, path string, body []byte) (*http.Response, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, o.Base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := o.client.Do(hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, httpStatusError(resp)
	}
	return resp, nil
}

// embed posts req's prompt (text or token ids) to /v1/embeddings and
// checks that one non-empty vector came back; usage sets the input count.
func (o *OpenAI) embed(ctx context.Context, req Request) Result {
	req.MaxTokens, req.IgnoreEOS = 0, false // nothing is generated: no output length to check
	ctx, m := startMeter(ctx, req)
	b := map[string]any{"model": o.Model, "input": req.Prompt}
	if req.TokenIDs != nil {
		b["input"] = req.TokenIDs
	}
	body, _ := json.Marshal(b)
	resp, err := o.post(ctx, "/v1/embeddings", body)
	if err != nil {
		m.fail(err)
		return m.done()
	}
	defer resp.Body.Close()
	var r struct {
		Data []struct {
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	switch err := json.NewDecoder(resp.Body).Decode(&r); {
	case err != nil:
		m.fail(&KindError{Kind: "bad_response", Msg: "bench: embeddings response: " + err.Error()})
	case len(r.Data) != 1 || len(r.Data[0].Embedding) < 3:
		m.fail(&KindError{Kind: "bad_response", Msg: fmt.Sprintf("bench: embeddings response with %d vectors for one input", len(r.Data))})
	default:
		m.usage(r.Usage.PromptTokens, 0, 0)
	}
	return m.done()
}

// rerankQueryWords is the query's length in words: a search query's.
const rerankQueryWords = 12

// rerankSplit cuts a prompt into a query (its first rerankQueryWords
// words) and up to n documents of the remaining words, as equal as they
// come (none empty; fewer when there are fewer words).
func rerankSplit(prompt string, n int) (string, []string) {
	w := strings.Fields(prompt)
	q := min(rerankQueryWords, max(1, len(w)/2))
	query, rest := strings.Join(w[:min(q, len(w))], " "), w[min(q, len(w)):]
	n = min(n, len(rest))
	docs := make([]string, 0, n)
	for i := 0; i < n; i++ {
		docs = append(docs, strings.Join(rest[i*len(rest)/n:(i+1)*len(rest)/n], " "))
	}
	return query, docs
}

// rerank posts req's prompt, cut into a query and documents
// (rerankSplit), to /v1/rerank and checks that every document came back
// scored; usage sets the input count (every pair's tokens).
func (o *OpenAI) rerank(ctx context.Context, req Request) Result {
	req.MaxTokens, req.IgnoreEOS = 0, false // nothing is generated
	// The server counts every pair's tokens (the query once per document,
	// and the pair template's): not the prompt's length, so no input check.
	req.InputTokens = 0
	ctx, m := startMeter(ctx, req)
	query, docs := rerankSplit(req.Prompt, o.RerankDocs)
	if len(docs) == 0 {
		m.fail(&KindError{Kind: "bad_request", Msg: "bench: a rerank prompt needs more than one word"})
		return m.done()
	}
	body, _ := json.Marshal(map[string]any{"model": o.Model, "query": query, "documents": docs})
	resp, err := o.post(ctx, "/v1/rerank", body)
	if err != nil {
		m.fail(err)
		return m.done()
	}
	defer resp.Body.Close()
	var r struct {
		Results []struct {
			Index          *int     `json:"index"`
			RelevanceScore *float64 `json:"relevance_score"`
		} `json:"results"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	seen := make([]bool, len(docs))
	bad := ""
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		bad = "bench: rerank response: " + err.Error()
	} else if len(r.Results) != len(docs) {
		bad = fmt.Sprintf("bench: rerank response with %d results for %d documents", len(r.Results), len(docs))
	}
	for _, x := range r.Results {
		if bad != "" {
			break
		}
		if x.Index == nil || *x.Index < 0 || *x.Index >= len(docs) || seen[*x.Index] || x.RelevanceScore == nil {
			bad = "bench: rerank response with a missing, repeated or unscored document"
			break
		}
		seen[*x.Index] = true
	}
	if bad != "" {
		m.fail(&KindError{Kind: "bad_response", Msg: bad})
	} else {
		m.usage(r.Usage.PromptTokens, 0, 0)
	}
	return m.done()
}

// body is the JSON request of req.
func (o *OpenAI) body(req Request) []byte {
	b := map[string]any{
		"model": o.Model, "max_tokens": req.MaxTokens,
		"temperature": req.Temp, "stream": true, "ignore_eos": req.IgnoreEOS,
		"stream_options": map[string]any{"include_usage": true},
	}
	switch {
	case o.Chat:
		b["messages"] = []map[string]string{{"role": "user", "content": req.Prompt}}
	case req.TokenIDs != nil:
		b["prompt"] = req.TokenIDs
	default:
		b["prompt"] = req.Prompt
	}
	body, _ := json.Marshal(b)
	return body
}

// generate is Generate that also collects the output text when out is
// not nil (the API returns no output token ids).
func (o *OpenAI) generate(ctx context.Context, req Request, out *output) Result {
	path := "/v1/completions"
	if o.Chat {
		path = "/v1/chat/completions"
	}
	ctx, m := startMeter(ctx, req)
	resp, err := o.post(ctx, path, o.body(req))
	if err != nil {
		m.fail(err)
		return m.done()
	}
	defer resp.Body.Close()
	var evErr error
	err = readSSE(resp.Body, func(ev sseEvent) bool {
		if ev.Data == "[DONE]" {
			return false
		}
		var c completionChunk
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			evErr = &KindError{Kind: "bad_response", Msg: "bench: openai chunk: " + err.Error()}
			return false
		}
		if c.Error != nil {
			evErr = &KindError{Kind: "server_error", Msg: c.Error.Message}
			return false
		}
		for _, ch := range c.Choices {
			text := ch.Text
			if ch.Delta != nil {
				text = ch.Delta.Content
			}
			if text != "" {
				m.tokens(1)
				if out != nil {
					out.text.WriteString(text)
				}
			}
		}
		if u := c.Usage; u != nil {
			cached := 0
			if u.Details != nil {
				cached = u.Details.Cached
			}
			m.usage(u.PromptTokens, u.CompletionTokens, cached)
		}
		return true
	})
	if evErr != nil {
		err = evErr
	}
	m.fail(err)
	return m.done()
}

// SSE drives oengine's POST /session/{id}/generate route. The route needs
// a live generation session: the target opens one over gRPC when it is
// made and closes it in Close. Output length is the server's
// --sse-max-tokens: the request carries only the prompt.
type SSE struct {
	Base    string // the HTTP listener, e.g. http://127.0.0.1:8080
	g       *GRPC
	session string
	owner   string
	client  *http.Client
}

// NewSSE opens a session through g and returns the target.
func NewSSE(ctx context.Context, base string, g *GRPC) (*SSE, error) {
	info, err := g.ServerInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: sse: GetServerInfo: %w", err)
	}
	s, err := g.openSession(ctx, info.GetInstanceId(), "")
	if err != nil {
		return nil, fmt.Errorf("bench: sse: %w", err)
	}
	return &SSE{Base: strings.TrimRight(base, "/"), g: g, session: s, owner: info.GetInstanceId(), client: newHTTPClient(256)}, nil
}

func (s *SSE) Name() string { return "sse" }

// AcceptsTokenIDs: the route takes text only.
func (s *SSE) AcceptsTokenIDs() bool { return false }

// Close closes the session (the gRPC connection belongs to the caller).
func (s *SSE) Close() error {
	s.client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.g.closeSession(ctx, s.session, s.owner)
}

// Generate posts one prompt and reads the event stream. A delta counts as
// one token for the timings; done's output_tokens sets the count.
func (s *SSE) Generate(ctx context.Context, req Request) Result {
	body, _ := json.Marshal(map[string]string{"prompt": req.Prompt})
	req.MaxTokens = 0 // the route has no max_tokens: the server's --sse-max-tokens sets the output
	ctx, m := startMeter(ctx, req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Base+"/session/"+s.session+"/generate", bytes.NewReader(body))
	if err != nil {
		m.fail(err)
		return m.done()
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	resp, err := s.client.Do(hr)
	if err != nil {
		m.fail(err)
		return m.done()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		m.fail(httpStatusError(resp))
		return m.done()
	}
	terminal := false
	var evErr error
	err = readSSE(resp.Body, func(ev sseEvent) bool {
		switch ev.Name {
		case "delta":
			m.tokens(1)
		case "done":
			var d struct {
				In  int `json:"input_tokens"`
				Out int `json:"output_tokens"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
				evErr = &KindError{Kind: "bad_response", Msg: "bench: sse done: " + err.Error()}
			}
			m.usage(d.In, d.Out, 0)
			terminal = true
			return false
		case "error":
			var e struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal([]byte(ev.Data), &e)
			evErr = &KindError{Kind: "sse_" + e.Code, Msg: "sse error " + e.Code + ": " + e.Message}
			terminal = true
			return false
		}
		return true
	})
	switch {
	case evErr != nil:
		err = evErr
	case err == nil && !terminal:
		err = &KindError{Kind: "no_terminal_event", Msg: "bench: sse stream ended without done or error"}
	}
	m.fail(err)
	return m.done()
}

// Models asks an OpenAI-compatible server for its model ids (GET
// /v1/models); nil when it does not answer.
func (o *OpenAI) Models(ctx context.Context) []string {
	ms, err := o.models(ctx)
	if err != nil {
		return nil
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

// modelEntry is one entry of /v1/models with the context-length fields
// that servers add to OpenAI's shape: max_model_len (vLLM),
// context_length, context_window, and meta.n_ctx_train (llama.cpp).
type modelEntry struct {
	ID            string `json:"id"`
	MaxModelLen   int    `json:"max_model_len"`
	ContextLength int    `json:"context_length"`
	ContextWindow int    `json:"context_window"`
	Meta          *struct {
		NCtx      int `json:"n_ctx"`
		NCtxTrain int `json:"n_ctx_train"`
	} `json:"meta"`
}

func (m modelEntry) contextLength() int {
	for _, n := range []int{m.MaxModelLen, m.ContextLength, m.ContextWindow} {
		if n > 0 {
			return n
		}
	}
	if m.Meta != nil {
		if m.Meta.NCtx > 0 {
			return m.Meta.NCtx
		}
		return m.Meta.NCtxTrain
	}
	return 0
}

func (o *OpenAI) models(ctx context.Context) ([]modelEntry, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.Base+"/v1/models", nil)
	if err != nil {
		return nil, err
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, httpStatusError(resp)
	}
	var body struct {
		Data []modelEntry `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return nil, fmt.Errorf("bench: /v1/models: %w", err)
	}
	return body.Data, nil
}

// ContextLength is the model's context length as /v1/models reports it (0
// when the server lists none of the known fields).
func (o *OpenAI) ContextLength(ctx context.Context) (int, error) {
	ms, err := o.models(ctx)
	if err != nil {
		return 0, err
	}
	for _, m := range ms {
		if m.ID == o.Model || o.Model == "" {
			return m.contextLength(), nil
		}
	}
	return 0, nil
}
