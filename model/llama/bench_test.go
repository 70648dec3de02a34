package llama

import "testing"

var benchModels = []string{"tiny-llama-f16", "tiny-llama-q8_0", "tiny-llama-q4_0", "tiny-llama-q4_k_m", "tiny-qwen2-q8_0", "tiny-qwen3-q4_k_m"}

// BenchmarkDecode measures one decode step (one token, one sequence) after
// a 256-token context, logits included.
func BenchmarkDecode(b *testing.B) {
	for _, name := range benchModels {
		b.Run(name, func(b *testing.B) {
			_, m := openShared(b, name)
			V := m.Config().Vocab
			kv, err := m.NewKV(32, 16, KVF16)
			if err != nil {
				b.Fatal(err)
			}
			table := make([]int32, 32)
			for i := range table {
				table[i] = int32(i)
			}
			const ctx = 256
			prompt := testTokens(ctx, V, 9)
			pre := seqBatch(prompt, 0, table)
			pre.Logits = pre.Logits[:0]
			if err := m.Forward(kv, pre, nil); err != nil {
				b.Fatal(err)
			}
			step := seqBatch([]int32{42}, ctx, table)
			logits := make([]float32, V)
			if err := m.Forward(kv, step, logits); err != nil { // warm-up: grow scratch
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := m.Forward(kv, step, logits); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkPrefill128 measures a 128-token prefill chunk of one sequence
// with the last token's logits.
func BenchmarkPrefill128(b *testing.B) {
	for _, name := range benchModels {
		b.Run(name, func(b *testing.B) {
			_, m := openShared(b, name)
			V := m.Config().Vocab
			kv, err := m.NewKV(8, 16, KVF16)
			if err != nil {
				b.Fatal(err)
			}
			table := []int32{0, 1, 2, 3, 4, 5, 6, 7}
			batch := seqBatch(testTokens(128, V, 10), 0, table)
			batch.Logits = []int32{127}
			logits := make([]float32, V)
			if err := m.Forward(kv, batch, logits); err != nil { // warm-up: grow scratch
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := m.Forward(kv, batch, logits); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(128*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
