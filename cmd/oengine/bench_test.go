package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"oengine/bench"
	"oengine/ggml"
	"oengine/model/synth"
)

func TestIntList(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    []int
		wantErr bool
	}{
		{"empty", "", nil, false},
		{"list", "1, 2,4", []int{1, 2, 4}, false},
		{"zero", "0,1", nil, true},
		{"word", "a", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := intList(c.in)
			if (err != nil) != c.wantErr || (!c.wantErr && !equalInts(got, c.want)) {
				t.Fatalf("intList(%q) = %v, %v", c.in, got, err)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBenchModelJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if err := dispatch([]string{"bench", "model", "--pp", "16", "--tg", "4", "--reps", "1", "--json"}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	for _, k := range []string{"pp_tokens_per_s", "tg_tokens_per_s"} {
		if v, ok := got[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v", k, got[k])
		}
	}
}

func TestBenchCompareAndChart(t *testing.T) {
	dir := t.TempDir()
	rep := bench.Report{Scenario: "generate", Target: "a", Concurrency: 4, OutTokPerS: 10, ReqPerS: 1}
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := bench.WriteJSON(a, bench.File{Reports: []bench.Report{rep}}); err != nil {
		t.Fatal(err)
	}
	rep.Target, rep.OutTokPerS = "b", 25
	if err := bench.WriteJSON(b, bench.File{Reports: []bench.Report{rep}}); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := dispatch([]string{"bench", "--compare", a, b}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2.50x") {
		t.Fatalf("compare lacks the 2.50x ratio:\n%s", out.String())
	}
	svg := filepath.Join(dir, "s.svg")
	out.Reset()
	if err := dispatch([]string{"bench", "chart", "-o", svg, a, b}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if err := dispatch([]string{"bench", "nope"}, &out, &errb); err == nil {
		t.Fatal("unknown subcommand accepted")
	}
}

// fakeCompletions answers /v1/models and streamed /v1/completions in the
// OpenAI shape; every failEvery-th completion (0: none) answers 500, and
// notFound answers 404 to everything. It records each prompt's length.
type fakeCompletions struct {
	notFound  bool
	failEvery int

	mu   sync.Mutex // protects n and lens
	n    int
	lens []int
}

func (f *fakeCompletions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.notFound {
		http.NotFound(w, r)
		return
	}
	if r.URL.Path == "/v1/models" {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake","object":"model","max_model_len":4096}]}`)
		return
	}
	var body struct {
		Prompt    []int `json:"prompt"` // this fake takes token ids only
		MaxTokens int   `json:"max_tokens"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"token ids only"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.n++
	fail := f.failEvery > 0 && f.n%f.failEvery == 0
	if !fail {
		f.lens = append(f.lens, len(body.Prompt))
	}
	f.mu.Unlock()
	if fail {
		http.Error(w, `{"error":{"message":"injected"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for range body.MaxTokens {
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"x\"}]}\n\n")
	}
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n",
		len(body.Prompt), body.MaxTokens)
}

// synthVocabFile writes the built-in tiny model to a GGUF file for --vocab.
func synthVocabFile(t *testing.T) string {
	t.Helper()
	data, err := synth.Build(synth.Options{Arch: "llama", Preset: "tiny", Type: ggml.TypeQ8_0, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBenchServeOpenAIExitStatus(t *testing.T) {
	vocab := synthVocabFile(t)
	serve := func(f *fakeCompletions, extra ...string) (string, error) {
		srv := httptest.NewServer(f)
		defer srv.Close()
		args := append([]string{"bench", "serve", "--target", "openai", "--url", srv.URL, "--metrics-url", "none",
			"--input-len", "33", "--output-len", "3", "--requests", "8", "--concurrency", "2"}, extra...)
		var out, errb bytes.Buffer
		err := dispatch(args, &out, &errb)
		return out.String(), err
	}
	t.Run("404 target fails", func(t *testing.T) {
		if _, err := serve(&fakeCompletions{notFound: true}); err == nil {
			t.Fatal("bench serve against a 404 server returned no error")
		}
		out, err := serve(&fakeCompletions{notFound: true}, "--vocab", vocab)
		if !errors.Is(err, bench.ErrTooManyErrors) || !strings.Contains(out, "http_404=8") {
			t.Fatalf("with token ids: err %v, want the error-rate failure and the error summary kept:\n%s", err, out)
		}
	})
	t.Run("exact token ids", func(t *testing.T) {
		f := &fakeCompletions{}
		out, err := serve(f, "--vocab", vocab)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(f.lens) != 8 {
			t.Fatalf("%d prompts received, want 8", len(f.lens))
		}
		for _, n := range f.lens {
			if n != 33 {
				t.Fatalf("prompt lengths %v, want 33 token ids each", f.lens)
			}
		}
		if !strings.Contains(out, "input: token ids (vocabulary: file ") {
			t.Errorf("the report does not say which input method was used:\n%s", out)
		}
	})
	t.Run("max error rate", func(t *testing.T) {
		if _, err := serve(&fakeCompletions{failEvery: 4}, "--vocab", vocab); !errors.Is(err, bench.ErrTooManyErrors) {
			t.Errorf("2 of 8 failed under the default --max-error-rate 0: err %v", err)
		}
		if out, err := serve(&fakeCompletions{failEvery: 4}, "--vocab", vocab, "--max-error-rate", "0.3"); err != nil {
			t.Errorf("2 of 8 failed under --max-error-rate 0.3: %v\n%s", err, out)
		}
	})
}

// TestBenchServeSoakFlags: the soak needs the grpc target and /metrics,
// and its fractions are bounded.
func TestBenchServeSoakFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--target", "openai"}, "the soak scenario needs --target grpc"},
		{[]string{"--metrics-url", "none"}, "the soak scenario reads /metrics"},
		{[]string{"--stall-fraction", "1.5"}, "--stall-fraction must be between 0 and 1"},
		{[]string{"--cancel-fraction", "0.7", "--stall-fraction", "0.5", "--addr", "127.0.0.1:1", "--duration", "1s"}, "sum to at most 1"},
		{[]string{"--addr", "127.0.0.1:1", "--duration", "1s"}, "no OpenEngine server answers"},
	} {
		var out, errb bytes.Buffer
		err := dispatch(append([]string{"bench", "serve", "--scenario", "soak"}, c.args...), &out, &errb)
		if err == nil {
			t.Errorf("%v: no error", c.args)
			continue
		}
		if c.err != "" && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v: error %q, want %q", c.args, err, c.err)
		}
	}
}
