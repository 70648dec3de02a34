package llama

import (
	"testing"

	"oengine/ggml"
)

// TestDecodeBatchMatchesSingle: a decode step of N sequences (one token
// each, every context in the KV store already) gives each sequence bitwise
// the logits of its own one-sequence decode step, for N on either side of
// the batch size from which the products use packed panels and token tiles
// (N = 1..16 and 33), contexts on both sides of f16AttnPositions, and the
// weight types with their own batched kernels. Two decode steps run, so
// the second reads K/V the batched step wrote.
func TestDecodeBatchMatchesSingle(t *testing.T) {
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeF16} {
		t.Run(typ.String(), func(t *testing.T) {
			m := synthModel(t, "llama", typ)
			V := m.Config().Vocab
			const maxN, pageSize, perSeq = 33, 8, 12 // up to 96 positions per sequence
			kvA, err := m.NewKV(maxN*perSeq, pageSize, KVF16)
			if err != nil {
				t.Fatal(err)
			}
			kvB, err := m.NewKV(maxN*perSeq, pageSize, KVF16)
			if err != nil {
				t.Fatal(err)
			}
			tables := make([][]int32, maxN)
			ctx := make([]int, maxN)
			for s := range tables {
				tables[s] = make([]int32, perSeq)
				for i := range tables[s] {
					tables[s][i] = int32(i*maxN + s) // sequences' pages interleaved
				}
				ctx[s] = 3 + (s*29)%85 // 3..87: both attention paths
				prompt := testTokens(ctx[s], V, uint32(100+s))
				pre := seqBatch(prompt, 0, tables[s])
				pre.Logits = nil
				for _, kv := range []*KV{kvA, kvB} {
					if err := m.Forward(kv, pre, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			step := func(seqs []int, round int) *Batch {
				b := &Batch{}
				for j, s := range seqs {
					b.Seqs = append(b.Seqs, tables[s])
					b.Tokens = append(b.Tokens, int32((s*131+round*17)%V))
					b.Pos = append(b.Pos, int32(ctx[s]+round))
					b.Seq = append(b.Seq, int32(j))
					b.Logits = append(b.Logits, int32(j))
				}
				return b
			}
			// Each N takes the next n sequences (wrapping around); a
			// sequence's context grows by 2 each time (at most 3 times:
			// positions stay below 96).
			used := 0
			for _, n := range []int{1, 3, 4, 8, 9, 16, 33} {
				seqs := make([]int, n)
				for j := range seqs {
					seqs[j] = (used + j) % maxN
				}
				for round := 0; round < 2; round++ {
					batched := make([]float32, n*V)
					if err := m.Forward(kvA, step(seqs, round), batched); err != nil {
						t.Fatal(err)
					}
					single := make([]float32, V)
					for j, s := range seqs {
						if err := m.Forward(kvB, step([]int{s}, round), single); err != nil {
							t.Fatal(err)
						}
						if i := firstDiff(batched[j*V:(j+1)*V], single); i >= 0 {
							t.Fatalf("N=%d round %d sequence %d (context %d): logit %d is %g in the batch, %g alone",
								n, round, s, ctx[s]+round, i, batched[j*V+i], single[i])
						}
					}
				}
				for _, s := range seqs {
					ctx[s] += 2
				}
				used += n
			}
		})
	}
}
