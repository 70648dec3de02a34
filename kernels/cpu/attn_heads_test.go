package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestAttendHeadsMatchesAttend: AttendHeads (whole rows, all KV heads of
// a token in one call) gives for every KV head the bits of Attend on that
// head's column, for F16 and F32 stores, group sizes on and off the
// vector paths, head dimensions off the 8-value grid, and lengths around
// the block size; so a model may take either per token.
func TestAttendHeadsMatchesAttend(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	for _, c := range []struct {
		kvh, g, d, n, page int
		f16                bool
	}{
		{4, 8, 64, 513, 16, true}, {4, 8, 64, 17, 16, false}, {2, 4, 128, 70, 16, true},
		{1, 8, 64, 100, 16, true}, {3, 2, 24, 33, 4, true}, {2, 5, 40, 64, 16, false},
		{8, 1, 64, 15, 16, true}, {2, 12, 72, 40, 8, true},
	} {
		t.Run(fmt.Sprintf("kvh%d_g%d_d%d_n%d_f16%v", c.kvh, c.g, c.d, c.n, c.f16), func(t *testing.T) {
			stride := c.kvh * c.d
			k, table, _ := pagedStore(r, c.n, c.page, stride, c.f16)
			v, _ := sameTable(r, k, table, c.n, c.f16)
			q := randVec(r, c.kvh*c.g*c.d, 2)
			got := make([]float32, len(q))
			AttendHeads(got, q, c.kvh, c.g, k, v, table, c.n, 0.2, make([]float32, AttnHeadsScratch(c.kvh, c.g, c.n, c.d)))
			want := make([]float32, len(q))
			scratch := make([]float32, AttnScratch(c.g, c.n, c.d))
			gd := c.g * c.d
			for h := 0; h < c.kvh; h++ {
				Attend(want[h*gd:(h+1)*gd], q[h*gd:(h+1)*gd], c.g, k, v, table, c.n, h*c.d, 0.2, scratch)
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("query head %d value %d: %g, Attend %g", i/c.d, i%c.d, got[i], want[i])
			}
		})
	}
}
