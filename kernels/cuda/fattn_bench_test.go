package cuda

import (
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkGPUAttnPrefill: causal prefill attention of one 2048-token
// prompt with Llama-3-8B heads (32 query heads, 8 KV heads, head dim 128,
// pages of 16), on tensor cores (attn_prefill_mma, tiles of 16 tokens;
// split: hi+lo F16 pairs as the decoder runs it, f16: plain F16 Q and P)
// and on the scalar kernel (attn_prefill_f16, tiles of 8 tokens). It reports
// TFLOPS counting 4·D flops per (query head, key) pair the mask keeps
// (Q·Kᵀ and P·V) and the time per launch.
func BenchmarkGPUAttnPrefill(b *testing.B) {
	d := gpu(b)
	const T, Hq, Hk, D = 2048, 32, 8, 128
	batch := make([][2]int32, T)
	for i := range batch {
		batch[i] = [2]int32{0, int32(i)}
	}
	c := newAttnCaseFill(rand.New(rand.NewPCG(3, 3)), Hq, Hk, D, []int{T}, batch, false)
	npos := make([]int32, T)
	for i := range npos {
		npos[i] = int32(i + 1)
	}
	flops := 4 * float64(D) * Hq * float64(T) * float64(T+1) / 2
	for _, k := range []struct {
		name       string
		mma, split bool
	}{{"kernel=mma-split", true, true}, {"kernel=mma-f16", true, false}, {"kernel=f16", false, false}} {
		b.Run(k.name, func(b *testing.B) {
			var el time.Duration
			do(b, d, func(s *Stream) error {
				var ptrs []DevPtr
				defer func() {
					for _, p := range ptrs {
						s.Free(p)
					}
				}()
				up := func(v []byte) (DevPtr, error) {
					p, err := s.Alloc(uint64(len(v)))
					if err != nil {
						return 0, err
					}
					ptrs = append(ptrs, p)
					return p, s.Upload(p, v)
				}
				kc, err := up(bytesOf(c.kc))
				if err != nil {
					return err
				}
				vc, _ := up(bytesOf(c.vc))
				tables, _ := up(bytesOf(c.tables))
				seq, _ := up(bytesOf(c.seq))
				np, _ := up(bytesOf(npos))
				qp, _ := up(bytesOf(c.q))
				op, err := s.Alloc(uint64(4 * len(c.q)))
				if err != nil {
					return err
				}
				ptrs = append(ptrs, op)
				st, ln := PrefillTiles(c.seq, c.pos, c.a)
				launch := s.AttnPrefill
				if k.mma {
					st, ln = PrefillTilesMMA(c.seq, c.pos, c.a)
					launch = func(out, q, kc, vc, tables, seq, npos, ts, tl DevPtr, n int, a AttnParams) error {
						return s.AttnPrefillMMA(out, q, kc, vc, tables, seq, npos, ts, tl, n, a, k.split)
					}
				}
				sp, _ := up(bytesOf(st))
				lp, err := up(bytesOf(ln))
				if err != nil {
					return err
				}
				run := func() error { return launch(op, qp, kc, vc, tables, seq, np, sp, lp, len(st), c.a) }
				if err := run(); err != nil { // warm-up
					return err
				}
				if err := s.Sync(); err != nil {
					return err
				}
				b.ResetTimer()
				t0 := time.Now()
				for i := 0; i < b.N; i++ {
					if err := run(); err != nil {
						return err
					}
				}
				err = s.Sync()
				el = time.Since(t0)
				return err
			})
			b.ReportMetric(flops*float64(b.N)/el.Seconds()/1e12, "TFLOPS")
			b.ReportMetric(float64(el.Microseconds())/float64(b.N), "us/op")
		})
	}
}
