package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttendZ8Bitwise: with eight query heads per KV head over F16 pages,
// attendGroups' AVX-512 path (attendGroupsZ8) gives bit for bit what its
// AVX2 helpers give (TestAttendBitwiseUnchanged holds those to the
// per-position computation), through AttendHeads (whole
// rows) and Attend (one head's column): odd and even lengths around the
// block and page sizes, pages of 2 to 16 rows, head dimensions 32 to 128,
// and a scale large enough that most exponentials are clamped to zero.
// An odd page size or an F32 store does not take the path and is
// compared too.
func TestAttendZ8Bitwise(t *testing.T) {
	if !hasAVX512F16 {
		t.Skip("no AVX-512 on this CPU")
	}
	defer func(z bool) { attnZ8On = z }(attnZ8On)
	r := rand.New(rand.NewPCG(17, 18))
	for _, c := range []struct {
		kvh, d, n, page int
		scale           float32
		f16             bool
	}{
		{4, 64, 1, 16, 0.125, true}, {4, 64, 2, 16, 0.125, true}, {4, 64, 3, 16, 0.125, true},
		{4, 64, 16, 16, 0.125, true}, {4, 64, 17, 16, 0.125, true}, {4, 64, 33, 16, 0.125, true},
		{4, 64, 513, 16, 0.125, true}, {4, 64, 100, 2, 0.125, true}, {4, 64, 45, 6, 0.125, true},
		{1, 128, 77, 4, 0.1, true}, {2, 32, 250, 16, 0.2, true}, {3, 96, 41, 8, 0.125, true},
		{4, 64, 300, 16, 40, true}, {4, 64, 31, 5, 0.125, true}, {4, 64, 31, 16, 0.125, false},
	} {
		t.Run(fmt.Sprintf("kvh%d_d%d_n%d_page%d_s%g_f16%v", c.kvh, c.d, c.n, c.page, c.scale, c.f16), func(t *testing.T) {
			const g = 8
			stride := c.kvh * c.d
			k, table, _ := pagedStore(r, c.n, c.page, stride, c.f16)
			v, _ := sameTable(r, k, table, c.n, c.f16)
			attnZ8On = true
			if want := c.f16 && c.page%2 == 0; attnZ8Ok(g, c.d, k, v) != want {
				t.Fatalf("attnZ8Ok = %v, want %v", !want, want)
			}
			q := randVec(r, c.kvh*g*c.d, 2)
			run := func(z bool) (heads, col []float32) {
				attnZ8On = z
				heads = make([]float32, len(q))
				AttendHeads(heads, q, c.kvh, g, k, v, table, c.n, c.scale, make([]float32, AttnHeadsScratch(c.kvh, g, c.n, c.d)))
				gd := g * c.d
				col = make([]float32, gd)
				h := c.kvh - 1
				Attend(col, q[h*gd:(h+1)*gd], g, k, v, table, c.n, h*c.d, c.scale, make([]float32, AttnScratch(g, c.n, c.d)))
				return heads, col
			}
			zh, zc := run(true)
			ah, ac := run(false)
			for _, x := range []struct {
				name      string
				got, want []float32
			}{{"AttendHeads", zh, ah}, {"Attend", zc, ac}} {
				if i := firstDiff(x.got, x.want); i >= 0 {
					t.Fatalf("%s: head %d value %d: %g, want %g", x.name, i/c.d, i%c.d, x.got[i], x.want[i])
				}
			}
		})
	}
}

// TestAttnExpZ8MatchesTwin: the 16-lane exponential pass gives attnExpGo's
// values and sums bit for bit, including clamped (< -87), zero, positive
// and NaN inputs, and continues sums passed in.
func TestAttnExpZ8MatchesTwin(t *testing.T) {
	if !hasAVX512F16 {
		t.Skip("no AVX-512 on this CPU")
	}
	r := rand.New(rand.NewPCG(3, 4))
	const g, pairs = 8, 37
	scores := make([]float32, 2*pairs*g)
	special := []float32{-100, -87, -86.9, 0, float32(math.Copysign(0, -1)), 3, float32(math.NaN()), -1e-30, -88.7}
	for i := range scores {
		if i%5 == 0 {
			scores[i] = special[(i/5)%len(special)]
		} else {
			scores[i] = float32(r.NormFloat64() * 20)
		}
	}
	m := []float32{0, 1, -2, 0.5, 3, -1, 0, 2}
	want := append([]float32(nil), scores...)
	wantSums := make([]float64, g)
	attnExpGo(want, g, m, wantSums)
	got := append([]float32(nil), scores...)
	gotSums := make([]float64, g)
	attnExpZ8(&got[0], pairs-1, &m[0], &gotSums[0])
	attnExpZ8(&got[2*(pairs-1)*g], 1, &m[0], &gotSums[0]) // sums continue
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("value %d (input %g, max %g): %g, want %g", i, scores[i], m[i%g], got[i], want[i])
		}
	}
	for h := range g {
		if math.Float64bits(gotSums[h]) != math.Float64bits(wantSums[h]) && !(math.IsNaN(gotSums[h]) && math.IsNaN(wantSums[h])) {
			t.Fatalf("sum %d: %g, want %g", h, gotSums[h], wantSums[h])
		}
	}
}
