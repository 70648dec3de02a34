package llama

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/model/synth"
)

// Batched decode benchmarks on a synthetic model with the shapes of
// TinyLlama 1.1B (synth preset tinyllama-1.1b) cut to benchLayers layers
// (OENGINE_BENCH_LAYERS overrides; 22 is the whole model) so that a run
// takes seconds on two cores. The output head (32000 × 2048) is kept, so
// per-token work is that of the full model's last layers plus the head.
//
//	go test ./model/llama -run '^$' -bench 'DecodeBatch|PrefillChunk' -benchtime 5x

// benchLayers is the default layer count of the batch benchmarks.
const benchLayers = 4

var benchSynth struct {
	mu     sync.Mutex
	models map[ggml.Type]*Model
}

// batchBenchModel returns the cut TinyLlama model of weight type typ on a
// 2-thread pool, built once per test binary and loaded as `oengine serve`
// loads a file (Q4_0 in the decode layout where this CPU has it).
func batchBenchModel(b *testing.B, typ ggml.Type) *Model {
	benchSynth.mu.Lock()
	defer benchSynth.mu.Unlock()
	if m, ok := benchSynth.models[typ]; ok {
		return m
	}
	layers := benchLayers
	if s := os.Getenv("OENGINE_BENCH_LAYERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("OENGINE_BENCH_LAYERS=%q", s)
		}
		layers = n
	}
	d := synth.Presets["tinyllama-1.1b"]
	d.Layers = layers
	m := synthLoadServed(b, synth.Options{Dims: d, Type: typ, Seed: 11})
	if benchSynth.models == nil {
		benchSynth.models = map[ggml.Type]*Model{}
	}
	benchSynth.models[typ] = m // kept for the life of the test binary
	return m
}

// benchPageSize is the engine's default page size (kvcache.DefaultPageSize).
const benchPageSize = 16

// decodeBatchSetup returns a KV store in which each of n sequences holds
// ctx positions of K/V (seeded random values written directly, as a
// prefill would leave them, in pages of its own) and the decode step of
// the n sequences at position ctx, all logits wanted.
func decodeBatchSetup(b *testing.B, m *Model, n, ctx int) (*KV, *Batch) {
	per := ctx/benchPageSize + 1
	kv, err := m.NewKV(n*per, benchPageSize, KVF16)
	if err != nil {
		b.Fatal(err)
	}
	// Random rows: one page of values per layer, repeated over the pages.
	rng := rand.New(rand.NewPCG(3, uint64(n*ctx)))
	stride := kv.stride
	src := make([]float32, benchPageSize*stride)
	page := make([]uint16, len(src))
	for l := range kv.k {
		for _, rows := range []cpu.KVRows{kv.k[l], kv.v[l]} {
			for i := range src {
				src[i] = float32(rng.NormFloat64())
			}
			cpu.StoreRowF16(page, src)
			for o := 0; o < len(rows.F16); o += len(page) {
				copy(rows.F16[o:], page)
			}
		}
	}
	step := &Batch{}
	V := m.Config().Vocab
	for s := 0; s < n; s++ {
		table := make([]int32, per)
		for i := range table {
			table[i] = int32(s*per + i)
		}
		step.Seqs = append(step.Seqs, table)
		step.Tokens = append(step.Tokens, int32((s*7919+13)%V))
		step.Pos = append(step.Pos, int32(ctx))
		step.Seq = append(step.Seq, int32(s))
		step.Logits = append(step.Logits, int32(s))
	}
	return kv, step
}

var batchBenchTypes = []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeF16}

// BenchmarkDecodeBatch measures one decode step of n sequences, each with
// ctx positions already in the KV store, logits of every sequence
// included: tok/s is n tokens per step. The attn sub-benchmark runs only
// the step's attention over the pages (all layers), so attn ns/op over the
// step's ns/op is attention's share of the step.
func BenchmarkDecodeBatch(b *testing.B) {
	for _, typ := range batchBenchTypes {
		for _, ctx := range []int{512, 2048} {
			for _, n := range []int{1, 4, 16, 64} {
				b.Run(fmt.Sprintf("%s/ctx%d/n%d", typ, ctx, n), func(b *testing.B) {
					m := batchBenchModel(b, typ)
					kv, step := decodeBatchSetup(b, m, n, ctx)
					benchForward(b, m, kv, step, n)
				})
				b.Run(fmt.Sprintf("%s/ctx%d/n%d/attn", typ, ctx, n), func(b *testing.B) {
					m := batchBenchModel(b, typ)
					kv, step := decodeBatchSetup(b, m, n, ctx)
					logits := make([]float32, n*m.Config().Vocab)
					if err := m.Forward(kv, step, logits); err != nil { // fills q and the scratch
						b.Fatal(err)
					}
					b.ResetTimer()
					c0 := cpuTime()
					for range b.N {
						m.attentionOnly(kv, step)
					}
					reportCPU(b, c0)
				})
			}
		}
	}
}

// attentionOnly runs the attention of every layer for the batch of the
// last Forward call (its queries are still in the scratch).
func (m *Model) attentionOnly(kv *KV, b *Batch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := &m.fw
	f.kv, f.b, f.t = kv, b, len(b.Tokens)
	f.planAttn()
	for l := range m.layers {
		f.layer = l
		m.pool.For(f.slots, f.attnFn)
	}
	f.kv, f.b = nil, nil
}

// BenchmarkPrefillChunk measures a 512-token prefill chunk of one sequence
// from position 0 with the last token's logits (the engine's default chunk):
// the prefill tok/s that batched decode is compared with.
func BenchmarkPrefillChunk(b *testing.B) {
	const T = 512
	for _, typ := range batchBenchTypes {
		b.Run(typ.String(), func(b *testing.B) {
			m := batchBenchModel(b, typ)
			V := m.Config().Vocab
			kv, err := m.NewKV(T/benchPageSize, benchPageSize, KVF16)
			if err != nil {
				b.Fatal(err)
			}
			table := make([]int32, T/benchPageSize)
			for i := range table {
				table[i] = int32(i)
			}
			batch := seqBatch(testTokens(T, V, 10), 0, table)
			batch.Logits = []int32{T - 1}
			benchForward(b, m, kv, batch, T)
		})
	}
}

// benchForward times m.Forward on batch after one warm-up call that grows
// the scratch, and reports CPU time and the batch's tokens per second.
func benchForward(b *testing.B, m *Model, kv *KV, batch *Batch, tokens int) {
	b.Helper()
	logits := make([]float32, len(batch.Logits)*m.Config().Vocab)
	if err := m.Forward(kv, batch, logits); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	c0 := cpuTime()
	for range b.N {
		if err := m.Forward(kv, batch, logits); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, c0)
	b.ReportMetric(float64(tokens*b.N)/b.Elapsed().Seconds(), "tok/s")
}

// cpuTime returns the process's user + system CPU time. On a shared box
// wall time swings with the neighbours' load; CPU time (both pool threads
// together, spin-waits included) much less.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU milliseconds per op since c0 (cpu-ms/op).
func reportCPU(b *testing.B, c0 time.Duration) {
	b.ReportMetric(float64(cpuTime()-c0)/1e6/float64(b.N), "cpu-ms/op")
}
