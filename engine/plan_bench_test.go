package engine

import (
	"log/slog"
	"testing"

	"oengine/kvcache"
	"oengine/scheduler"
)

// BenchmarkPlan64 measures the scheduling overhead of one step (Plan +
// Advance over the real KV cache) with 64 decoding sequences.
func BenchmarkPlan64(b *testing.B) {
	c, err := kvcache.New(kvcache.Config{NumPages: 8192})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sc, err := scheduler.New(scheduler.Config{MaxBatchedTokens: 512, MaxRunning: 64}, &kvAlloc{c: c, log: slog.Default()})
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, 32)
	start := func(base int32) {
		for i := 0; i < 64; i++ {
			for j := range prompt {
				prompt[j] = base + int32(i*32+j)
			}
			if _, err := sc.Add(scheduler.SeqOptions{Tokens: prompt}); err != nil {
				b.Fatal(err)
			}
		}
		for k := 0; k < 8; k++ {
			p := sc.Plan()
			sc.Advance(&p)
			for _, it := range p.Items {
				if it.Sample {
					_ = sc.Append(it.Seq, 7)
				}
			}
		}
	}
	start(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := sc.Plan()
		sc.Advance(&p)
		if len(p.Items) != 64 {
			b.Fatalf("%d items", len(p.Items))
		}
		for _, it := range p.Items {
			_ = sc.Append(it.Seq, 7)
		}
		if i%1024 == 1023 { // keep sequences within the pool
			b.StopTimer()
			for _, it := range p.Items {
				sc.Finish(it.Seq)
			}
			start(int32(i))
			b.StartTimer()
		}
	}
}
