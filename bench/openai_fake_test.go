package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeOpenAI is an OpenAI-compatible server in the API's shape
// (/v1/models, streamed /v1/completions and /v1/chat/completions with
// stream_options.include_usage) with a made-up tokenizer, so tests can
// check what the bench sends against what a server counts.
type fakeOpenAI struct {
	maxModelLen int  // reported as data[].max_model_len (0: not reported)
	notFound    bool // answer 404 to every request
	failEvery   int  // answer 500 to every failEvery-th generation (0: never)
	shortEvery  int  // stop one token early on every shortEvery-th generation

	mu      sync.Mutex // protects the fields below
	n       int        // generations answered
	prompts []prompt   // what each generation received
	usage   struct{ prompt, completion int }
}

// prompt is what one generation received.
type prompt struct {
	ids    []int  // a token-id prompt
	text   string // a text prompt or the chat message
	tokens int    // the fake tokenizer's count (what usage reports)
}

// fakeTokens is the fake tokenizer: BOS, then per word one token for
// every started three letters (so words cost 1 to 4 tokens). A chat
// request adds a template of 5 tokens.
func fakeTokens(text string, chat bool) int {
	n := 1
	if chat {
		n += 5
	}
	for _, w := range strings.Fields(text) {
		n += (len(w) + 2) / 3
	}
	return n
}

func (f *fakeOpenAI) start(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.notFound {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	switch r.URL.Path {
	case "/v1/models":
		m := map[string]any{"id": "fake", "object": "model", "owned_by": "test"}
		if f.maxModelLen > 0 {
			m["max_model_len"] = f.maxModelLen
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{m}})
	case "/v1/completions", "/v1/chat/completions":
		f.generate(w, r, r.URL.Path == "/v1/chat/completions")
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeOpenAI) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	var body struct {
		Prompt   json.RawMessage `json:"prompt"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		MaxTokens     int  `json:"max_tokens"`
		Stream        bool `json:"stream"`
		IgnoreEOS     bool `json:"ignore_eos"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !body.Stream || !body.StreamOptions.IncludeUsage || body.MaxTokens < 1 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	var p prompt
	switch {
	case chat:
		if len(body.Messages) != 1 || body.Messages[0].Role != "user" {
			http.Error(w, `{"error":{"message":"want one user message"}}`, http.StatusBadRequest)
			return
		}
		p.text = body.Messages[0].Content
		p.tokens = fakeTokens(p.text, true)
	case json.Unmarshal(body.Prompt, &p.ids) == nil:
		p.tokens = len(p.ids) // token ids are used as given
	case json.Unmarshal(body.Prompt, &p.text) == nil:
		p.tokens = fakeTokens(p.text, false)
	default:
		http.Error(w, `{"error":{"message":"bad prompt"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.n++
	n := f.n
	fail := f.failEvery > 0 && n%f.failEvery == 0
	out := body.MaxTokens
	if f.shortEvery > 0 && n%f.shortEvery == 0 {
		out--
	}
	if !fail {
		f.prompts = append(f.prompts, p)
		f.usage.prompt += p.tokens
		f.usage.completion += out
	}
	f.mu.Unlock()
	if fail {
		http.Error(w, `{"error":{"message":"injected failure"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for range out {
		if chat {
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":null}]}\n\n")
		} else {
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":null}]}\n\n")
		}
		fl.Flush()
	}
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n",
		p.tokens, out, p.tokens+out)
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func (f *fakeOpenAI) received() ([]prompt, int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]prompt(nil), f.prompts...), f.usage.prompt, f.usage.completion
}

// testVocab is a pool of ids 100..163 standing in for a model's.
func testVocab() *Vocab {
	v := &Vocab{Size: 1000, Source: "test"}
	for id := uint32(100); id < 164; id++ {
		v.IDs = append(v.IDs, id)
	}
	return v
}

func TestOpenAITokenIDsExact(t *testing.T) {
	f := &fakeOpenAI{}
	o := NewOpenAI(f.start(t), "fake")
	defer o.Close()
	w := fixedWorkload(37, 5)
	w.Vocab = testVocab()
	cfg := ServeConfig{Workload: w, Load: Load{Concurrency: 3, Requests: 9}}
	reps, err := RunServe(testCtx(t), o, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	got, inSum, outSum := f.received()
	if len(got) != 9 {
		t.Fatalf("server received %d prompts, want 9", len(got))
	}
	for i, p := range got {
		if p.ids == nil || len(p.ids) != 37 {
			t.Fatalf("prompt %d: %d token ids (text %q), want exactly 37 ids", i, len(p.ids), p.text)
		}
		for _, id := range p.ids {
			if id < 100 || id >= 164 {
				t.Fatalf("prompt %d: id %d is not from the vocabulary pool", i, id)
			}
		}
	}
	r := reps[0]
	if r.InTokens != inSum || r.OutTokens != outSum {
		t.Errorf("report counts in %d out %d, server usage in %d out %d", r.InTokens, r.OutTokens, inSum, outSum)
	}
	if r.InputMeasured.Min != 37 || r.InputMeasured.Max != 37 || r.InputMeasured.P99 != 37 || r.InputAsked != "37" {
		t.Errorf("measured input %+v asked %q, want 37 everywhere", r.InputMeasured, r.InputAsked)
	}
	if r.OutputMeasured.Mean != 5 || r.OutputAsked != "5" || r.InputMismatches != 0 || r.OutputMismatches != 0 {
		t.Errorf("output %+v asked %q, mismatches in %d out %d", r.OutputMeasured, r.OutputAsked, r.InputMismatches, r.OutputMismatches)
	}
	if !strings.HasPrefix(r.InputMethod, "token ids") {
		t.Errorf("input method %q, want token ids", r.InputMethod)
	}
}

func TestOpenAICalibratedText(t *testing.T) {
	for _, chat := range []bool{false, true} {
		t.Run(fmt.Sprint("chat=", chat), func(t *testing.T) {
			f := &fakeOpenAI{}
			o := NewOpenAI(f.start(t), "fake")
			if chat {
				o = NewOpenAIChat(o.Base, "fake")
			}
			defer o.Close()
			const n = 300
			cfg := ServeConfig{Workload: fixedWorkload(n, 2), Load: Load{Concurrency: 2, Requests: 8}}
			reps, err := RunServe(testCtx(t), o, cfg, Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			r := reps[0]
			c := r.Calibration
			if c == nil || !strings.HasPrefix(r.InputMethod, "calibrated text") {
				t.Fatalf("input method %q calibration %+v, want calibrated text", r.InputMethod, c)
			}
			got, inSum, _ := f.received()
			probes := got[:c.Probes]
			if last := probes[len(probes)-1].tokens; last != c.Tokens || abs(last-n) > 6 {
				t.Errorf("last probe counted %d tokens, calibration says %d; want within 2%% of %d", last, c.Tokens, n)
			}
			for i, p := range got[c.Probes:] {
				if p.ids != nil || abs(p.tokens-n) > 6 {
					t.Errorf("request %d: %d tokens (ids %v), want text of %d±6", i, p.tokens, p.ids != nil, n)
				}
			}
			runIn := inSum
			for _, p := range probes {
				runIn -= p.tokens
			}
			if r.InTokens != runIn || r.InputMismatches != 0 {
				t.Errorf("report input %d (mismatches %d), server counted %d", r.InTokens, r.InputMismatches, runIn)
			}
		})
	}
}

func TestOpenAIOutputMismatchFlagged(t *testing.T) {
	f := &fakeOpenAI{shortEvery: 3}
	o := NewOpenAI(f.start(t), "fake")
	defer o.Close()
	w := fixedWorkload(8, 4)
	w.Vocab = testVocab()
	reps, err := RunServe(testCtx(t), o, ServeConfig{Workload: w, Load: Load{Concurrency: 1, Requests: 9}}, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	if r.OutputMismatches != 3 || r.Succeeded != 9 || len(r.LengthExamples) != 3 {
		t.Fatalf("output mismatches %d ok %d examples %v; want 3 short requests flagged, not failed", r.OutputMismatches, r.Succeeded, r.LengthExamples)
	}
	if r.OutputMeasured.Min != 3 || r.OutputMeasured.Max != 4 {
		t.Errorf("output measured %+v, want 3..4", r.OutputMeasured)
	}
}

func TestOpenAIErrorsFailTheRun(t *testing.T) {
	t.Run("404 without vocabulary", func(t *testing.T) {
		o := NewOpenAI((&fakeOpenAI{notFound: true}).start(t), "fake")
		defer o.Close()
		if _, err := RunServe(testCtx(t), o, ServeConfig{Workload: fixedWorkload(8, 2), Load: Load{Requests: 2}}, Hooks{}); err == nil {
			t.Fatal("a 404 target calibrated: want the run to fail")
		}
	})
	t.Run("404 with token ids", func(t *testing.T) {
		o := NewOpenAI((&fakeOpenAI{notFound: true}).start(t), "fake")
		defer o.Close()
		w := fixedWorkload(8, 2)
		w.Vocab = testVocab()
		reps, err := RunServe(testCtx(t), o, ServeConfig{Workload: w, Load: Load{Concurrency: 2, Requests: 4}}, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		if reps[0].Errors["http_404"] != 4 || reps[0].ErrorRate != 1 {
			t.Fatalf("errors %v rate %v, want 4 http_404 and rate 1", reps[0].Errors, reps[0].ErrorRate)
		}
		for _, limit := range []float64{0, 1} {
			if err := CheckErrorRate(reps, limit); err == nil {
				t.Fatalf("CheckErrorRate(limit %g) passed a run where every request failed", limit)
			}
		}
	})
	t.Run("error fraction against the limit", func(t *testing.T) {
		o := NewOpenAI((&fakeOpenAI{failEvery: 4}).start(t), "fake")
		defer o.Close()
		w := fixedWorkload(8, 2)
		w.Vocab = testVocab()
		reps, err := RunServe(testCtx(t), o, ServeConfig{Workload: w, Load: Load{Concurrency: 1, Requests: 8}}, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		if reps[0].ErrorRate != 0.25 {
			t.Fatalf("error rate %v, want 0.25 (%v)", reps[0].ErrorRate, reps[0].Errors)
		}
		if CheckErrorRate(reps, 0.2) == nil || CheckErrorRate(reps, 0.25) != nil {
			t.Errorf("limit 0.2 must fail and 0.25 pass a 0.25 error rate")
		}
	})
}

func TestOpenAIMultiTurnContextStop(t *testing.T) {
	// Each turn adds 20 input and 5 output tokens; a 100-token context
	// holds four turns: the fifth would need 125.
	f := &fakeOpenAI{maxModelLen: 100}
	o := NewOpenAI(f.start(t), "fake")
	defer o.Close()
	w := fixedWorkload(20, 5)
	w.Vocab = testVocab()
	cfg := ServeConfig{Scenario: ScenarioMultiTurn, Turns: 6, Workload: w, Load: Load{Concurrency: 2, Requests: 3}}
	reps, err := RunServe(testCtx(t), o, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	if r.ContextStops != 3 || r.Requests != 12 || r.Succeeded != 12 || len(r.Errors) != 0 || r.MaxContext != 100 {
		t.Fatalf("context stops %d requests %d ok %d errors %v max %d; want 3 stops after 4 turns each, no error",
			r.ContextStops, r.Requests, r.Succeeded, r.Errors, r.MaxContext)
	}
	if CheckErrorRate(reps, 0) != nil {
		t.Errorf("a context stop counted as an error")
	}
	got, _, _ := f.received()
	lens := map[int]int{}
	for _, p := range got {
		lens[len(p.ids)]++
	}
	for k := range 4 {
		if want := 25*k + 20; lens[want] != 3 {
			t.Errorf("turn %d: %d prompts of %d ids, want 3 (all lengths %v)", k+1, lens[want], want, lens)
		}
	}
	if r.InputMeasured.Min != 20 || r.InputMeasured.Max != 20 || r.InputMismatches != 0 {
		t.Errorf("per-turn input %+v mismatches %d, want exactly 20", r.InputMeasured, r.InputMismatches)
	}
}
