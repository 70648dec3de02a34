package cudaemu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"oengine/kernels/cpu"
	"oengine/kernels/cuda"
)

// attn_prefill_mma through the fake driver and its twin, against the plain
// float32 attention of kernels/cpu (cpu.AttendRef) and against the scalar
// prefill kernel's twin on the same device: page sizes, GQA ratios, ragged
// tiles, several sequences and decode tokens in one batch.

type mmaRun struct{ seq, from, to int }

type mmaCase struct {
	a              cuda.AttnParams
	kc, vc         []uint16
	tables         []int32
	seq, pos, npos []int32
	q              []float32
}

func newMMACase(rng *rand.Rand, Hq, Hk, D, pageSize int, lens []int, runs []mmaRun) mmaCase {
	maxPages, total := 0, 0
	for _, n := range lens {
		maxPages = max(maxPages, (n+pageSize-1)/pageSize)
		total += (n + pageSize - 1) / pageSize
	}
	perm := rng.Perm(total + 1)
	c := mmaCase{a: cuda.AttnParams{Heads: Hq, KVHeads: Hk, HeadDim: D, PageSize: pageSize, MaxPages: maxPages,
		Scale: float32(1 / math.Sqrt(float64(D)))}}
	c.tables = make([]int32, len(lens)*maxPages)
	next := 0
	for s, n := range lens {
		for p := 0; p < (n+pageSize-1)/pageSize; p++ {
			c.tables[s*maxPages+p] = int32(perm[next])
			next++
		}
	}
	slots := (total + 1) * pageSize * Hk * D
	c.kc, c.vc = make([]uint16, slots), make([]uint16, slots)
	for i := range c.kc {
		c.kc[i] = cpu.F32ToF16(float32(rng.NormFloat64()))
		c.vc[i] = cpu.F32ToF16(float32(rng.NormFloat64()))
	}
	for _, r := range runs {
		for p := r.from; p < r.to; p++ {
			c.seq, c.pos, c.npos = append(c.seq, int32(r.seq)), append(c.pos, int32(p)), append(c.npos, int32(p+1))
		}
	}
	c.q = make([]float32, len(c.seq)*Hq*D)
	for i := range c.q {
		c.q[i] = float32(rng.NormFloat64() * 2)
	}
	return c
}

func (c mmaCase) reference() []float32 {
	a := c.a
	G, D := a.Heads/a.KVHeads, a.HeadDim
	k := cpu.KVRows{F16: c.kc, PageSize: a.PageSize, Stride: a.KVHeads * D}
	v := cpu.KVRows{F16: c.vc, PageSize: a.PageSize, Stride: a.KVHeads * D}
	out := make([]float32, len(c.q))
	for t := range c.seq {
		table := c.tables[int(c.seq[t])*a.MaxPages : (int(c.seq[t])+1)*a.MaxPages]
		for kh := 0; kh < a.KVHeads; kh++ {
			lo, hi := (t*a.Heads+kh*G)*D, (t*a.Heads+(kh+1)*G)*D
			cpu.AttendRef(out[lo:hi], c.q[lo:hi], G, k, v, table, int(c.npos[t]), kh*D, a.Scale)
		}
	}
	return out
}

// run computes the batch's attention on the emulated device with the
// tensor-core kernel (mma, split or not) or the scalar prefill kernel.
func (c mmaCase) run(t *testing.T, d *Device, mma, split bool) []float32 {
	t.Helper()
	out := make([]float32, len(c.q))
	err := d.Do(func(s *cuda.Stream) error {
		var ptrs []cuda.DevPtr
		defer func() {
			for _, p := range ptrs {
				s.Free(p)
			}
		}()
		up := func(b []byte) (cuda.DevPtr, error) {
			p, err := s.Alloc(uint64(max(4, len(b))))
			if err != nil {
				return 0, err
			}
			ptrs = append(ptrs, p)
			return p, s.Upload(p, b)
		}
		var dev [8]cuda.DevPtr
		st, ln := cuda.PrefillTiles(c.seq, c.pos, c.a)
		if mma {
			st, ln = cuda.PrefillTilesMMA(c.seq, c.pos, c.a)
		}
		for i, b := range [][]byte{bytesOf(c.kc), bytesOf(c.vc), bytesOf(c.tables), bytesOf(c.seq), bytesOf(c.npos),
			bytesOf(st), bytesOf(ln), bytesOf(c.q)} {
			p, err := up(b)
			if err != nil {
				return err
			}
			dev[i] = p
		}
		o, err := s.Alloc(uint64(4 * len(out)))
		if err != nil {
			return err
		}
		ptrs = append(ptrs, o)
		if mma {
			err = s.AttnPrefillMMA(o, dev[7], dev[0], dev[1], dev[2], dev[3], dev[4], dev[5], dev[6], len(st), c.a, split)
		} else {
			err = s.AttnPrefill(o, dev[7], dev[0], dev[1], dev[2], dev[3], dev[4], dev[5], dev[6], len(st), c.a)
		}
		if err != nil {
			return err
		}
		return s.DownloadF32(out, o)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func bytesOf[T uint16 | int32 | float32](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}

func diff(a, b []float32) (worst, mean float64) {
	for i := range a {
		d := math.Abs(float64(a[i] - b[i]))
		if math.IsNaN(d) {
			return math.Inf(1), math.Inf(1)
		}
		worst = max(worst, d)
		mean += d
	}
	return worst, mean / float64(len(a))
}

// Bounds of the F16 rounding of Q and P, and of the split form (hi+lo F16
// pairs: float32 noise); see kernels/cuda/fattn_test.go (N(0,1) keys and
// values, queries of scale 2).
const (
	mmaMax, mmaMean           = 4e-3, 2.5e-4
	mmaSplitMax, mmaSplitMean = 1e-5, 3e-7
)

func TestEmulatedAttnPrefillMMA(t *testing.T) {
	d, err := Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rng := rand.New(rand.NewPCG(51, 52))
	tests := []struct {
		name            string
		Hq, Hk, D, page int
		lens            []int
		runs            []mmaRun
	}{
		{"llama3 gqa4 d128 page16", 32, 8, 128, 16, []int{200}, []mmaRun{{0, 0, 200}}},
		{"gqa2 d64 page1", 4, 2, 64, 1, []int{100}, []mmaRun{{0, 0, 100}}},
		{"gqa8 d128 page5 ragged", 8, 1, 128, 5, []int{83}, []mmaRun{{0, 0, 83}}},
		{"mha d64 page256 chunked prompt", 2, 2, 64, 256, []int{300}, []mmaRun{{0, 200, 300}}},
		{"gqa3 d64 three sequences and decodes", 6, 2, 64, 16, []int{70, 129, 33},
			[]mmaRun{{1, 0, 129}, {0, 69, 70}, {2, 10, 33}, {0, 20, 40}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newMMACase(rng, tc.Hq, tc.Hk, tc.D, tc.page, tc.lens, tc.runs)
			want := c.reference()
			f16 := c.run(t, d, true, false)
			w, m := diff(f16, want)
			t.Logf("attn_prefill_mma F16 vs float32 reference: max %.3g mean %.3g", w, m)
			if w > mmaMax || m > mmaMean || w == 0 {
				t.Errorf("attn_prefill_mma F16 vs float32 reference: max %.3g mean %.3g (bounds %g, %g; exact equality would mean no F16 rounding)",
					w, m, mmaMax, mmaMean)
			}
			split := c.run(t, d, true, true)
			w, m = diff(split, want)
			t.Logf("attn_prefill_mma split vs float32 reference: max %.3g mean %.3g", w, m)
			if w > mmaSplitMax || m > mmaSplitMean {
				t.Errorf("attn_prefill_mma split vs float32 reference: max %.3g mean %.3g (bounds %g, %g)", w, m, mmaSplitMax, mmaSplitMean)
			}
			scalar := c.run(t, d, false, false)
			if w, m := diff(split, scalar); w > mmaSplitMax || m > mmaSplitMean {
				t.Errorf("attn_prefill_mma split vs attn_prefill_f16: max %.3g mean %.3g", w, m)
			}
		})
	}
}

// A head dim the tensor-core kernel does not handle is refused (the
// decoder falls back to attn_prefill_f16).
func TestAttnPrefillMMARefusesHeadDim(t *testing.T) {
	d, err := Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a := cuda.AttnParams{Heads: 4, KVHeads: 2, HeadDim: 96, PageSize: 16, MaxPages: 2, Scale: 0.1}
	err = d.Do(func(s *cuda.Stream) error { return s.AttnPrefillMMA(1, 2, 3, 4, 5, 6, 7, 8, 9, 1, a, true) })
	if err == nil {
		t.Fatal("head dim 96 accepted")
	}
	t.Log(fmt.Sprint(err))
}
