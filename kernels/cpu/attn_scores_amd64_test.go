package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttnScoresMatchesTwin: the vector score kernels (heads in the
// lanes, eight positions at a time, masked stores for groups that are not
// a whole number of vectors), AVX2 and, where it runs, AVX-512 (groups
// padded to whole 16-lane vectors), give attnScoresGo's bits for every
// group size, head dimension and block length, and write nothing outside
// their scores.
func TestAttnScoresMatchesTwin(t *testing.T) {
	if !attnAVX2 {
		t.Skip("no AVX2")
	}
	defer func(on bool) { attnZOn = on }(attnZOn)
	r := rand.New(rand.NewPCG(31, 32))
	for _, z := range attnLevels() {
		attnZOn = z
		for _, g := range []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 28, 30, 32} {
			for _, d := range []int{8, 16, 64, 128} {
				for _, nb := range []int{1, 7, 8, 9, 17, 32} {
					t.Run(fmt.Sprintf("z%v_g%d_d%d_nb%d", z, g, d, nb), func(t *testing.T) {
						q := randVec(r, g*d, 2)
						ks := d + 8*(g%3) // K rows wider than the head, as in a whole-row block
						kb := randVec(r, nb*ks, 1)
						qt := make([]float32, d*attnPad(g))
						attnTransposeQ(qt, q, g, d)
						const guard = 16
						got := make([]float32, nb*g+guard)
						for i := range got {
							got[i] = float32(math.NaN())
						}
						want := make([]float32, nb*g)
						attnScores(got[:nb*g], q, qt, kb, nb, g, d, ks)
						attnScoresGo(want, q, kb, nb, g, d, ks)
						if i := firstDiff(got[:nb*g], want); i >= 0 {
							t.Fatalf("score %d: %g, twin %g", i, got[i], want[i])
						}
						for i := nb * g; i < len(got); i++ {
							if !math.IsNaN(float64(got[i])) {
								t.Fatalf("wrote past the scores at %d", i)
							}
						}
					})
				}
			}
		}
	}
}
