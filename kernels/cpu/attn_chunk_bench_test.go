package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkAttendChunk is the attention of one layer for a 512-token
// prefill chunk at positions p0..p0+511 on one thread, with the shapes of
// `oengine synth --arch llama --dims 1024,8,16,4,2816,32000,4096` (4 KV
// heads of 4 query heads, head dimension 64, F16 pages of 16 rows):
// "tokens" calls AttendHeads once per token (what model/llama did before
// AttendChunk), "chunk" calls AttendChunk once per tile of
// AttnChunkTokens(g) tokens (what it does now), "chunk-avx2" the same
// with the AVX2 helpers where the AVX-512 ones run (attnZOn off). All
// give the same bits (TestAttendChunkMatchesAttendHeads). Group sizes 1
// to 8 with head dimension 64, and g = 1, 4 with 128 (Llama-3-8B's
// heads). GFLOP/s counts 4·d flops per (query head, attended position):
// q·k and the weighted V sum.
//
//	go test ./kernels/cpu -run '^$' -bench AttendChunk -benchtime 3x
func BenchmarkAttendChunk(b *testing.B) {
	const kvh, page, T = 4, 16, 512
	for _, c := range []struct{ g, p0, d int }{
		{4, 1024, 64}, {4, 0, 64}, {8, 1024, 64}, {8, 0, 64}, {2, 1024, 64}, {7, 1024, 64}, {7, 0, 64}, {6, 1024, 64}, {5, 1024, 64},
		{1, 1024, 64}, {3, 1024, 64}, {3, 0, 64}, {4, 1024, 128}, {1, 1024, 128},
	} {
		d := c.d
		n := c.p0 + T
		r := rand.New(rand.NewPCG(7, 7))
		k, table, _ := pagedStore(r, n, page, kvh*d, true)
		v, _ := sameTable(r, k, table, n, true)
		qd := kvh * c.g * d
		q := randVec(r, T*qd, 1)
		out := make([]float32, T*qd)
		scratch := make([]float32, max(AttnHeadsScratch(kvh, c.g, n, d), AttnChunkScratch(c.g, n, d)))
		flops := 0.0
		for t := 0; t < T; t++ {
			flops += float64(4 * d * kvh * c.g * (c.p0 + t + 1))
		}
		for _, mode := range []string{"tokens", "chunk", "chunk-avx2"} {
			if mode == "chunk-avx2" && !attnZOn {
				continue
			}
			name := fmt.Sprintf("g%d_p%d", c.g, c.p0)
			if d != 64 {
				name += fmt.Sprintf("_d%d", d)
			}
			b.Run(name+"/"+mode, func(b *testing.B) {
				defer func(on bool) { attnZOn = on }(attnZOn)
				attnZOn = mode != "chunk-avx2"
				for range b.N {
					if mode == "tokens" {
						for t := 0; t < T; t++ {
							AttendHeads(out[t*qd:(t+1)*qd], q[t*qd:(t+1)*qd], kvh, c.g, k, v, table, c.p0+t+1, 0.125, scratch)
						}
						continue
					}
					tt := AttnChunkTokens(c.g)
					for t0 := 0; t0 < T; t0 += tt {
						nt := min(tt, T-t0)
						AttendChunk(out[t0*qd:(t0+nt)*qd], q[t0*qd:(t0+nt)*qd], nt, kvh, c.g, k, v, table, c.p0+t0, 0.125, scratch)
					}
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
