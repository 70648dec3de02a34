package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// attendPerPosition is Attend written position by position with the plain
// arithmetic: the score chain of attnScoresGo, expAttn, one attnAxpy per
// position. Attend (blocked, heads in the lanes for the scores, vector
// exponentials) must give its bits exactly.
func attendPerPosition(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, scratch []float32) {
	d := len(q) / g
	q, out = q[:g*d], out[:g*d]
	scores := scratch[:n*g]
	row := scratch[n*g : n*g+d]
	for p := 0; p < n; p++ {
		kr := k.loadRow(row, k.index(table, p, off), d)
		attnScoresGo(scores[p*g:p*g+g], q, kr, 1, g, d, d)
	}
	var small [16]float64
	sums := small[:]
	if g > len(small) {
		sums = make([]float64, g)
	}
	for h := 0; h < g; h++ {
		m := float32(math.Inf(-1))
		for i := h; i < len(scores); i += g {
			s := scores[i] * scale
			scores[i] = s
			m = max(m, s)
		}
		var sum float64
		for i := h; i < len(scores); i += g {
			e := expAttn(scores[i] - m)
			scores[i] = e
			sum += float64(e)
		}
		sums[h] = sum
	}
	for i := range out {
		out[i] = 0
	}
	for p := 0; p < n; p++ {
		vr := v.loadRow(row, v.index(table, p, off), d)
		attnAxpy(out, vr, scores[p*g:p*g+g], g)
	}
	for h := 0; h < g; h++ {
		inv := float32(1 / sums[h])
		o := out[h*d : h*d+d]
		for j := range o {
			o[j] *= inv
		}
	}
}

// TestAttendBitwiseUnchanged: Attend (blocked scores and V accumulation,
// vector exponentials) gives bit for bit the per-position computation, for F16
// and F32 stores, head dimensions that do and do not fill 64-value
// chunks, group sizes on and off the vector path, and lengths around the
// block size.
func TestAttendBitwiseUnchanged(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 78))
	cases := []struct {
		g, d, n, kvh int
		f16          bool
	}{
		{8, 64, 1, 4, true}, {8, 64, 31, 4, true}, {8, 64, 33, 4, true}, {8, 64, 200, 4, true},
		{4, 128, 97, 2, false}, {2, 24, 65, 3, true}, {5, 40, 40, 1, false}, {8, 200, 70, 2, true},
		{12, 72, 64, 1, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("g%d_d%d_n%d_f16%v", c.g, c.d, c.n, c.f16), func(t *testing.T) {
			stride := c.kvh * c.d
			k, table, _ := pagedStore(r, c.n, 16, stride, c.f16)
			v, _ := sameTable(r, k, table, c.n, c.f16)
			q := randVec(r, c.g*c.d, 2)
			off := (c.kvh - 1) * c.d
			got, want := make([]float32, c.g*c.d), make([]float32, c.g*c.d)
			Attend(got, q, c.g, k, v, table, c.n, off, 0.3, make([]float32, AttnScratch(c.g, c.n, c.d)))
			attendPerPosition(want, q, c.g, k, v, table, c.n, off, 0.3, make([]float32, AttnScratch(c.g, c.n, c.d)))
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("head %d value %d: %g, per-position %g", i/c.d, i%c.d, got[i], want[i])
			}
		})
	}
}

// TestAttnBlockHelpersBitwise: the blocked helpers equal their
// per-position counterparts bit for bit: nb attnAxpy calls, nrows
// attnCvt calls (AVX2 and, where it runs, AVX-512).
func TestAttnBlockHelpersBitwise(t *testing.T) {
	defer func(on bool) { attnZOn = on }(attnZOn)
	r := rand.New(rand.NewPCG(79, 80))
	for _, c := range []struct{ nb, g, d int }{
		{1, 8, 64}, {32, 8, 64}, {7, 3, 136}, {5, 2, 20}, {32, 4, 256}, {3, 1, 8}, {9, 4, 136}, {3, 12, 24}, {2, 16, 8},
		{17, 32, 128}, {5, 30, 80}, {33, 28, 64}, {4, 2, 208}, {6, 1, 16}, {3, 5, 336},
	} {
		for _, z := range attnLevels() {
			attnZOn = z
			testAttnBlockHelpers(t, r, c.nb, c.g, c.d)
		}
	}
}

// testAttnBlockHelpers is TestAttnBlockHelpersBitwise for nb positions
// of g heads of dimension d, at the current attnZOn.
func testAttnBlockHelpers(t *testing.T, r *rand.Rand, nb, g, d int) {
	t.Helper()
	w := randVec(r, nb*g, 1)
	got := randVec(r, g*d, 1)
	want := append([]float32(nil), got...)
	vs := d + 8*(g%3) // V rows wider than the head, as in a whole-row block
	vw := randVec(r, nb*vs, 1)
	attnAxpyBlock(got, vw, w, nb, g, d, vs)
	for p := 0; p < nb; p++ {
		attnAxpy(want, vw[p*vs:p*vs+d], w[p*g:(p+1)*g], g)
	}
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("axpy nb%d g%d d%d z%v: value %d: %g, per position %g", nb, g, d, attnZOn, i, got[i], want[i])
	}
	src := make([]uint16, nb*vs)
	for i := range src {
		src[i] = F32ToF16(float32(r.NormFloat64()))
	}
	cv, cv1 := make([]float32, nb*d), make([]float32, nb*d)
	attnCvtRows(cv, src, vs, nb, d)
	for p := 0; p < nb; p++ {
		attnCvt(cv1[p*d:(p+1)*d], src[p*vs:p*vs+d])
	}
	if i := firstDiff(cv, cv1); i >= 0 {
		t.Fatalf("widen nb%d d%d stride %d: value %d", nb, d, vs, i)
	}
}

// attnLevels lists the attnZOn settings to test: off (AVX2), and on where
// this CPU runs the AVX-512 kernels.
func attnLevels() []bool {
	if active.f16Z {
		return []bool{false, true}
	}
	return []bool{false}
}
