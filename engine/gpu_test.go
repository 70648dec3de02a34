package engine

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"oengine/kernels/cuda/cudaemu"
	"oengine/model/gguf"
	"oengine/model/gpu"
	"oengine/model/tokenizer"
	"oengine/sampling"
)

// The engine suites that matter, a second time on the CUDA model
// (model/gpu) over the emulated device (kernels/cuda/cudaemu): K/V pages in
// device memory, copy-on-write forks as device page copies, whole plans
// run on the device.

// tinyGPUModel loads a reference model from shared/testdata on a fresh
// emulated device; maxT is the decoder's step size (plans of more tokens
// run as several device steps).
func tinyGPUModel(t testing.TB, name string, maxT int) (*gpu.Decoder, *cudaemu.Device, Tokenizer) {
	t.Helper()
	path := filepath.Join(sharedTestdata(t), "models", name)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	d, err := cudaemu.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	m, err := gpu.Load(d.Device, f, gpu.Options{MaxTokens: maxT, ExactMatMul: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, d, WrapTokenizer(tok)
}

// countingModel counts the page copies the engine asks of the model's KV.
type countingModel struct {
	Model
	copies atomic.Int64
}

type countingKV struct {
	KV
	n *atomic.Int64
}

func (c *countingKV) CopyPage(dst, src int32) { c.n.Add(1); c.KV.CopyPage(dst, src) }

// Close frees the wrapped store (the engine closes what NewKV returned).
func (c *countingKV) Close() {
	if cl, ok := c.KV.(interface{ Close() }); ok {
		cl.Close()
	}
}

func (c *countingModel) NewKV(pages, pageSize int) (KV, error) {
	kv, err := c.Model.NewKV(pages, pageSize)
	if err != nil {
		return nil, err
	}
	return &countingKV{KV: kv, n: &c.copies}, nil
}

func (c *countingModel) Forward(kv KV, b *Batch, logits []float32) error {
	return c.Model.Forward(kv.(*countingKV).KV, b, logits)
}

// TestGPUBatchInvariance: concurrent requests on the CUDA model give what
// each gives alone, batched, with chunked prefill and with a pool small
// enough to preempt (steps of 48 tokens: larger plans split on the device).
func TestGPUBatchInvariance(t *testing.T) {
	m, _, tok := tinyGPUModel(t, "tiny-llama-q8_0.gguf", 48)
	batchInvariance(t, FromGPU(m), tok)
}

// TestGPUSpeculation: speculative decoding with the target on the CUDA
// model (K+1 rows per speculating output in one device step) and the
// draft on the CPU gives plain greedy decoding's tokens (logprobs within
// 1e-4: the device's row order differs with the step's size).
func TestGPUSpeculation(t *testing.T) {
	g, _, tok := tinyGPUModel(t, "tiny-llama-q8_0.gguf", 64)
	d, _ := loadRef(t, "tiny-llama-q4_0.gguf")
	prompts := refPrompts(t)[:4]
	specEqualsPlain(t, FromGPU(g), tok, prompts, 16, 1e-4, []specVariant{
		{"ngram", Speculation{NGram: true}},
		{"cpu q4_0 draft", Speculation{Draft: d, Tokens: 3}},
	})
}

func TestGPUPrefixReuse(t *testing.T) {
	m, _, tok := tinyGPUModel(t, "tiny-qwen2-q8_0.gguf", 512)
	prefixReuse(t, FromGPU(m), tok)
}

// TestGPUForkCopiesPages: the outputs of a greedy n = 3 request fork the
// prompt's sequence; appending to the shared last page copies it on the
// device, and every output equals the request run alone with n = 1 (a
// missing or wrong copy would change the keys the outputs attend to).
func TestGPUForkCopiesPages(t *testing.T) {
	g, _, tok := tinyGPUModel(t, "tiny-llama-f16.gguf", 512)
	m := &countingModel{Model: FromGPU(g)}
	e := newRealEngine(t, Config{PageSize: 16}, m, tok)
	req := Request{Prompt: "Once upon a time, in a land far away,", MaxTokens: 12, Sampling: greedy(),
		Stop: StopParams{IgnoreEOS: true}}
	alone := run(t, e, req)
	req.N = 3
	forked := run(t, e, req)
	for i := 0; i < 3; i++ {
		if !equalTokens(forked.tokens[i], alone.tokens[0]) {
			t.Fatalf("output %d: %v, alone %v", i, forked.tokens[i], alone.tokens[0])
		}
	}
	if e.cache.Stats().COWCopies == 0 || m.copies.Load() == 0 {
		t.Fatalf("no page copied (cache COW %d, device copies %d)", e.cache.Stats().COWCopies, m.copies.Load())
	}
	t.Logf("device page copies: %d", m.copies.Load())
}

// TestGPUCancelStorm: requests cancelled at random points on the CUDA
// model; the page ledger is consistent, the goroutines are back to the
// baseline, and closing the engine and the model frees every device
// allocation they made.
func TestGPUCancelStorm(t *testing.T) {
	base := runtime.NumGoroutine()
	n := 64
	if testing.Short() || raceEnabled {
		n = 24
	}
	m, d, tok := tinyGPUModel(t, "tiny-llama-q4_0.gguf", 64)
	live := d.Live()
	e, err := New(Config{KVPages: 24, PageSize: 16, MaxBatchedTokens: 48, MaxRunning: 8, EventQueue: 8}, FromGPU(m), tok)
	if err != nil {
		t.Fatal(err)
	}
	if d := e.Limits().Device; !strings.HasPrefix(d, "cuda:0 Fake H200") {
		t.Fatalf("engine device %q", d)
	}
	kvAllocs := 2 * m.Config().Layers // K and V per layer
	if got := d.Live() - live; got != kvAllocs {
		t.Fatalf("the engine's KV store made %d device allocations, want %d", got, kvAllocs)
	}
	cancelStorm(t, e, n)
	checkLedger(t, e)
	live = d.Live() // now with the step buffers and scratch the forward passes sized
	e.Close()
	if got := d.Live(); got != live-kvAllocs {
		t.Fatalf("device allocations: %d after the engine closed, %d before: the KV store was not freed", got, live)
	}
	m.Close()
	d.Close()
	if got := d.Live(); got != 0 {
		t.Fatalf("%d device allocations left", got)
	}
	waitGoroutines(t, base)
}

// greedyCounting is the CUDA model counting its two kinds of step.
type greedyCounting struct {
	GreedyModel
	greedy, full atomic.Int64
}

func (g *greedyCounting) Forward(kv KV, b *Batch, logits []float32) error {
	g.full.Add(1)
	return g.GreedyModel.Forward(kv, b, logits)
}

func (g *greedyCounting) ForwardGreedy(kv KV, b *Batch, out []int32) error {
	g.greedy.Add(1)
	return g.GreedyModel.ForwardGreedy(kv, b, out)
}

// hostOnly hides ForwardGreedy: every step brings its logits back.
type hostOnly struct{ Model }

// TestGPUDeviceGreedy: steps whose outputs are all plain greedy take the
// argmax on the device (no logits rows come back) and give the tokens the
// host's choice gives; a step with an output that needs its row (sampled,
// logprobs, min_tokens) brings the logits back, and the greedy outputs
// sharing it are unchanged.
func TestGPUDeviceGreedy(t *testing.T) {
	g, _, tok := tinyGPUModel(t, "tiny-llama-q8_0.gguf", 64)
	prompts := refPrompts(t)
	var reqs []Request
	for i, p := range prompts[:min(6, len(prompts))] {
		r := Request{Prompt: p, MaxTokens: 5 + 3*i, Sampling: greedy()}
		switch i {
		case 1:
			r.N = 2
		case 2:
			r.Stop.IgnoreEOS = true
		case 3:
			r.Stop.Strings = []string{"e"}
		}
		reqs = append(reqs, r)
	}
	host := newRealEngine(t, Config{}, hostOnly{FromGPU(g)}, tok)
	want := concurrent(t, host, reqs)

	gm := &greedyCounting{GreedyModel: FromGPU(g).(GreedyModel)}
	dev := newRealEngine(t, Config{MaxBatchedTokens: 32}, gm, tok)
	got := concurrent(t, dev, reqs)
	for i := range reqs {
		if want[i].err != nil || got[i].err != nil {
			t.Fatalf("request %d: host %v, device %v", i, want[i].err, got[i].err)
		}
		for k := range want[i].tokens {
			if !equalTokens(got[i].tokens[k], want[i].tokens[k]) || got[i].text[k] != want[i].text[k] {
				t.Fatalf("request %d output %d: device %v %q, host %v %q", i, k, got[i].tokens[k], got[i].text[k], want[i].tokens[k], want[i].text[k])
			}
		}
	}
	if gm.greedy.Load() == 0 {
		t.Fatal("no step chose its tokens on the device")
	}
	t.Logf("all greedy: %d device-argmax steps, %d logits steps", gm.greedy.Load(), gm.full.Load())

	// One output needing its row in every step keeps the others' tokens.
	gm.greedy.Store(0)
	mixed := append([]Request(nil), reqs...)
	needRow := Request{Prompt: prompts[0], MaxTokens: 40, Sampling: greedy(), MinTokens: 40,
		Logprobs: &sampling.Candidates{Mode: sampling.CandidatesTopN, TopN: 1}}
	mixed = append([]Request{needRow}, mixed...)
	got = concurrent(t, newRealEngine(t, Config{}, gm, tok), mixed)
	for i := range reqs {
		if got[i+1].err != nil || !equalTokens(got[i+1].tokens[0], want[i].tokens[0]) {
			t.Fatalf("mixed: request %d: %v %v, want %v", i, got[i+1].err, got[i+1].tokens, want[i].tokens)
		}
	}
	if gm.full.Load() == 0 {
		t.Fatal("no step brought its logits back for the output with logprobs")
	}
	if got[0].err != nil || len(got[0].lps[0]) != len(got[0].tokens[0]) {
		t.Fatalf("the output with logprobs: %v, %d logprobs for %d tokens", got[0].err, len(got[0].lps[0]), len(got[0].tokens[0]))
	}
}

// TestGPUGreedyStepOverMaxTokens: a greedy step of more tokens than the
// decoder's step size (a decode token beside a long prefill chunk, with
// --max-batched-tokens above the device step) runs as several device steps
// instead of failing the step's requests; outputs equal the CPU engine's.
func TestGPUGreedyStepOverMaxTokens(t *testing.T) {
	m, _, tok := tinyGPUModel(t, "tiny-llama-f16.gguf", 16)
	e := newRealEngine(t, Config{KVPages: 256, MaxBatchedTokens: 64, MaxStepLatency: -1}, FromGPU(m), tok)
	cm, ctok := loadRef(t, "tiny-llama-f16.gguf")
	ce := newRealEngine(t, Config{KVPages: 256}, cm, ctok)
	reqs := []Request{
		{Prompt: "Once upon a time", MaxTokens: 40, Sampling: greedy(), Stop: StopParams{IgnoreEOS: true}},
		{Prompt: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 10), MaxTokens: 8, Sampling: greedy(), Stop: StopParams{IgnoreEOS: true}},
	}
	first, err := e.Submit(context.Background(), reqs[0])
	if err != nil {
		t.Fatal(err)
	}
	ev, err := first.Next(context.Background()) // decoding before the long prompt arrives
	if err != nil || ev.Kind == EventError {
		t.Fatalf("first event %v, %v", ev, err)
	}
	got := []result{{}, run(t, e, reqs[1])}
	rest := collect(t, first, 1)
	if got[1].err != nil || rest.err != nil {
		t.Fatalf("errors: %v, %v", got[1].err, rest.err)
	}
	for i, r := range reqs {
		want := run(t, ce, r)
		g := got[i].tokens
		if i == 0 {
			g = [][]int32{append(tokenIDs(ev), rest.tokens[0]...)}
		}
		if !equalTokens(g[0], want.tokens[0]) {
			t.Fatalf("request %d: %v, CPU %v", i, g[0], want.tokens[0])
		}
	}
}

func tokenIDs(ev Event) []int32 {
	var out []int32
	for _, tk := range ev.Tokens {
		out = append(out, tk.ID)
	}
	return out
}

// TestGPULogitBias: a greedy request with a logit bias takes its choice on
// the host, where the bias is applied (the device argmax never sees it):
// +100 on a token makes every generated token that one.
func TestGPULogitBias(t *testing.T) {
	g, _, tok := tinyGPUModel(t, "tiny-llama-q8_0.gguf", 64)
	gm := &greedyCounting{GreedyModel: FromGPU(g).(GreedyModel)}
	e := newRealEngine(t, Config{}, gm, tok)
	s := greedy()
	s.LogitBias = []sampling.TokenBias{{ID: 500, Bias: 100}}
	got := concurrent(t, e, []Request{{Prompt: "Once upon a time", MaxTokens: 4, Sampling: s, Stop: StopParams{IgnoreEOS: true}}})
	if got[0].err != nil || len(got[0].tokens[0]) != 4 {
		t.Fatalf("%v, tokens %v", got[0].err, got[0].tokens)
	}
	for _, tk := range got[0].tokens[0] {
		if tk != 500 {
			t.Fatalf("tokens %v, want 500 each (+100 bias)", got[0].tokens[0])
		}
	}
	if gm.greedy.Load() != 0 {
		t.Fatalf("%d steps took the device argmax with a logit bias in force", gm.greedy.Load())
	}
}
