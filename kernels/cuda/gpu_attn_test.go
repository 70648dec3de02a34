package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/kernels/cpu"
)

// attnCase is a paged KV cache with several sequences and a batch of query
// tokens over it.
type attnCase struct {
	a        AttnParams
	kc, vc   []uint16 // [slots][Hk*D]
	tables   []int32  // [nseq][MaxPages]
	seq, pos []int32  // [T]
	q        []float32
}

// scrambledTables lays out the page tables of sequences of the given
// lengths over pages handed out in a scrambled order, with spare pages
// left unused; it returns the tables [len(lens)][maxPages] and the number
// of cache slots the pages span.
func scrambledTables(rng *rand.Rand, lens []int, pageSize, spare int) (tables []int32, maxPages, slots int) {
	total := 0
	for _, n := range lens {
		np := (n + pageSize - 1) / pageSize
		maxPages = max(maxPages, np)
		total += np
	}
	perm := rng.Perm(total + spare)
	tables = make([]int32, len(lens)*maxPages)
	next := 0
	for s, n := range lens {
		for p := 0; p < (n+pageSize-1)/pageSize; p++ {
			tables[s*maxPages+p] = int32(perm[next])
			next++
		}
	}
	return tables, maxPages, (total + spare) * pageSize
}

func newAttnCase(rng *rand.Rand, Hq, Hk, D int, lens []int, batch [][2]int32) attnCase {
	return newAttnCaseFill(rng, Hq, Hk, D, lens, batch, true)
}

// newAttnCaseFill is newAttnCase; with random false the cache repeats a
// short random pattern (fast to build for large benchmarks).
func newAttnCaseFill(rng *rand.Rand, Hq, Hk, D int, lens []int, batch [][2]int32, random bool) attnCase {
	const pageSize = 16
	tables, maxPages, slots := scrambledTables(rng, lens, pageSize, 3)
	c := attnCase{
		a:      AttnParams{Heads: Hq, KVHeads: Hk, HeadDim: D, PageSize: pageSize, MaxPages: maxPages, Scale: float32(1 / math.Sqrt(float64(D)))},
		kc:     make([]uint16, slots*Hk*D),
		vc:     make([]uint16, slots*Hk*D),
		tables: tables,
	}
	for i := range c.kc {
		if !random && i >= 4096 {
			c.kc[i], c.vc[i] = c.kc[i%4096], c.vc[i%4093]
			continue
		}
		c.kc[i] = cpu.F32ToF16(float32(rng.NormFloat64()))
		c.vc[i] = cpu.F32ToF16(float32(rng.NormFloat64()))
	}
	for _, b := range batch {
		c.seq = append(c.seq, b[0])
		c.pos = append(c.pos, b[1])
	}
	c.q = randF32(rng, len(batch)*Hq*D, 1)
	return c
}

// reference runs cpu.AttendRef per token and KV head.
func (c attnCase) reference() []float32 {
	a := c.a
	G, D := a.Heads/a.KVHeads, a.HeadDim
	k := cpu.KVRows{F16: c.kc, PageSize: a.PageSize, Stride: a.KVHeads * D}
	v := cpu.KVRows{F16: c.vc, PageSize: a.PageSize, Stride: a.KVHeads * D}
	out := make([]float32, len(c.q))
	for t := range c.seq {
		table := c.tables[int(c.seq[t])*a.MaxPages : (int(c.seq[t])+1)*a.MaxPages]
		for kh := 0; kh < a.KVHeads; kh++ {
			o := out[(t*a.Heads+kh*G)*D : (t*a.Heads+(kh+1)*G)*D]
			q := c.q[(t*a.Heads+kh*G)*D : (t*a.Heads+(kh+1)*G)*D]
			cpu.AttendRef(o, q, G, k, v, table, int(c.pos[t])+1, kh*D, a.Scale)
		}
	}
	return out
}

// run computes attention on the device with the decode kernel, and with
// the prefill kernel when prefill is set.
func (c attnCase) run(t *testing.T, d *Device, prefill bool) []float32 {
	out := make([]float32, len(c.q))
	npos := make([]int32, len(c.pos))
	maxN := 0
	for i, p := range c.pos {
		npos[i] = p + 1
		maxN = max(maxN, int(p)+1)
	}
	do(t, d, func(s *Stream) error {
		var ptrs []DevPtr
		up16 := func(v []uint16) DevPtr {
			p, _ := s.Alloc(uint64(2 * len(v)))
			s.Upload(p, bytesOf(v))
			ptrs = append(ptrs, p)
			return p
		}
		upI := func(v []int32) DevPtr { p, _ := upI32(s, v); ptrs = append(ptrs, p); return p }
		kc, vc := up16(c.kc), up16(c.vc)
		tables, seq, np := upI(c.tables), upI(c.seq), upI(npos)
		qp, _ := upF32(s, c.q)
		op, _ := s.Alloc(uint64(4 * len(out)))
		ptrs = append(ptrs, qp, op)
		defer func() {
			for _, p := range ptrs {
				s.Free(p)
			}
		}()
		if prefill {
			st, ln := PrefillTiles(c.seq, c.pos, c.a)
			sp, lp := upI(st), upI(ln)
			if err := s.AttnPrefill(op, qp, kc, vc, tables, seq, np, sp, lp, len(st), c.a); err != nil {
				return err
			}
		} else if err := s.AttnDecode(op, qp, kc, vc, tables, seq, np, len(c.seq), maxN, c.a); err != nil {
			return err
		}
		return s.DownloadF32(out, op)
	})
	return out
}

func TestGPUAttention(t *testing.T) {
	d := gpu(t)
	rng := rand.New(rand.NewPCG(15, 16))
	tests := []struct {
		name      string
		Hq, Hk, D int
		lens      []int
		batch     [][2]int32 // (seq, pos)
	}{
		{"decode batch gqa4 d128", 32, 8, 128, []int{1, 40, 700}, [][2]int32{{0, 0}, {1, 39}, {2, 699}}},
		{"decode long split d64 gqa8", 8, 1, 64, []int{2000}, [][2]int32{{0, 1999}, {0, 1000}, {0, 256}, {0, 255}}},
		{"mha d256", 4, 4, 256, []int{300}, [][2]int32{{0, 299}, {0, 17}}},
		{"prompt chunk and decodes", 8, 2, 64, []int{90, 33},
			[][2]int32{{0, 50}, {0, 51}, {0, 52}, {0, 53}, {0, 54}, {0, 55}, {0, 56}, {0, 57}, {0, 58}, {0, 59}, {0, 60}, {0, 61}, {0, 62}, {0, 63}, {0, 64}, {0, 65}, {0, 66}, {0, 67}, {1, 32}, {0, 89}}},
	}
	for _, tc := range tests {
		c := newAttnCase(rng, tc.Hq, tc.Hk, tc.D, tc.lens, tc.batch)
		want := c.reference()
		for _, prefill := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/prefill=%v", tc.name, prefill), func(t *testing.T) {
				got := c.run(t, d, prefill)
				for i := range want {
					if math.Abs(float64(got[i]-want[i])) > 2e-5 {
						t.Fatalf("out[%d] (token %d) = %v, reference %v", i, i/(tc.Hq*tc.D), got[i], want[i])
					}
				}
			})
		}
	}
}

func TestGPUArgmaxAndSample(t *testing.T) {
	d := gpu(t)
	rng := rand.New(rand.NewPCG(17, 18))
	const rows, vocab = 24, 50257
	logits := randF32(rng, rows*vocab, 3)
	// Ties and NaN in a few rows.
	logits[1*vocab+10], logits[1*vocab+20000] = 100, 100
	logits[2*vocab+5] = float32(math.NaN())
	temp := make([]float32, rows)
	topK := make([]int32, rows)
	topP := make([]float32, rows)
	u := make([]float32, rows)
	for r := range temp {
		temp[r] = []float32{1, 0.7, 1.5, 0.2}[r%4]
		topK[r] = []int32{0, 1, 40, 50257, 5, -1}[r%6]
		topP[r] = []float32{1, 0.9, 0.5, 0.95}[(r/2)%4]
		u[r] = rng.Float32()
	}
	arg := make([]int32, rows)
	tok := make([]int32, rows)
	do(t, d, func(s *Stream) error {
		lp, _ := upF32(s, logits)
		tp, _ := upF32(s, temp)
		kp, _ := upI32(s, topK)
		pp, _ := upF32(s, topP)
		up, _ := upF32(s, u)
		ap, _ := s.Alloc(4 * rows)
		op, _ := s.Alloc(4 * rows)
		defer func() {
			for _, p := range []DevPtr{lp, tp, kp, pp, up, ap, op} {
				s.Free(p)
			}
		}()
		if err := s.Argmax(ap, lp, rows, vocab); err != nil {
			return err
		}
		if err := s.SampleTopKTopP(op, lp, tp, kp, pp, up, rows, vocab); err != nil {
			return err
		}
		if err := s.DownloadI32(arg, ap); err != nil {
			return err
		}
		return s.DownloadI32(tok, op)
	})
	for r := 0; r < rows; r++ {
		row := logits[r*vocab : (r+1)*vocab]
		if want := ArgmaxRef(row); arg[r] != want {
			t.Errorf("row %d argmax %d, want %d", r, arg[r], want)
		}
		want, lo, hi := SampleRef(row, temp[r], int(topK[r]), topP[r], u[r])
		if tok[r] != want {
			// Float32 vs float64 sums may move u across a CDF boundary.
			uu := float64(u[r])
			if math.Min(math.Abs(uu-lo), math.Abs(uu-hi)) > 1e-4 {
				t.Errorf("row %d (T=%g k=%d p=%g u=%g): sampled %d, reference %d [%g, %g)", r, temp[r], topK[r], topP[r], u[r], tok[r], want, lo, hi)
			}
		}
	}
}

// TestGPUGraph captures norm + add into a graph and replays it after the
// inputs change on the device.
func TestGPUGraph(t *testing.T) {
	d := gpu(t)
	const n = 1024
	x1 := make([]float32, n)
	x2 := make([]float32, n)
	for i := range x1 {
		x1[i] = float32(i%7) - 3
		x2[i] = float32(i%5) + 1
	}
	got1 := make([]float32, n)
	got2 := make([]float32, n)
	do(t, d, func(s *Stream) error {
		xp, _ := upF32(s, x1)
		op, _ := s.Alloc(4 * n)
		defer s.Free(xp)
		defer s.Free(op)
		g, err := s.Capture(func() error {
			if err := s.RMSNorm(op, xp, 0, 1, n, 1e-6); err != nil {
				return err
			}
			return s.Add(op, op, xp, n)
		})
		if err != nil {
			return err
		}
		defer g.Destroy()
		if err := g.Launch(); err != nil {
			return err
		}
		if err := s.DownloadF32(got1, op); err != nil {
			return err
		}
		if err := s.UploadF32(xp, x2); err != nil {
			return err
		}
		if err := g.Launch(); err != nil {
			return err
		}
		return s.DownloadF32(got2, op)
	})
	for _, c := range []struct {
		x, got []float32
	}{{x1, got1}, {x2, got2}} {
		want := make([]float32, n)
		cpu.RMSNormRef(want, c.x, nil, 1e-6)
		for i := range want {
			want[i] += c.x[i]
			if math.Abs(float64(c.got[i]-want[i])) > 1e-5 {
				t.Fatalf("graph out[%d] = %v, want %v", i, c.got[i], want[i])
			}
		}
	}
}
