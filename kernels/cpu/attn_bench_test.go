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
	for _, c := range []struct{ g, d, n int }{{2, 64, 1024}, {8, 128, 1024}} {
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
