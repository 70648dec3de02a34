package bench

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"oengine/ggml"
	"oengine/model/gguf"
	"oengine/model/synth"
	pb "oengine/proto/openengine/v1"
)

func TestParseDist(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    Dist
		wantErr bool
	}{
		{"fixed", "128", Fixed(128), false},
		{"uniform", "64:256", Dist{Kind: "uniform", Min: 64, Max: 256}, false},
		{"normal", "100~10", Dist{Kind: "normal", Min: 1, Max: 400, Mean: 100, Std: 10}, false},
		{"zero", "0", Dist{}, true},
		{"reversed", "9:3", Dist{}, true},
		{"garbage", "abc", Dist{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseDist(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if !c.wantErr && got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestDistSampleStaysInRange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range []Dist{Fixed(5), {Kind: "uniform", Min: 3, Max: 7}, {Kind: "normal", Min: 1, Max: 40, Mean: 10, Std: 20}} {
		seen := map[int]bool{}
		for range 2000 {
			v := d.Sample(r)
			if v < d.Min || v > d.Max {
				t.Fatalf("%v gave %d", d, v)
			}
			seen[v] = true
		}
		if d.Kind == "uniform" && len(seen) != 5 {
			t.Errorf("uniform 3:7 hit %d values, want 5", len(seen))
		}
	}
}

func TestGeneratorDeterministic(t *testing.T) {
	w := Workload{Input: Dist{Kind: "uniform", Min: 2, Max: 9}, Output: Fixed(4), Seed: 7}
	a, b := NewGenerator(w), NewGenerator(w)
	for i := range 5 {
		ra, rb := a.Next(), b.Next()
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("request %d differs: %+v vs %+v", i, ra, rb)
		}
		if n := len(strings.Fields(ra.Prompt)); n < 2 || n > 9 {
			t.Errorf("prompt of %d words outside 2..9", n)
		}
	}
	w.Prompts = []string{"a", "b"}
	g := NewGenerator(w)
	if got := []string{g.Next().Prompt, g.Next().Prompt, g.Next().Prompt}; strings.Join(got, "") != "aba" {
		t.Errorf("file prompts cycle as %v", got)
	}
}

func TestReadPromptsJSONL(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := ReadPromptsJSONL(write("ok.jsonl", "{\"prompt\":\"hi\"}\n\n{\"text\":\"there\",\"x\":1}\n"))
	if err != nil || len(got) != 2 || got[0] != "hi" || got[1] != "there" {
		t.Fatalf("got %q, %v", got, err)
	}
	for name, body := range map[string]string{"nofield.jsonl": "{\"q\":1}\n", "bad.jsonl": "{\n", "empty.jsonl": "\n"} {
		if _, err := ReadPromptsJSONL(write(name, body)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestSplitWordsConcatenates(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		text := SyntheticText(r, 1+r.IntN(30))
		n := 1 + r.IntN(8)
		parts := splitWords(text, n)
		if strings.Join(parts, "") != text {
			t.Fatalf("split of %q into %d does not concatenate: %q", text, n, parts)
		}
		if len(parts) > n || len(parts) == 0 {
			t.Fatalf("%d parts for n=%d", len(parts), n)
		}
		for _, p := range parts {
			if p == "" {
				t.Fatalf("empty part in %q", parts)
			}
		}
	}
}

func TestRunBounds(t *testing.T) {
	t.Run("count and concurrency", func(t *testing.T) {
		var inflight, peak atomic.Int32
		job := func(ctx context.Context, i int) []Result {
			n := inflight.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(2 * time.Millisecond)
			inflight.Add(-1)
			return []Result{{OutputTokens: 1}}
		}
		var mu sync.Mutex
		var last int
		rs, el, err := Run(context.Background(), Load{Concurrency: 3, Requests: 20}, job, func(d, total int) {
			mu.Lock()
			last = max(last, d)
			mu.Unlock()
			if total != 20 {
				t.Errorf("total %d", total)
			}
		})
		if err != nil || len(rs) != 20 || el <= 0 {
			t.Fatalf("%d results, %v, %v", len(rs), el, err)
		}
		if peak.Load() > 3 || peak.Load() < 2 {
			t.Errorf("peak in flight %d, want 3 (at most)", peak.Load())
		}
		if last != 20 {
			t.Errorf("progress reached %d", last)
		}
	})
	t.Run("duration stops an unbounded count", func(t *testing.T) {
		job := func(ctx context.Context, i int) []Result { time.Sleep(5 * time.Millisecond); return []Result{{}} }
		start := time.Now()
		rs, _, err := Run(context.Background(), Load{Concurrency: 2, Duration: 60 * time.Millisecond}, job, nil)
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > 2*time.Second || len(rs) == 0 {
			t.Fatalf("%d results after %v", len(rs), time.Since(start))
		}
	})
	t.Run("constant rate spaces arrivals", func(t *testing.T) {
		var mu sync.Mutex
		var starts []time.Time
		job := func(ctx context.Context, i int) []Result {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return nil
		}
		if _, _, err := Run(context.Background(), Load{Rate: 100, Requests: 6}, job, nil); err != nil {
			t.Fatal(err)
		}
		if span := starts[len(starts)-1].Sub(starts[0]); span < 45*time.Millisecond {
			t.Errorf("6 arrivals at 100/s spanned %v, want >= 50ms", span)
		}
	})
	t.Run("unbounded is refused", func(t *testing.T) {
		if _, _, err := Run(context.Background(), Load{Concurrency: 1}, nil, nil); !errors.Is(err, ErrUnbounded) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestMeterCancelsAfterTokens(t *testing.T) {
	ctx, m := startMeter(context.Background(), Request{Cancel: true, CancelAfter: 3})
	m.tokens(1)
	m.tokens(1)
	if ctx.Err() != nil {
		t.Fatal("cancelled too early")
	}
	m.tokens(1)
	if ctx.Err() == nil {
		t.Fatal("not cancelled after 3 tokens")
	}
	m.fail(context.Canceled)
	r := m.done()
	if !r.Cancelled || r.Err != "" || r.OutputTokens != 3 || len(r.ITLs) != 2 {
		t.Fatalf("result %+v", r)
	}
}

func TestMeterSplitsMultiTokenEvents(t *testing.T) {
	_, m := startMeter(context.Background(), Request{})
	m.tokens(1)
	time.Sleep(4 * time.Millisecond)
	m.tokens(4)
	r := m.done()
	if len(r.ITLs) != 4 || r.OutputTokens != 5 {
		t.Fatalf("ITLs %d tokens %d", len(r.ITLs), r.OutputTokens)
	}
	if r.ITLs[0] < time.Millisecond || r.ITLs[0] != r.ITLs[3] {
		t.Fatalf("gaps %v", r.ITLs)
	}
}

func TestReadSSE(t *testing.T) {
	in := ": keep-alive\n\nid: 1\nevent: started\ndata: {\"a\":1}\n\nid: 2\nevent: delta\ndata: x\ndata: y\n\ndata: [DONE]"
	var got []sseEvent
	if err := readSSE(strings.NewReader(in), func(e sseEvent) bool { got = append(got, e); return true }); err != nil {
		t.Fatal(err)
	}
	want := []sseEvent{{"started", `{"a":1}`}, {"delta", "x\ny"}, {"", "[DONE]"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

const sampleMetrics = `# HELP oengine:generation_tokens_total Tokens generated.
# TYPE oengine:generation_tokens_total counter
oengine:generation_tokens_total{model_name="m"} 10
# TYPE oengine:kv_cache_usage_perc gauge
oengine:kv_cache_usage_perc{model_name="m"} 0.25
# TYPE oengine:time_to_first_token_seconds histogram
oengine:time_to_first_token_seconds_bucket{model_name="m",le="0.1"} 3
# TYPE go_goroutines gauge
go_goroutines 12
llamacpp:kv_cache_usage_ratio 0.5
`

func TestParseMetricsAndFigures(t *testing.T) {
	before, err := ParseMetrics(strings.NewReader(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if v := before.Values[`oengine:generation_tokens_total{model_name="m"}`]; v != 10 {
		t.Fatalf("parsed %v", before.Values)
	}
	after, _ := ParseMetrics(strings.NewReader(strings.NewReplacer("} 10", "} 42", "} 0.25", "} 0.125").Replace(sampleMetrics)))
	figs := Figures(before, after, map[string]float64{`oengine:kv_cache_usage_perc{model_name="m"}`: 0.75})
	want := map[string]float64{
		`oengine:generation_tokens_total{model_name="m"}:delta`: 32,
		`oengine:kv_cache_usage_perc{model_name="m"}:after`:     0.125,
		`oengine:kv_cache_usage_perc{model_name="m"}:peak`:      0.75,
		`llamacpp:kv_cache_usage_ratio:after`:                   0.5,
	}
	if len(figs) != len(want) {
		t.Fatalf("figures %v, want %v", figs, want)
	}
	for k, v := range want {
		if figs[k] != v {
			t.Errorf("%s = %v, want %v", k, figs[k], v)
		}
	}
}

func TestParseCacheSize(t *testing.T) {
	cases := map[string]int64{"32768K\n": 32 << 20, "512K": 512 << 10, "8M": 8 << 20, "1G": 1 << 30, "100": 100, "x": 0}
	for in, want := range cases {
		if got := parseCacheSize(in); got != want {
			t.Errorf("parseCacheSize(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestErrorKind(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"kind error", &KindError{Kind: "http_429", Msg: "x"}, "http_429"},
		{"deadline", context.DeadlineExceeded, "timeout"},
		{"cancel", context.Canceled, "cancelled"},
		{"other", errors.New("boom"), "transport"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ErrorKind(c.err); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestBenchModelTiny(t *testing.T) {
	data, err := synth.Build(synth.Options{Arch: "llama", Preset: "tiny", Type: ggml.TypeQ8_0, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	res, err := BenchModel(f, ModelBenchConfig{PP: 40, TG: 6, Reps: 2, Threads: 2, Batch: 16, PageSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	if res.PPTokensPerS <= 0 || res.TGTokensPerS <= 0 || res.Type != "Q8_0" || res.Threads != 2 {
		t.Fatalf("result %+v", res)
	}
	emb, _ := f.Tensor("token_embd.weight")
	total := int64(0)
	for _, tt := range f.Tensors {
		total += int64(len(tt.Data))
	}
	if _, untied := f.Tensor("output.weight"); untied {
		want := total - int64(len(emb.Data)) + int64(len(emb.Data))/int64(emb.Rows())
		if res.WeightBytesPerToken != want {
			t.Errorf("weight bytes per token %d, want %d", res.WeightBytesPerToken, want)
		}
	} else if res.WeightBytesPerToken != total {
		t.Errorf("tied embeddings: weight bytes per token %d, want all %d", res.WeightBytesPerToken, total)
	}
	var b strings.Builder
	WriteModelTable(&b, []ModelBenchResult{res})
	if !strings.Contains(b.String(), "pp40") || !strings.Contains(b.String(), "tg6") {
		t.Errorf("table:\n%s", b.String())
	}
}

// TestBenchModelEncoder: an encoder's test embeds --inputs inputs of --pp
// tokens per forward pass (no decode test), and refuses inputs past its
// context.
func TestBenchModelEncoder(t *testing.T) {
	data, err := synth.Build(synth.Options{Arch: "bert", Dims: synth.Dims{Dim: 64, Layers: 2, Heads: 4, KVHeads: 4, FFN: 128, Vocab: 300, CtxLen: 64}, Type: ggml.TypeF16, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	res, err := BenchModel(f, ModelBenchConfig{PP: 40, TG: 6, Reps: 2, Threads: 2, PageSize: 16, Inputs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.PPTokensPerS <= 0 || res.TGTokensPerS != 0 || res.EmbedInputs != 3 || res.Batch != 120 {
		t.Fatalf("result %+v", res)
	}
	var b strings.Builder
	WriteModelTable(&b, []ModelBenchResult{res})
	if !strings.Contains(b.String(), "embed 3x40") || strings.Contains(b.String(), "tg") {
		t.Errorf("table:\n%s", b.String())
	}
	if _, err := BenchModel(f, ModelBenchConfig{PP: 65, Reps: 1}); err == nil || !strings.Contains(err.Error(), "context") {
		t.Fatalf("65 tokens per input of a 64-token encoder: %v", err)
	}
}

func TestServerDigest(t *testing.T) {
	figs := map[string]float64{
		`oengine:kv_cache_usage_perc{model_name="a"}:peak`:      0.5,
		`oengine:kv_cache_usage_perc{model_name="b"}:peak`:      0.25,
		`oengine:num_preemptions_total{model_name="a"}:delta`:   2,
		`oengine:num_preemptions_total{model_name="b"}:delta`:   3,
		`oengine:prefix_cache_hits_total{model_name="a"}:delta`: 7,
		`oengine:generation_tokens_total{model_name="a"}:delta`: 9,
		`go_goroutines:after`: 40,
	}
	got := ServerDigest(figs)
	want := "kv_peak=0.5 preemptions=5 prefix_hits=7 gen_tokens=9"
	if got != want {
		t.Fatalf("digest %q, want %q", got, want)
	}
	if ServerDigest(nil) != "" {
		t.Fatal("digest of nothing is not empty")
	}
}

func TestTick(t *testing.T) {
	cases := map[float64]string{0: "0", 0.3575: "0.357", 12.5: "12.5", 1234: "1.2k", 79420: "79k"}
	for in, want := range cases {
		if got := tick(in); got != want {
			t.Errorf("tick(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestReadEventsUsageWithLastTokens: a final event that carries both the
// last tokens and the usage must not count those tokens twice; the
// server's usage is what the result reports.
func TestReadEventsUsageWithLastTokens(t *testing.T) {
	tok := func(ids ...uint32) *pb.GenerateResponse_Token {
		out := &pb.TokenOutput{}
		for _, id := range ids {
			out.Tokens = append(out.Tokens, &pb.TokenInfo{TokenId: id})
		}
		return &pb.GenerateResponse_Token{Token: out}
	}
	evs := []*pb.GenerateResponse{
		{Event: tok(5, 6)},
		{Event: tok(7), Usage: &pb.Usage{PromptTokens: 11, CompletionTokens: 3}},
	}
	i := 0
	recv := func() (*pb.GenerateResponse, error) {
		if i == len(evs) {
			return nil, io.EOF
		}
		i++
		return evs[i-1], nil
	}
	_, m := startMeter(context.Background(), Request{InputTokens: 11, MaxTokens: 3, IgnoreEOS: true})
	var out output
	if err := readEvents(m, recv, &out); err != nil {
		t.Fatal(err)
	}
	r := m.done()
	if r.OutputTokens != 3 || r.PromptTokens != 11 || len(out.ids) != 3 || r.OutputOff() || r.InputOff() {
		t.Fatalf("result %+v ids %v", r, out.ids)
	}
}
