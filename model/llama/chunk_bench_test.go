package llama

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/model/synth"
)

// BenchmarkPrefillChunkAt measures a 512-token prefill chunk of one
// sequence at positions p0..p0+511 (the last token's logits included) on
// the model of `oengine synth --arch llama --dims
// 1024,8,16,4,2816,32000,4096 --type q4_0` (4 query heads per KV head,
// head dimension 64) on a 2-thread pool: deep into a prompt the chunk's
// cost grows with p0 through attention alone. The K/V of positions below
// p0 are random F16 rows written directly, as an earlier chunk would leave
// them.
//
//	go test ./model/llama -run '^$' -bench PrefillChunkAt -benchtime 3x
func BenchmarkPrefillChunkAt(b *testing.B) {
	const T, page = 512, 16
	m := synthLoad(b, synth.Options{Type: ggml.TypeQ4_0, Seed: 5,
		Dims: synth.Dims{Dim: 1024, Layers: 8, Heads: 16, KVHeads: 4, FFN: 2816, Vocab: 32000, CtxLen: 4096, RopeBase: 10000}})
	defer m.Close()
	V := m.Config().Vocab
	for _, p0 := range []int{0, 512, 1024} {
		b.Run(fmt.Sprintf("p%d", p0), func(b *testing.B) {
			pages := (p0 + T) / page
			kv, err := m.NewKV(pages, page, KVF16)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(9, uint64(p0)))
			row := make([]float32, kv.stride)
			half := make([]uint16, kv.stride)
			for l := range kv.k {
				for _, rows := range []cpu.KVRows{kv.k[l], kv.v[l]} {
					for p := 0; p < p0; p++ {
						for i := range row {
							row[i] = float32(rng.NormFloat64())
						}
						cpu.StoreRowF16(half, row)
						copy(rows.F16[p*kv.stride:], half)
					}
				}
			}
			table := make([]int32, pages)
			for i := range table {
				table[i] = int32(i)
			}
			batch := seqBatch(testTokens(T, V, 10), p0, table)
			batch.Logits = []int32{T - 1}
			benchForward(b, m, kv, batch, T)
		})
	}
}
