package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// pagedStore builds a KVRows holding n positions of stride values each,
// placed in pages given by a shuffled page table, and returns the values in
// position order too.
func pagedStore(r *rand.Rand, n, pageSize, stride int, f16 bool) (KVRows, []int32, [][]float32) {
	pages := (n + pageSize - 1) / pageSize
	total := pages + 3 // a few pages the sequence does not own
	table := make([]int32, pages)
	perm := r.Perm(total)
	for i := range table {
		table[i] = int32(perm[i])
	}
	kv := KVRows{PageSize: pageSize, Stride: stride}
	if f16 {
		kv.F16 = make([]uint16, total*pageSize*stride)
		for i := range kv.F16 {
			kv.F16[i] = F32ToF16(float32(r.NormFloat64())) // garbage in unowned rows
		}
	} else {
		kv.F32 = randVec(r, total*pageSize*stride, 1)
	}
	rows := make([][]float32, n)
	for p := 0; p < n; p++ {
		row := randVec(r, stride, 1)
		i := kv.index(table, p, 0)
		if f16 {
			StoreRowF16(kv.F16[i:i+stride], row)
			for j := range row {
				row[j] = F16ToF32(kv.F16[i+j])
			}
		} else {
			copy(kv.F32[i:i+stride], row)
		}
		rows[p] = row
	}
	return kv, table, rows
}

func TestAttendMatchesRef(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	cases := []struct {
		name     string
		g, d     int
		kvHeads  int
		n        int
		pageSize int
		f16      bool
	}{
		{"one_pos_f16", 1, 64, 1, 1, 16, true},
		{"page_edge_f32", 2, 64, 2, 16, 16, false},
		{"cross_page_f16", 2, 64, 2, 17, 16, true},
		{"gqa4_f16", 4, 64, 2, 100, 16, true},
		{"small_pages_f32", 3, 32, 1, 40, 4, false},
		{"long_f16", 2, 128, 2, 700, 16, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stride := c.kvHeads * c.d
			k, table, _ := pagedStore(r, c.n, c.pageSize, stride, c.f16)
			v, _ := sameTable(r, k, table, c.n, c.f16) // V shares K's page table
			scale := float32(1 / math.Sqrt(float64(c.d)))
			for kvh := 0; kvh < c.kvHeads; kvh++ {
				q := randVec(r, c.g*c.d, 2)
				got := make([]float32, c.g*c.d)
				want := make([]float32, c.g*c.d)
				scratch := make([]float32, AttnScratch(c.g, c.n, c.d))
				Attend(got, q, c.g, k, v, table, c.n, kvh*c.d, scale, scratch)
				AttendRef(want, q, c.g, k, v, table, c.n, kvh*c.d, scale)
				for i := range got {
					if e := math.Abs(float64(got[i] - want[i])); e > 2e-5 {
						t.Fatalf("kv head %d idx %d: %g vs %g", kvh, i, got[i], want[i])
					}
				}
				if c.f16 {
					// AttendF16 rounds the query and the accumulator to F16.
					AttendF16(got, q, c.g, k, v, table, c.n, kvh*c.d, scale, scratch)
					for i := range got {
						if e := math.Abs(float64(got[i] - want[i])); e > 4e-3 {
							t.Fatalf("AttendF16: kv head %d idx %d: %g vs %g", kvh, i, got[i], want[i])
						}
					}
					twin := make([]float32, c.g*c.d)
					attendF16Ref(twin, q, c.g, k, v, table, c.n, kvh*c.d, scale, AttnOpts{})
					if i := firstDiff(got, twin); i >= 0 {
						t.Fatalf("kv head %d: AttendF16 and its twin differ at %d: %g vs %g", kvh, i, got[i], twin[i])
					}
				}
			}
		})
	}
}

// sameTable fills a fresh store laid out like k (same page size, stride,
// table) with random values for positions 0..n-1.
func sameTable(r *rand.Rand, k KVRows, table []int32, n int, f16 bool) (KVRows, [][]float32) {
	v := KVRows{PageSize: k.PageSize, Stride: k.Stride}
	size := len(k.F32) + len(k.F16)
	if f16 {
		v.F16 = make([]uint16, size)
	} else {
		v.F32 = make([]float32, size)
	}
	rows := make([][]float32, n)
	for p := 0; p < n; p++ {
		row := randVec(r, k.Stride, 1)
		i := v.index(table, p, 0)
		if f16 {
			StoreRowF16(v.F16[i:i+k.Stride], row)
		} else {
			copy(v.F32[i:i+k.Stride], row)
		}
		rows[p] = row
	}
	return v, rows
}

func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func TestRoundF16(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	check := func(x float32) {
		want := F16ToF32(F32ToF16(x))
		if got := roundF16(x); math.Float32bits(got) != math.Float32bits(want) && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
			t.Fatalf("roundF16(%g) = %g, want %g", x, got, want)
		}
	}
	for _, x := range []float32{0, 1, -1, 65504, 65519.99, 65520, 1e9, 6.1035156e-05, 6.1e-05, 3e-8, 2.98e-8, 1.0009765625, 1.00048828125, 1.00146484375} {
		check(x)
		check(-x)
	}
	for i := 0; i < 1_000_000; i++ {
		check(math.Float32frombits(r.Uint32()))
	}
}

func TestDotF16Order(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, n := range []int{1, 31, 32, 64, 100, 128} {
		a, b := randVec(r, n, 1), randVec(r, n, 1)
		var want float64
		for i := range a {
			want += float64(a[i]) * float64(b[i])
		}
		if got := dotF16Order(a, b); math.Abs(float64(got)-want) > 1e-5*float64(n) {
			t.Fatalf("n=%d: %g vs %g", n, got, want)
		}
	}
}

func TestAttendSinglePositionReturnsV(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	k, table, _ := pagedStore(r, 1, 16, 64, false)
	v, rows := sameTable(r, k, table, 1, false)
	q := randVec(r, 2*64, 5)
	out := make([]float32, 2*64)
	Attend(out, q, 2, k, v, table, 1, 0, 0.125, make([]float32, AttnScratch(2, 1, 64)))
	for h := 0; h < 2; h++ {
		for j := 0; j < 64; j++ {
			if out[h*64+j] != rows[0][j] {
				t.Fatalf("head %d: out[%d]=%g want %g", h, j, out[h*64+j], rows[0][j])
			}
		}
	}
}

func TestAttendIgnoresLaterPositions(t *testing.T) {
	// Attending over n positions must not read position n or beyond, nor
	// pages outside the table.
	for _, c := range []struct {
		name string
		fn   func(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, scratch []float32)
	}{{"Attend", Attend}, {"AttendF16", AttendF16}} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(15, 16))
			k, table, _ := pagedStore(r, 40, 8, 64, true)
			v, _ := sameTable(r, k, table, 40, true)
			q := randVec(r, 64, 1)
			a := make([]float32, 64)
			scratch := make([]float32, AttnScratch(1, 40, 64))
			c.fn(a, q, 1, k, v, table, 20, 0, 0.125, scratch)
			// Scribble over positions 20..39.
			for p := 20; p < 40; p++ {
				i := k.index(table, p, 0)
				for j := 0; j < 64; j++ {
					k.F16[i+j] = F32ToF16(100)
					v.F16[i+j] = F32ToF16(-100)
				}
			}
			b := make([]float32, 64)
			c.fn(b, q, 1, k, v, table, 20, 0, 0.125, scratch)
			if i := firstDiff(a, b); i >= 0 {
				t.Fatalf("result changed at %d after writing later positions", i)
			}
		})
	}
}

// TestAttnHelpersMatchTwins compares the (possibly AVX2) attention helpers
// with their plain Go twins.
func TestAttnHelpersMatchTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, c := range []struct{ g, d int }{{1, 64}, {2, 64}, {8, 128}, {3, 24}, {2, 20}} {
		k := randVec(r, c.d, 1)
		w := randVec(r, c.g, 1)
		o1 := randVec(r, c.g*c.d, 1)
		o2 := append([]float32(nil), o1...)
		attnAxpy(o1, k, w, c.g)
		attnAxpyGo(o2, k, w, c.g)
		for i := range o1 {
			if math.Abs(float64(o1[i]-o2[i])) > 1e-6 {
				t.Fatalf("g%d d%d: axpy %d: %g vs %g", c.g, c.d, i, o1[i], o2[i])
			}
		}
		h16 := make([]uint16, c.d)
		for i := range h16 {
			h16[i] = F32ToF16(k[i])
		}
		c1, c2 := make([]float32, c.d), make([]float32, c.d)
		attnCvt(c1, h16)
		attnCvtGo(c2, h16)
		if i := firstDiff(c1, c2); i >= 0 {
			t.Fatalf("g%d d%d: F16 widening differs at %d", c.g, c.d, i)
		}
	}
}

// TestAttnScaleMaxMatchesTwin: the SIMD scale-and-max equals its Go twin
// bit for bit (scaled scores and maxima), for head counts with and without
// the vector path, including all-negative scores and a single position.
func TestAttnScaleMaxMatchesTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, c := range []struct{ g, n int }{{8, 1}, {8, 37}, {16, 512}, {24, 5}, {4, 9}, {3, 7}, {1, 1}} {
		s1 := randVec(r, c.g*c.n, 30)
		if c.n == 5 {
			for i := range s1 {
				s1[i] = -1 - float32(math.Abs(float64(s1[i])))
			}
		}
		s2 := append([]float32(nil), s1...)
		m1, m2 := make([]float32, c.g), make([]float32, c.g)
		attnScaleMax(s1, c.g, 0.125, m1)
		attnScaleMaxGo(s2, c.g, 0.125, m2)
		if i := firstDiff(s1, s2); i >= 0 {
			t.Fatalf("g%d n%d: scaled score %d: %g vs %g", c.g, c.n, i, s1[i], s2[i])
		}
		if i := firstDiff(m1, m2); i >= 0 {
			t.Fatalf("g%d n%d: max of head %d: %g vs %g", c.g, c.n, i, m1[i], m2[i])
		}
	}
}
