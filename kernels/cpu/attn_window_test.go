package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// windowCopy returns a store and table holding positions lo..n-1 of kv
// (through table) as positions 0..n-lo-1, on pages of their own.
func windowCopy(kv KVRows, table []int32, lo, n int) (KVRows, []int32) {
	m := n - lo
	pages := (m + kv.PageSize - 1) / kv.PageSize
	w := KVRows{PageSize: kv.PageSize, Stride: kv.Stride}
	nt := make([]int32, pages)
	for i := range nt {
		nt[i] = int32(pages - 1 - i) // another page order
	}
	size := pages * kv.PageSize * kv.Stride
	if kv.F16 != nil {
		w.F16 = make([]uint16, size)
	} else {
		w.F32 = make([]float32, size)
	}
	for p := 0; p < m; p++ {
		src, dst := kv.index(table, lo+p, 0), w.index(nt, p, 0)
		if kv.F16 != nil {
			copy(w.F16[dst:dst+kv.Stride], kv.F16[src:src+kv.Stride])
		} else {
			copy(w.F32[dst:dst+kv.Stride], kv.F32[src:src+kv.Stride])
		}
	}
	return w, nt
}

// TestAttendWindow: attention over the sliding window lo..n-1 through
// AttendHeadsWindow and AttendWindow (the table from lo's page, the rows
// of that page before lo masked) gives bit for bit AttendHeads and Attend
// over a store holding just the window's positions, for F16 and F32
// stores, windows starting on and off page boundaries, one to eight query
// heads per KV head (the AVX-512 path where it applies), and masks of no
// position to all but one of a page.
func TestAttendWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, c := range []struct {
		g, kvh, d, n, lo, page int
		f16                    bool
	}{
		{4, 2, 64, 100, 37, 16, true}, {4, 2, 64, 100, 32, 16, true}, {4, 2, 64, 100, 47, 16, true},
		{8, 1, 128, 300, 170, 16, true}, {2, 4, 64, 77, 1, 16, true}, {1, 2, 64, 45, 20, 8, true},
		{3, 2, 64, 64, 50, 16, true}, {4, 2, 64, 100, 37, 16, false}, {4, 2, 64, 90, 85, 6, true},
		{9, 1, 64, 40, 13, 16, true}, {4, 1, 256, 600, 345, 32, true},
	} {
		t.Run(fmt.Sprintf("g%d_kvh%d_d%d_n%d_lo%d_page%d_f16%v", c.g, c.kvh, c.d, c.n, c.lo, c.page, c.f16), func(t *testing.T) {
			stride := c.kvh * c.d
			k, table, _ := pagedStore(r, c.n, c.page, stride, c.f16)
			v, _ := sameTable(r, k, table, c.n, c.f16)
			q := randVec(r, c.kvh*c.g*c.d, 2)
			const scale = 0.125
			base := c.lo / c.page * c.page
			view, n, skip := table[base/c.page:], c.n-base, c.lo-base
			wk, wt := windowCopy(k, table, c.lo, c.n)
			wv, _ := windowCopy(v, table, c.lo, c.n)

			got := make([]float32, len(q))
			AttendHeadsWindow(got, q, c.kvh, c.g, k, v, view, n, scale, AttnOpts{Skip: skip}, make([]float32, AttnHeadsScratch(c.kvh, c.g, n, c.d)))
			want := make([]float32, len(q))
			AttendHeads(want, q, c.kvh, c.g, wk, wv, wt, c.n-c.lo, scale, make([]float32, AttnHeadsScratch(c.kvh, c.g, c.n-c.lo, c.d)))
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("AttendHeadsWindow value %d: %g, over the window's rows %g", i, got[i], want[i])
			}
			gd := c.g * c.d
			h := c.kvh - 1
			col := make([]float32, gd)
			AttendWindow(col, q[h*gd:(h+1)*gd], c.g, k, v, view, n, h*c.d, scale, AttnOpts{Skip: skip}, make([]float32, AttnScratch(c.g, n, c.d)))
			if i := firstDiff(col, want[h*gd:(h+1)*gd]); i >= 0 {
				t.Fatalf("AttendWindow value %d: %g, over the window's rows %g", i, col[i], want[h*gd+i])
			}
			for _, x := range got {
				if math.IsNaN(float64(x)) {
					t.Fatal("NaN in the output")
				}
			}
		})
	}
}

// softcapRef is AttendRef with AttnOpts: positions below o.Skip masked,
// each scaled score s capped as c·tanh(s/c), and head h's sink o.Sinks[h]
// in the softmax's maximum and sum, in float64.
func softcapRef(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, o AttnOpts) {
	d := len(q) / g
	for h := 0; h < g; h++ {
		s := make([]float64, n)
		m := math.Inf(-1)
		for p := o.Skip; p < n; p++ {
			var dot float64
			for j := 0; j < d; j++ {
				dot += float64(q[h*d+j]) * float64(k.At(table, p, off+j))
			}
			s[p] = dot * float64(scale)
			if c := float64(o.Softcap); c > 0 {
				s[p] = c * math.Tanh(s[p]/c)
			}
			m = math.Max(m, s[p])
		}
		var sum float64
		if o.Sinks != nil {
			m = math.Max(m, float64(o.Sinks[h]))
			sum = math.Exp(float64(o.Sinks[h]) - m)
		}
		for p := o.Skip; p < n; p++ {
			s[p] = math.Exp(s[p] - m)
			sum += s[p]
		}
		for j := 0; j < d; j++ {
			var acc float64
			for p := o.Skip; p < n; p++ {
				acc += s[p] * float64(v.At(table, p, off+j))
			}
			out[h*d+j] = float32(acc / sum)
		}
	}
}

// TestAttendSoftcap: with AttnOpts.Softcap (and a window), AttendWindow
// and AttendHeadsWindow match the float64 formula, on scores large enough
// that the cap changes the softmax (the uncapped result is far off), for
// F16 (the AVX-512 path where it applies) and F32 stores.
func TestAttendSoftcap(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, c := range []struct {
		g, kvh, d, n, skip, page int
		f16                      bool
	}{
		{4, 2, 64, 100, 0, 16, true}, {4, 2, 64, 100, 7, 16, true}, {2, 1, 64, 33, 3, 8, false}, {8, 1, 128, 70, 0, 16, true},
	} {
		t.Run(fmt.Sprintf("g%d_kvh%d_n%d_skip%d_f16%v", c.g, c.kvh, c.n, c.skip, c.f16), func(t *testing.T) {
			stride := c.kvh * c.d
			k, table, _ := pagedStore(r, c.n, c.page, stride, c.f16)
			v, _ := sameTable(r, k, table, c.n, c.f16)
			q := randVec(r, c.kvh*c.g*c.d, 2)
			const scale = 0.5 // scores of ±10 and more
			o := AttnOpts{Skip: c.skip, Softcap: 3}
			got := make([]float32, len(q))
			AttendHeadsWindow(got, q, c.kvh, c.g, k, v, table, c.n, scale, o, make([]float32, AttnHeadsScratch(c.kvh, c.g, c.n, c.d)))
			gd := c.g * c.d
			for h := 0; h < c.kvh; h++ {
				want := make([]float32, gd)
				softcapRef(want, q[h*gd:(h+1)*gd], c.g, k, v, table, c.n, h*c.d, scale, o)
				if e := maxRelErr(got[h*gd:(h+1)*gd], want, 1e-3); e > 1e-4 {
					t.Fatalf("AttendHeadsWindow head %d: max rel err %g", h, e)
				}
				col := make([]float32, gd)
				AttendWindow(col, q[h*gd:(h+1)*gd], c.g, k, v, table, c.n, h*c.d, scale, o, make([]float32, AttnScratch(c.g, c.n, c.d)))
				if e := maxRelErr(col, want, 1e-3); e > 1e-4 {
					t.Fatalf("AttendWindow head %d: max rel err %g", h, e)
				}
				uncapped := make([]float32, gd)
				softcapRef(uncapped, q[h*gd:(h+1)*gd], c.g, k, v, table, c.n, h*c.d, scale, AttnOpts{Skip: c.skip})
				if e := maxRelErr(uncapped, want, 1e-3); e < 0.01 {
					t.Fatalf("head %d: the cap changes nothing here (rel %g)", h, e)
				}
			}
		})
	}
}

// TestAttendSinks: with AttnOpts.Sinks (and a window), AttendWindow,
// AttendHeadsWindow and AttendF16Window match the float64 formula, with
// sinks that change the result (some above every score), for gpt-oss's
// group of 8 heads of 64 on F16 (the AVX-512 path, AttendF16Window's
// AVX2 one) and other groups on F16 (AttendF16Window's Go path) and F32
// stores; AttendF16Window equals its twin attendF16Ref bit for bit.
func TestAttendSinks(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	for _, c := range []struct {
		g, kvh, d, n, skip, page int
		f16                      bool
	}{
		{8, 2, 64, 150, 0, 16, true}, {8, 1, 64, 40, 9, 16, true}, {3, 2, 32, 33, 3, 8, false}, {4, 2, 64, 1, 0, 16, true},
		{4, 2, 16, 50, 5, 8, true},
	} {
		t.Run(fmt.Sprintf("g%d_kvh%d_n%d_skip%d_f16%v", c.g, c.kvh, c.n, c.skip, c.f16), func(t *testing.T) {
			stride := c.kvh * c.d
			k, table, _ := pagedStore(r, c.n, c.page, stride, c.f16)
			v, _ := sameTable(r, k, table, c.n, c.f16)
			q := randVec(r, c.kvh*c.g*c.d, 1)
			const scale = 0.125
			sinks := randVec(r, c.kvh*c.g, 3)
			o := AttnOpts{Skip: c.skip, Sinks: sinks}
			got := make([]float32, len(q))
			AttendHeadsWindow(got, q, c.kvh, c.g, k, v, table, c.n, scale, o, make([]float32, AttnHeadsScratch(c.kvh, c.g, c.n, c.d)))
			gd := c.g * c.d
			effect := 0.0
			for h := 0; h < c.kvh; h++ {
				oh := AttnOpts{Skip: c.skip, Sinks: sinks[h*c.g : (h+1)*c.g]}
				want := make([]float32, gd)
				softcapRef(want, q[h*gd:(h+1)*gd], c.g, k, v, table, c.n, h*c.d, scale, oh)
				if e := maxRelErr(got[h*gd:(h+1)*gd], want, 1e-3); e > 1e-4 {
					t.Fatalf("AttendHeadsWindow head %d: max rel err %g", h, e)
				}
				col := make([]float32, gd)
				AttendWindow(col, q[h*gd:(h+1)*gd], c.g, k, v, table, c.n, h*c.d, scale, oh, make([]float32, AttnScratch(c.g, c.n, c.d)))
				if e := maxRelErr(col, want, 1e-3); e > 1e-4 {
					t.Fatalf("AttendWindow head %d: max rel err %g", h, e)
				}
				if c.f16 {
					f16 := make([]float32, gd)
					AttendF16Window(f16, q[h*gd:(h+1)*gd], c.g, k, v, table, c.n, h*c.d, scale, oh, make([]float32, AttnScratch(c.g, c.n, c.d)))
					if i := farther(f16, want, 4e-3); i >= 0 { // F16 query and accumulator
						t.Fatalf("AttendF16Window head %d: %g at %d, want %g", h, f16[i], i, want[i])
					}
					twin := make([]float32, gd)
					attendF16Ref(twin, q[h*gd:(h+1)*gd], c.g, k, v, table, c.n, h*c.d, scale, oh)
					if i := firstDiff(f16, twin); i >= 0 {
						t.Fatalf("AttendF16Window head %d and its twin differ at %d: %g vs %g", h, i, f16[i], twin[i])
					}
				}
				plain := make([]float32, gd)
				softcapRef(plain, q[h*gd:(h+1)*gd], c.g, k, v, table, c.n, h*c.d, scale, AttnOpts{Skip: c.skip})
				effect = max(effect, maxRelErr(plain, want, 1e-3))
			}
			if effect < 0.01 {
				t.Fatalf("the sinks change nothing here (rel %g)", effect)
			}
		})
	}
}

// farther returns the first index where a and b differ by more than tol,
// or -1.
func farther(a, b []float32, tol float64) int {
	for i := range a {
		if !(math.Abs(float64(a[i])-float64(b[i])) <= tol) {
			return i
		}
	}
	return -1
}
