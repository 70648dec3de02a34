package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"oengine/bench"
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

// bench serve exits non-zero when every request fails (a server that
// refuses everything), and zero when some succeed.
func TestBenchServeAllFailed(t *testing.T) {
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"message":"model not found","type":"not_found_error","code":"model_not_found"}}`))
	}))
	defer refuse.Close()
	var out, errOut bytes.Buffer
	err := runBenchServe([]string{"--target", "openai", "--url", refuse.URL, "--metrics-url", "none",
		"--requests", "3", "--concurrency", "1", "--input-len", "4", "--output-len", "2"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "all 3 requests failed") {
		t.Fatalf("err %v, want every request failed\n%s", err, out.String())
	}
	if bench.AllFailed([]bench.Report{{Requests: 3, Succeeded: 1, Errors: map[string]int{"x": 2}}}) != nil {
		t.Fatal("a run with a success is not a failure")
	}
	if bench.AllFailed([]bench.Report{{Requests: 3, Cancelled: 3, Errors: map[string]int{}}}) != nil {
		t.Fatal("a run cancelled on purpose is not a failure")
	}
}
