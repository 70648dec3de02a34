package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkAttend measures one query group (g heads sharing a KV head)
// attending over n positions, for both arithmetic variants; bytes are the
// K and V values read.
func BenchmarkAttend(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct{ g, d, n int }{{2, 64, 1024}, {8, 64, 512}, {8, 128, 1024}} {
		k, table, _ := pagedStore(r, c.n, 16, c.d, true)
		v, _ := sameTable(r, k, table, c.n, true)
		q := randVec(r, c.g*c.d, 1)
		out := make([]float32, c.g*c.d)
		scratch := make([]float32, AttnScratch(c.g, c.n, c.d))
		for _, fn := range []struct {
			name string
			f    func(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, scratch []float32)
		}{{"Attend", Attend}, {"AttendF16", AttendF16}} {
			b.Run(fmt.Sprintf("%s/g%d_d%d_n%d", fn.name, c.g, c.d, c.n), func(b *testing.B) {
				b.SetBytes(int64(2 * 2 * c.n * c.d))
				for range b.N {
					fn.f(out, q, c.g, k, v, table, c.n, 0, 0.125, scratch)
				}
			})
		}
	}
}

func BenchmarkRMSNorm(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	x, w := randVec(r, 4096, 1), randVec(r, 4096, 1)
	dst := make([]float32, 4096)
	b.SetBytes(4 * 4096)
	for range b.N {
		RMSNorm(dst, x, w, 1e-5)
	}
}

func BenchmarkSwiGLU(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	g, u := randVec(r, 14336, 2), randVec(r, 14336, 1)
	dst := make([]float32, 14336)
	b.SetBytes(4 * 14336)
	for range b.N {
		SwiGLU(dst, g, u)
	}
}

func BenchmarkRope(b *testing.B) {
	r := rand.New(rand.NewPCG(4, 4))
	x := randVec(r, 32*128, 1)
	cs := make([]float32, 128)
	for i := range b.N {
		RopeCache(cs, int32(i%4096), 128, 500000, 1, nil)
		Rope(x, 32, 128, 128, cs, false)
	}
}

// BenchmarkAttendStep is the attention of a batched decode step as
// model/llama runs it (tinyllama-1.1b shapes: 4 KV heads of 8 query heads,
// head dimension 64, F16 pages of 16 rows): seqs sequences at context ctx,
// over enough layers that the K/V (distinct pages per layer and
// sequence) come from memory, not cache, on a 2-thread pool. "heads":
// one work item per (token, KV head), Attend on the head's columns (every
// row read as four strided streams); "rows": one item per token,
// AttendHeads on whole rows. Items are interleaved over the two slots as
// llama's attnSlots does. cpu-us/call is per (token, KV head).
func BenchmarkAttendStep(b *testing.B) {
	const g, d, kvHeads, page, seqs = 8, 64, 4, 16, 16
	// layers 1: the same step with the K/V in the last-level cache
	// (8.6 MB at context 512).
	for _, c := range []struct{ ctx, layers int }{{512, 22}, {2048, 6}, {512, 1}} {
		for _, rows := range []bool{false, true} {
			mode := "heads"
			if rows {
				mode = "rows"
			}
			b.Run(fmt.Sprintf("ctx%d/layers%d/%s", c.ctx, c.layers, mode), func(b *testing.B) {
				benchAttendStep(b, g, d, kvHeads, page, seqs, c.ctx, c.layers, rows)
			})
		}
	}
}

// BenchmarkAttendStepZ compares attention's AVX-512 decode path
// (attnZOn, attn_z_avx512_amd64.s) with the AVX2 helpers side by side
// for each group size it covers: g8 is tinyllama-1.1b (4 KV heads of 8,
// d 64), g4 Llama-3-8B (8 KV heads of 4, d 128), g2 8 KV heads of 2, d
// 128, g7 Qwen2.5-7B (4 KV heads of 7, d 128), g6 Qwen2.5-1.5B (2 of 6),
// g5 Qwen2.5-14B (8 of 5), g1 Llama-2-7B (32 KV heads of 1, d 128); 16
// sequences with their K/V from memory, whole rows (AttendHeads)
// as model/llama runs it. cpu-us/call is per (token, KV head).
func BenchmarkAttendStepZ(b *testing.B) {
	for _, s := range []struct {
		name                 string
		g, d, kvh, layers512 int // layers at context 512 (a quarter at 2048)
	}{{"g8", 8, 64, 4, 22}, {"g4", 4, 128, 8, 6}, {"g2", 2, 128, 8, 10},
		{"g7", 7, 128, 4, 12}, {"g6", 6, 128, 2, 24}, {"g5", 5, 128, 8, 6}, {"g1", 1, 128, 32, 2}} {
		for _, ctx := range []int{512, 2048} {
			layers := s.layers512
			if ctx == 2048 {
				layers = max(1, layers/4)
			}
			for _, z := range []bool{true, false} {
				mode := map[bool]string{true: "z", false: "avx2"}[z]
				b.Run(fmt.Sprintf("%s/ctx%d/%s", s.name, ctx, mode), func(b *testing.B) {
					if z && !hasAVX512F16 {
						b.Skip("no AVX-512 on this CPU")
					}
					defer func(on bool) { attnZOn = on }(attnZOn)
					attnZOn = z
					benchAttendStep(b, s.g, s.d, s.kvh, 16, 16, ctx, layers, true)
				})
			}
		}
	}
}

func benchAttendStep(b *testing.B, g, d, kvHeads, page, seqs, ctx, layers int, rows bool) {
	n := ctx + 1
	per := (n + page - 1) / page
	stride := kvHeads * d
	r := rand.New(rand.NewPCG(5, 5))
	vals := make([]uint16, page*stride) // one page of values, repeated
	for i := range vals {
		vals[i] = F32ToF16(float32(r.NormFloat64()))
	}
	store := func() KVRows {
		kv := KVRows{F16: make([]uint16, seqs*per*page*stride), PageSize: page, Stride: stride}
		for o := 0; o < len(kv.F16); o += len(vals) {
			copy(kv.F16[o:], vals)
		}
		return kv
	}
	ks, vs := make([]KVRows, layers), make([]KVRows, layers)
	for l := range ks {
		ks[l], vs[l] = store(), store()
	}
	tables := make([][]int32, seqs)
	for s := range tables {
		tables[s] = make([]int32, per)
		for i := range tables[s] {
			tables[s][i] = int32(s*per + i)
		}
	}
	q := randVec(r, seqs*kvHeads*g*d, 1)
	out := make([]float32, len(q))
	pool := NewPool(2)
	defer pool.Close()
	const slots = 2
	scratch := make([][]float32, slots)
	for s := range scratch {
		scratch[s] = make([]float32, max(AttnScratch(g, n, d), AttnHeadsScratch(kvHeads, g, n, d)))
	}
	layer := 0
	items := seqs * kvHeads
	if rows {
		items = seqs
	}
	fn := func(lo, hi int) {
		for s := lo; s < hi; s++ {
			for it := s; it < items; it += slots {
				if rows {
					o := it * kvHeads * g * d
					AttendHeads(out[o:o+kvHeads*g*d], q[o:o+kvHeads*g*d], kvHeads, g, ks[layer], vs[layer], tables[it], n, 0.125, scratch[s])
					continue
				}
				i, h := it/kvHeads, it%kvHeads
				o := (i*kvHeads + h) * g * d
				Attend(out[o:o+g*d], q[o:o+g*d], g, ks[layer], vs[layer], tables[i], n, h*d, 0.125, scratch[s])
			}
		}
	}
	b.SetBytes(int64(layers * seqs * kvHeads * n * d * 2 * 2))
	b.ResetTimer()
	c0 := benchCPUTime()
	for range b.N {
		for layer = range layers {
			pool.For(slots, fn)
		}
	}
	// CPU time per (token, KV head) (both threads; spin-waits included):
	// on a shared box wall time swings with the neighbours' load.
	b.ReportMetric(float64(benchCPUTime()-c0)/1e3/float64(b.N*layers*seqs*kvHeads), "cpu-us/call")
}
