package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttendZBitwise: with one to eight query heads per KV head over F16
// pages, attendGroups' AVX-512 path (attendGroupsZ; g = 1, 3, 5, 6, 7 on
// the kernels of 2, 4 and 8 heads) gives bit for bit what its AVX2 helpers give
// (TestAttendBitwiseUnchanged holds those to the per-position
// computation), through AttendHeads (whole rows) and Attend (one head's
// column), with scratch that starts as NaN: lengths around the vector,
// block and page sizes, pages of 2 to 32 rows, head dimensions 32 to 256,
// and a scale large enough that most exponentials are clamped to zero.
// Calls that do not take the path (a page size not a multiple of 16/G,
// an F32 store, a head dimension off the output chunk, g = 9) are
// compared too.
func TestAttendZBitwise(t *testing.T) {
	if !hasAVX512F16 {
		t.Skip("no AVX-512 on this CPU")
	}
	defer func(z bool) { attnZOn = z }(attnZOn)
	r := rand.New(rand.NewPCG(17, 18))
	for _, c := range []struct {
		g, kvh, d, n, page int
		scale              float32
		f16, path          bool
	}{
		{8, 4, 64, 1, 16, 0.125, true, true}, {8, 4, 64, 2, 16, 0.125, true, true}, {8, 4, 64, 3, 16, 0.125, true, true},
		{8, 4, 64, 16, 16, 0.125, true, true}, {8, 4, 64, 17, 16, 0.125, true, true}, {8, 4, 64, 33, 16, 0.125, true, true},
		{8, 4, 64, 513, 16, 0.125, true, true}, {8, 4, 64, 100, 2, 0.125, true, true}, {8, 4, 64, 45, 6, 0.125, true, true},
		{8, 1, 128, 77, 4, 0.1, true, true}, {8, 2, 32, 250, 16, 0.2, true, true}, {8, 3, 96, 41, 8, 0.125, true, true},
		{8, 4, 64, 300, 16, 40, true, true},
		{4, 8, 128, 1, 16, 0.09, true, true}, {4, 8, 128, 5, 16, 0.09, true, true}, {4, 8, 128, 67, 16, 0.09, true, true},
		{4, 2, 64, 130, 4, 0.125, true, true}, {4, 1, 256, 31, 8, 0.06, true, true}, {4, 4, 64, 400, 32, 30, true, true},
		{2, 2, 64, 1, 16, 0.125, true, true}, {2, 2, 64, 7, 16, 0.125, true, true}, {2, 2, 64, 9, 16, 0.125, true, true},
		{2, 2, 64, 200, 16, 0.125, true, true}, {2, 4, 128, 129, 8, 0.09, true, true}, {2, 1, 64, 300, 32, 30, true, true},
		{8, 4, 64, 31, 5, 0.125, true, false}, {8, 4, 64, 31, 16, 0.125, false, false}, {4, 4, 64, 31, 6, 0.125, true, false},
		{2, 2, 64, 31, 4, 0.125, true, false}, {4, 2, 32, 40, 16, 0.125, true, false},
		// g = 1, 3, 5, 6, 7 run the kernels of G = 2, 4 or 8 with zero
		// queries in the extra heads' lanes.
		{3, 2, 64, 1, 16, 0.125, true, true}, {3, 2, 64, 40, 16, 0.125, true, true}, {3, 4, 128, 131, 8, 0.09, true, true},
		{5, 8, 128, 1, 16, 0.09, true, true}, {5, 8, 128, 77, 16, 0.09, true, true}, {5, 1, 64, 33, 2, 0.125, true, true},
		{6, 2, 128, 2, 16, 0.09, true, true}, {6, 2, 128, 130, 16, 0.09, true, true}, {6, 2, 64, 300, 32, 30, true, true},
		{7, 4, 128, 1, 16, 0.09, true, true}, {7, 4, 128, 3, 16, 0.09, true, true}, {7, 4, 128, 513, 16, 0.09, true, true},
		{7, 2, 64, 45, 6, 0.125, true, true},
		{7, 4, 128, 31, 5, 0.09, true, false}, {7, 4, 128, 31, 16, 0.09, false, false},
		{1, 4, 64, 1, 16, 0.125, true, true}, {1, 4, 64, 31, 16, 0.125, true, true}, {1, 32, 128, 130, 16, 0.09, true, true}, {1, 2, 64, 45, 8, 0.125, true, true}, {1, 2, 64, 45, 6, 0.125, true, false},
		{1, 2, 64, 45, 5, 0.125, true, false},
		{9, 2, 64, 31, 16, 0.125, true, false}, {3, 2, 32, 40, 16, 0.125, true, false},
	} {
		t.Run(fmt.Sprintf("g%d_kvh%d_d%d_n%d_page%d_s%g_f16%v", c.g, c.kvh, c.d, c.n, c.page, c.scale, c.f16), func(t *testing.T) {
			g := c.g
			stride := c.kvh * c.d
			k, table, _ := pagedStore(r, c.n, c.page, stride, c.f16)
			v, _ := sameTable(r, k, table, c.n, c.f16)
			attnZOn = true
			if got := attnZOk(g, c.d, k, v); got != c.path {
				t.Fatalf("attnZOk = %v, want %v", got, c.path)
			}
			q := randVec(r, c.kvh*g*c.d, 2)
			run := func(z bool) (heads, col []float32) {
				attnZOn = z
				heads = make([]float32, len(q))
				AttendHeads(heads, q, c.kvh, g, k, v, table, c.n, c.scale, nanScratch(AttnHeadsScratch(c.kvh, g, c.n, c.d)))
				gd := g * c.d
				col = make([]float32, gd)
				h := c.kvh - 1
				Attend(col, q[h*gd:(h+1)*gd], g, k, v, table, c.n, h*c.d, c.scale, nanScratch(AttnScratch(g, c.n, c.d)))
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

// nanScratch is an attention scratch of n values left as NaN: what a
// call reads from its scratch before writing it shows in its results.
func nanScratch(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}

// TestAttnExpZMatchesTwin: the 16-lane exponential passes (g = 2, 4, 8)
// give attnExpGo's values and sums bit for bit, including clamped
// (< -87), zero and positive inputs, and continue sums passed in; a NaN
// score stays NaN and poisons its own head's sum only.
func TestAttnExpZMatchesTwin(t *testing.T) {
	if !hasAVX512F16 {
		t.Skip("no AVX-512 on this CPU")
	}
	r := rand.New(rand.NewPCG(3, 4))
	special := []float32{-100, -87, -86.9, 0, float32(math.Copysign(0, -1)), 3, -1e-30, -88.7}
	for _, tc := range []struct {
		g   int
		nan bool // one NaN score: its value stays NaN, its head's sum is NaN
	}{{2, false}, {4, false}, {8, false}, {2, true}, {4, true}, {8, true}} {
		g := tc.g
		const nvec = 37
		scores := make([]float32, 16*nvec)
		// Half the scores spread over [-45, 0], where e ranges from 1 down
		// to 2^-65: the float64 sums then round at nearly every step, so
		// an order of additions other than the positions' shows.
		for i := range scores {
			switch {
			case i%5 == 0:
				scores[i] = special[(i/5)%len(special)]
			case i%2 == 0:
				scores[i] = -45 * r.Float32()
			default:
				scores[i] = float32(r.NormFloat64() * 20)
			}
		}
		if tc.nan {
			scores[16*5+3] = float32(math.NaN())
		}
		m := []float32{0, 1, -2, 0.5, 3, -1, 0, 2}[:g]
		want := append([]float32(nil), scores...)
		wantSums := make([]float64, g)
		attnExpGo(want, g, m, wantSums)
		got := append([]float32(nil), scores...)
		gotSums := make([]float64, g)
		attnExpZ(g, &got[0], nvec-1, &m[0], &gotSums[0])
		attnExpZ(g, &got[16*(nvec-1)], 1, &m[0], &gotSums[0]) // sums continue
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				t.Fatalf("g %d value %d (input %g, max %g): %g, want %g", g, i, scores[i], m[i%g], got[i], want[i])
			}
		}
		for h := range g {
			if math.IsNaN(wantSums[h]) != (tc.nan && h == 3%g) {
				t.Fatalf("g %d: the twin's sum %d is %g", g, h, wantSums[h]) // the test's own premise
			}
			if math.Float64bits(gotSums[h]) != math.Float64bits(wantSums[h]) && !(math.IsNaN(gotSums[h]) && math.IsNaN(wantSums[h])) {
				t.Fatalf("g %d sum %d: %g, want %g", g, h, gotSums[h], wantSums[h])
			}
		}
	}
}

// TestAttnCvtInterleave: the widening kernels lay P = 2, 4, 8 rows out
// as documented (row P·m+i, value j at m·P·w + P·j + i), for every row
// count up to two groups and one row, rows of 16-48 values with and
// without a gap between them, and write zeros (not the rows that follow
// in memory) for the rows past the count.
func TestAttnCvtInterleave(t *testing.T) {
	if !hasAVX512F16 {
		t.Skip("no AVX-512 on this CPU")
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, p := range []int{2, 4, 8} {
		cvt := map[int]func(*uint16, int, *float32, int, int, *int32){2: attnCvtInterleave2, 4: attnCvtInterleave4, 8: attnCvtInterleave8}[p]
		for nrows := 1; nrows <= 2*p+1; nrows++ {
			c := struct{ nrows, w, stride int }{nrows, 16 * (1 + nrows%3), 16*(1+nrows%3) + 16*(nrows%2)}
			groups := (c.nrows + p - 1) / p
			src := make([]uint16, (groups*p+1)*c.stride) // rows past nrows hold values too
			for i := range src {
				src[i] = F32ToF16(float32(r.NormFloat64()) + 3)
			}
			dst := make([]float32, groups*p*c.w+1)
			dst[len(dst)-1] = 42 // canary
			cvt(&src[0], c.stride, &dst[0], c.nrows, c.w, &attnGroupIdx[0][0])
			for m := 0; m < groups; m++ {
				for j := 0; j < c.w; j++ {
					for i := 0; i < p; i++ {
						row := p*m + i
						want := float32(0)
						if row < c.nrows {
							want = F16ToF32(src[row*c.stride+j])
						}
						if got := dst[m*p*c.w+p*j+i]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("P %d, %d rows of %d: row %d value %d: %g, want %g", p, c.nrows, c.w, row, j, got, want)
						}
					}
				}
			}
			if dst[len(dst)-1] != 42 {
				t.Fatalf("P %d, %d rows: wrote past the groups", p, c.nrows)
			}
		}
	}
}

// TestAttendZNoAllocs: the AVX-512 decode path allocates nothing per call
// (it runs once per token, KV head group and layer): its per-head maxima
// and sums stay on the stack, as the AVX2 path's do.
func TestAttendZNoAllocs(t *testing.T) {
	if !hasAVX512F16 {
		t.Skip("no AVX-512 on this CPU")
	}
	r := rand.New(rand.NewPCG(21, 22))
	for _, g := range []int{2, 4, 8} {
		const kvh, d, n = 2, 64, 100
		k, table, _ := pagedStore(r, n, 16, kvh*d, true)
		v, _ := sameTable(r, k, table, n, true)
		if !attnZOk(g, d, k, v) {
			t.Fatalf("g %d: not on the AVX-512 path", g)
		}
		q := randVec(r, kvh*g*d, 1)
		out := make([]float32, len(q))
		scratch := make([]float32, AttnHeadsScratch(kvh, g, n, d))
		if a := testing.AllocsPerRun(10, func() {
			AttendHeads(out, q, kvh, g, k, v, table, n, 0.125, scratch)
		}); a != 0 {
			t.Fatalf("g %d: %v allocations per call", g, a)
		}
	}
}
