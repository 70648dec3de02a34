package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// BenchmarkAttendVsPerPosition: Attend for one query group of
// tinyllama's shape (8 heads of 64 sharing a KV head, F16 store) against
// the per-position computation it replaced (attendPerPosition: math.Exp,
// one attnAxpy per position), alternating call by call; reports the median
// of the paired time ratios (old/new) and each best time.
func BenchmarkAttendVsPerPosition(b *testing.B) {
	if !attnAVX2 {
		b.Skip("no vector helpers")
	}
	r := rand.New(rand.NewPCG(75, 76))
	for _, n := range []int{128, 512} {
		b.Run(fmt.Sprintf("g8_d64_n%d", n), func(b *testing.B) {
			const g, d = 8, 64
			k, table, _ := pagedStore(r, n, 16, d, true)
			v, _ := sameTable(r, k, table, n, true)
			q := randVec(r, g*d, 1)
			out := make([]float32, g*d)
			scratch := make([]float32, AttnScratch(g, n, d))
			var ratios []float64
			best := [2]float64{math.Inf(1), math.Inf(1)}
			var ts [2]float64
			for it := range b.N {
				for j := range 2 {
					on := (j+it)%2 == 0
					t0 := time.Now()
					for range 8 {
						if on {
							Attend(out, q, g, k, v, table, n, 0, 0.125, scratch)
						} else {
							attendPerPosition(out, q, g, k, v, table, n, 0, 0.125, scratch)
						}
					}
					idx := 0
					if on {
						idx = 1
					}
					ts[idx] = float64(time.Since(t0).Nanoseconds()) / 8
					best[idx] = min(best[idx], ts[idx])
				}
				ratios = append(ratios, ts[0]/ts[1])
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "speedup-median")
			b.ReportMetric(best[0], "ns-old-best")
			b.ReportMetric(best[1], "ns-new-best")
		})
	}
}
