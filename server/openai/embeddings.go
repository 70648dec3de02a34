package openai

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"oengine/engine"
	"oengine/server"
)

// RouteEmbeddings is the route label of POST /v1/embeddings.
const RouteEmbeddings = "/v1/embeddings"

const (
	// MaxEmbeddingInputs bounds the inputs of one embeddings request
	// (OpenAI's limit).
	MaxEmbeddingInputs = 2048
	// embedWindow is how many inputs of one request are computed at once:
	// enough to fill a step with short inputs, few enough to leave room
	// for other requests.
	embedWindow = 16
)

// windowFor is embedWindow within a quarter of the engine's queue limit
// (at least 1): several multi-input requests in flight leave room in the
// queue for other clients' first inputs.
func windowFor(lim engine.Limits) int {
	if lim.MaxWaiting <= 0 {
		return embedWindow
	}
	return max(1, min(embedWindow, lim.MaxWaiting/4))
}

// embeddingRequest is POST /v1/embeddings (docs/api.md, "Embeddings").
type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
	// Pooling (oengine): "mean", "cls" or "last"; "": the server's.
	Pooling string `json:"pooling"`
	// Normalize (oengine): false returns the pooled vector as it is
	// instead of scaled to unit length.
	Normalize *bool `json:"normalize"`
	// Truncate (oengine, as Hugging Face's text-embeddings-inference): an
	// input longer than the model takes is cut to fit instead of refused
	// (engine.EmbedOptions.Truncate).
	Truncate bool `json:"truncate"`
}

// embeddings serves POST /v1/embeddings: each input is pooled into one
// vector by the engine (engine.EmbedOptions), truncated to dimensions and
// scaled to unit length.
func (a *api) embeddings(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req embeddingRequest
	ms, ok := a.begin(w, r, &req)
	if !ok {
		return
	}
	ins, aerr := inputList(req.Input, "input")
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	lim := ms.m.Backend.Limits()
	pooling, err := engine.ParsePooling(req.Pooling)
	ierr := inputsCheck("input", "inputs", ins)
	switch {
	case lim.EmbeddingDim == 0:
		aerr = noEmbeddings(ms, lim)
	case ierr != nil:
		aerr = ierr
	case req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64":
		aerr = invalid("encoding_format", "encoding_format must be \"float\" or \"base64\", got %q", req.EncodingFormat)
	case err != nil:
		aerr = invalid("pooling", "%v", err)
	case pooling == engine.PoolingRank:
		aerr = invalid("pooling", "rank pooling gives scores, not an embedding: use /v1/rerank")
	default:
		aerr = badDimensions("dimensions", req.Dimensions, lim)
	}
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	vecs, run, _, ok := a.embedEach(w, r, ms, start, ins, engine.EmbedOptions{Pooling: pooling, Truncate: req.Truncate},
		req.Dimensions, req.Normalize == nil || *req.Normalize)
	if !ok {
		return
	}
	defer run.done()
	writeEmbeddings(w, ms.m.Name, vecs, req.EncodingFormat == "base64", run.promptTokens)
}

// inputsCheck refuses more than MaxEmbeddingInputs inputs (noun names
// them in the message) and an empty one (field[i]).
func inputsCheck(field, noun string, ins []promptInput) *apiError {
	if len(ins) > MaxEmbeddingInputs {
		return invalid(field, "%d %s exceed the limit of %d per request", len(ins), noun, MaxEmbeddingInputs)
	}
	for i, in := range ins {
		if in.text == "" && in.ids == nil {
			return invalid(field, "%s[%d] is empty", field, i)
		}
	}
	return nil
}

// textInputs are texts as inputs.
func textInputs(texts []string) []promptInput {
	ins := make([]promptInput, len(texts))
	for i, t := range texts {
		ins[i].text = t
	}
	return ins
}

// embedEach runs one embedding per input of an embeddings route: engine
// requests id-i scoped to the client with opts, each vector cut to dims
// and, with normalize, scaled to unit length (embedVectors). ok false: the
// error response is written; otherwise the request's metrics are done and
// the caller writes its reply, then calls run.done.
func (a *api) embedEach(w http.ResponseWriter, r *http.Request, ms *modelState, start time.Time, ins []promptInput,
	opts engine.EmbedOptions, dims *int, normalize bool) (vecs [][]float32, run embedsRun, id string, ok bool) {
	id = requestID(r, "embd-")
	p := server.PrincipalFrom(r.Context())
	build := func(i int) engine.Request {
		o := opts
		return engine.Request{ID: p.Scope(id + "-" + strconv.Itoa(i)), Prompt: ins[i].text, TokenIDs: ins[i].ids, Embed: &o}
	}
	vecs, take := embedVectors(ms.m.Backend.Limits(), len(ins), dims, normalize)
	if run, ok = a.runEmbeds(w, r, ms, RouteEmbeddings, id, start, len(ins), false, build, take); ok {
		run.rm.Done(time.Now())
	}
	return vecs, run, id, ok
}

// noEmbeddings is the refusal of an embedding request to a model whose
// backend returns no hidden states.
func noEmbeddings(ms *modelState, lim engine.Limits) *apiError {
	return unsupported("model", "model %q serves no embeddings: its backend (%s) does not return hidden states", ms.m.Name, lim.Device)
}

// badDimensions checks a requested embedding width (param: the request's
// field; nil: the model's width).
func badDimensions(param string, dims *int, lim engine.Limits) *apiError {
	if dims != nil && (*dims < 1 || *dims > lim.EmbeddingDim) {
		return invalid(param, "%s must be between 1 and %d (the model's embedding width), got %d", param, lim.EmbeddingDim, *dims)
	}
	return nil
}

// embedVectors collects the n pooled vectors of an embedding request for
// runEmbeds: take keeps each one's first dims values (nil: all) and, when
// normalize, scales them to unit length.
func embedVectors(lim engine.Limits, n int, dims *int, normalize bool) ([][]float32, func(int, []float32) *apiError) {
	width := lim.EmbeddingDim
	if dims != nil {
		width = *dims
	}
	vecs := make([][]float32, n)
	return vecs, func(i int, vec []float32) *apiError {
		if len(vec) != lim.EmbeddingDim {
			return errorf(http.StatusInternalServerError, "internal_error", "", "embedding of %d values, the model's width is %d", len(vec), lim.EmbeddingDim)
		}
		vec = vec[:width]
		if normalize {
			unitLength(vec)
		}
		vecs[i] = vec
		return nil
	}
}

// embedsRun is what runEmbeds leaves to its caller: the prompt tokens
// attended to (and of those, the prefix cache's), the request's metrics, and done, which ends its count as in
// flight (server.Server.Track) once the response is written.
type embedsRun struct {
	promptTokens, cachedTokens int // cached: of promptTokens, from the prefix cache
	rm                         *server.RequestMetrics
	done                       func()
}

// runEmbeds runs the n engine requests build(i) of one embeddings or
// rerank request, at most windowFor in the engine at once, and hands
// each result, in order, to take. lead: the inputs share a prefix the
// prefix cache can give (a causal reranker's prompt up to the document),
// so the first runs alone and the others start once its pages are
// published, reusing that prefix instead of each computing it in the same
// step. The engine's queue limit refuses the request only when its first
// input is refused; once accepted, a full queue narrows the window to the
// inputs in flight (or, with none, waits for room), so a request of more
// inputs than the queue holds is never failed halfway. A failure before
// any input was accepted is answered as a rejection, one after as a failed
// request (the metrics say which). ok false: the error response is written; otherwise
// the caller writes the response, ends run.rm and calls run.done.
func (a *api) runEmbeds(w http.ResponseWriter, r *http.Request, ms *modelState, route, id string, start time.Time, n int, lead bool,
	build func(i int) engine.Request, take func(i int, vec []float32) *apiError) (run embedsRun, ok bool) {
	// live holds the streams submitted and not yet read.
	live := make([]server.Stream, n)
	defer func() {
		for _, st := range live {
			if st != nil {
				st.Cancel()
			}
		}
	}()
	read, next := 0, 0 // inputs read back, submitted
	fill := func() *apiError {
		window := windowFor(ms.m.Backend.Limits())
		if lead && read == 0 {
			window = 1
		}
		backoff := time.Millisecond
		for next < n && next < read+window {
			st, err := ms.m.Backend.Submit(r.Context(), build(next))
			switch {
			case err == nil:
				live[next] = st
				next++
				continue
			case !errors.Is(err, engine.ErrOverloaded) || next == 0:
				return classified(err)
			case next > read:
				return nil // the queue is full: the window narrows to what it holds
			}
			// Accepted, nothing in flight and the queue full: wait for room.
			select {
			case <-r.Context().Done():
				return classified(r.Context().Err())
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 50*time.Millisecond)
		}
		return nil
	}
	if aerr := fill(); aerr != nil {
		a.reject(w, aerr)
		return run, false
	}
	run.done = a.s.Track()
	w.Header().Set("X-Request-Id", id)
	run.rm = a.s.Metrics().Request(route, ms.m.Name, start)
	fail := func(aerr *apiError) { // after acceptance: a failed request, not a rejected one
		run.rm.Failed(aerr.reason)
		writeError(w, aerr)
		run.done()
	}
	for i := range n {
		vec, eu, aerr := embedding(r, live[i])
		live[i], read = nil, i+1
		if aerr == nil {
			aerr = take(i, vec)
		}
		if aerr != nil {
			fail(aerr)
			return run, false
		}
		if eu != nil {
			run.promptTokens += eu.PromptTokens
			run.cachedTokens += eu.CachedPromptTokens
		}
		run.rm.Finished("stop")
		if aerr := fill(); aerr != nil {
			fail(aerr)
			return run, false
		}
	}
	return run, true
}

// embedding reads one embedding request's stream to its terminal event.
func embedding(r *http.Request, st server.Stream) ([]float32, *engine.Usage, *apiError) {
	for {
		ev, err := st.Next(r.Context())
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("engine stream ended without a terminal event")
			}
			return nil, nil, classified(err)
		}
		switch ev.Kind {
		case engine.EventDone:
			return ev.Embedding, ev.Usage, nil
		case engine.EventError:
			if ev.Err == nil {
				return nil, nil, classified(errors.New("engine: error event without an error"))
			}
			return nil, nil, classified(ev.Err)
		}
	}
}

// unitLength scales v to Euclidean length 1 (a zero vector stays zero).
func unitLength(v []float32) {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	k := 1 / math.Sqrt(s)
	for i, x := range v {
		v[i] = float32(float64(x) * k)
	}
}

// writeEmbeddings writes the response, encoding each vector as it goes
// (a request's vectors may take tens of megabytes as JSON).
func writeEmbeddings(w http.ResponseWriter, model string, vecs [][]float32, b64 bool, promptTokens int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	buf := []byte(`{"object":"list","data":[`)
	var raw []byte
	for i, v := range vecs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"object":"embedding","index":`...)
		buf = strconv.AppendInt(buf, int64(i), 10)
		buf = append(buf, `,"embedding":`...)
		if b64 {
			raw = raw[:0]
			for _, x := range v {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
			}
			buf = append(buf, '"')
			buf = base64.StdEncoding.AppendEncode(buf, raw)
			buf = append(buf, '"')
		} else {
			buf = append(buf, '[')
			for j, x := range v {
				if j > 0 {
					buf = append(buf, ',')
				}
				buf = strconv.AppendFloat(buf, float64(x), 'g', -1, 32)
			}
			buf = append(buf, ']')
		}
		buf = append(buf, '}')
		if _, err := bw.Write(buf); err != nil {
			return // the client left
		}
		buf = buf[:0]
	}
	mj, _ := json.Marshal(model)
	buf = append(buf, `],"model":`...)
	buf = append(buf, mj...)
	buf = append(buf, `,"usage":{"prompt_tokens":`...)
	buf = strconv.AppendInt(buf, int64(promptTokens), 10)
	buf = append(buf, `,"total_tokens":`...)
	buf = strconv.AppendInt(buf, int64(promptTokens), 10)
	buf = append(buf, "}}\n"...)
	_, _ = bw.Write(buf)
	_ = bw.Flush()
}
