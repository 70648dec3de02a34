package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/kernels/cpu"
)

func init() {
	// TestLaunchArgumentsMatchSignatures checks both forms of the launch.
	a := AttnParams{Heads: 8, KVHeads: 2, HeadDim: 64, PageSize: 16, MaxPages: 4, Scale: 0.125}
	sigOps = append(sigOps,
		func(s *Stream) error { return s.AttnPrefillMMA(1, 2, 3, 4, 5, 6, 7, 8, 9, 2, a, true) },
		func(s *Stream) error { return s.AttnPrefillMMA(1, 2, 3, 4, 5, 6, 7, 8, 9, 2, a, false) })
}

// faCase is a paged F16 KV cache holding several sequences and a batch of
// query tokens over it (runs of prompt positions and single tokens).
type faCase struct {
	a              AttnParams
	kc, vc         []uint16
	tables         []int32
	seq, pos, npos []int32
	q              []float32
}

// faRun is a batch run: positions from..to-1 of sequence seq.
type faRun struct{ seq, from, to int }

func newFACase(rng *rand.Rand, Hq, Hk, D, pageSize int, lens []int, runs []faRun) faCase {
	tables, maxPages, slots := scrambledTables(rng, lens, pageSize, 2)
	c := faCase{
		a:      AttnParams{Heads: Hq, KVHeads: Hk, HeadDim: D, PageSize: pageSize, MaxPages: maxPages, Scale: float32(1 / math.Sqrt(float64(D)))},
		kc:     make([]uint16, slots*Hk*D),
		vc:     make([]uint16, slots*Hk*D),
		tables: tables,
	}
	for i := range c.kc {
		c.kc[i] = cpu.F32ToF16(float32(rng.NormFloat64()))
		c.vc[i] = cpu.F32ToF16(float32(rng.NormFloat64()))
	}
	for _, r := range runs {
		for p := r.from; p < r.to; p++ {
			c.seq = append(c.seq, int32(r.seq))
			c.pos = append(c.pos, int32(p))
			c.npos = append(c.npos, int32(p+1))
		}
	}
	// Queries of the size RoPE'd activations have (a few units), so that
	// the softmax is peaked enough for F16 rounding to matter.
	c.q = randF32(rng, len(c.seq)*Hq*D, 2)
	return c
}

// reference is cpu.AttendRef per token and KV head (float64 sums, no
// rounding beyond float32 inputs); fast uses cpu.Attend instead (float32,
// itself held against AttendRef in kernels/cpu) for long prompts.
func (c faCase) reference() []float32 { return c.referenceWith(false) }

func (c faCase) referenceWith(fast bool) []float32 {
	a := c.a
	G, D := a.Heads/a.KVHeads, a.HeadDim
	k := cpu.KVRows{F16: c.kc, PageSize: a.PageSize, Stride: a.KVHeads * D}
	v := cpu.KVRows{F16: c.vc, PageSize: a.PageSize, Stride: a.KVHeads * D}
	out := make([]float32, len(c.q))
	maxN := 0
	for _, n := range c.npos {
		maxN = max(maxN, int(n))
	}
	scratch := make([]float32, cpu.AttnScratch(G, maxN, D))
	for t := range c.seq {
		table := c.tables[int(c.seq[t])*a.MaxPages : (int(c.seq[t])+1)*a.MaxPages]
		for kh := 0; kh < a.KVHeads; kh++ {
			lo, hi := (t*a.Heads+kh*G)*D, (t*a.Heads+(kh+1)*G)*D
			if fast {
				cpu.Attend(out[lo:hi], c.q[lo:hi], G, k, v, table, int(c.npos[t]), kh*D, a.Scale, scratch)
			} else {
				cpu.AttendRef(out[lo:hi], c.q[lo:hi], G, k, v, table, int(c.npos[t]), kh*D, a.Scale)
			}
		}
	}
	return out
}

func (c faCase) ref(t *testing.T, split bool) []float32 {
	t.Helper()
	st, ln := PrefillTilesMMA(c.seq, c.pos, c.a)
	out := make([]float32, len(c.q))
	if err := AttnPrefillMMARef(out, c.q, c.kc, c.vc, c.tables, c.seq, c.npos, st, ln, c.a, split); err != nil {
		t.Fatal(err)
	}
	return out
}

// maxDiff returns the largest |a-b| and the mean |a-b|.
func maxDiff(a, b []float32) (worst, mean float64) {
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

// F16 Q and P against the float32 reference: with |v| ~ N(0,1) values and
// queries of scale 2, an output moves by at most a few 1e-3 (relative F16
// rounding 2^-11 on q, hence on the scores, and on every weight p). With
// split (hi+lo pairs, 2^-22) the outputs stay within float32 noise.
const (
	faRefMax  = 4e-3
	faRefMean = 2.5e-4
	// split
	faSplitMax  = 1e-5
	faSplitMean = 3e-7
)

// faBounds returns the bounds against the float32 reference.
func faBounds(split bool) (float64, float64) {
	if split {
		return faSplitMax, faSplitMean
	}
	return faRefMax, faRefMean
}

type faShape struct {
	name            string
	fast            bool // reference: cpu.Attend
	Hq, Hk, D, page int
	lens            []int
	runs            []faRun
}

func faShapes() []faShape {
	return []faShape{
		{"gqa4 d128 page16 one prompt", false, 8, 2, 128, 16, []int{150}, []faRun{{0, 0, 150}}},
		{"gqa2 d64 page7 chunk boundaries", false, 4, 2, 64, 7, []int{130}, []faRun{{0, 0, 63}, {0, 63, 64}, {0, 64, 65}, {0, 65, 130}}},
		{"mha d64 page1 64-token tiles", false, 2, 2, 64, 1, []int{140}, []faRun{{0, 0, 140}}},
		{"gqa8 d128 page32 two sequences and decodes", false, 8, 1, 128, 32, []int{90, 200},
			[]faRun{{1, 100, 137}, {0, 89, 90}, {0, 3, 40}, {1, 199, 200}}},
		{"gqa3 d64 ragged rows", false, 6, 2, 64, 16, []int{77}, []faRun{{0, 0, 77}}},
	}
}

// TestAttnPrefillMMATranslit runs the lane-level transliteration of
// attn_prefill_mma (fattn_sim_test.go) and holds it against the reference
// twin (the same roundings: within a few F16 steps of p) and against the
// float32 attention reference (the F16 bound).
func TestAttnPrefillMMATranslit(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, sh := range faShapes() {
		c := newFACase(rng, sh.Hq, sh.Hk, sh.D, sh.page, sh.lens, sh.runs)
		want := c.reference()
		for _, split := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/split=%v", sh.name, split), func(t *testing.T) {
				st, ln := PrefillTilesMMA(c.seq, c.pos, c.a)
				got := make([]float32, len(c.q))
				for i := range got {
					got[i] = float32(math.NaN()) // every output must be written
				}
				loads, zeros := simAttnPrefillMMA(got, c.q, c.kc, c.vc, c.tables, c.a.MaxPages, c.seq, c.npos, st, ln,
					sh.Hq, sh.Hk, sh.D, sh.page, c.a.Scale, split)
				if loads == 0 || zeros == loads {
					t.Fatalf("%d copies, %d zero-filled", loads, zeros)
				}
				w1, m1 := maxDiff(got, c.ref(t, split))
				w2, m2 := maxDiff(got, want)
				t.Logf("vs twin: max %.3g mean %.3g; vs float32 reference: max %.3g mean %.3g", w1, m1, w2, m2)
				if w1 > 5e-4 || m1 > 2e-6 {
					t.Errorf("transliteration vs twin: max %.3g mean %.3g", w1, m1)
				}
				if bw, bm := faBounds(split); w2 > bw || m2 > bm {
					t.Errorf("transliteration vs float32 reference: max %.3g mean %.3g (bounds %g, %g)", w2, m2, bw, bm)
				}
			})
		}
	}
}

// TestAttnPrefillMMARef holds the reference twin against the float32
// attention reference on more shapes (the emulator runs it for every
// launch of attn_prefill_mma).
func TestAttnPrefillMMARef(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	shapes := append(faShapes(),
		faShape{"llama3 heads d128 long prompt", true, 32, 8, 128, 16, []int{520}, []faRun{{0, 0, 520}}},
		faShape{"gqa4 d64 page64 three sequences", false, 8, 2, 64, 64, []int{300, 5, 129}, []faRun{{2, 0, 129}, {0, 0, 300}, {1, 4, 5}}},
	)
	for _, sh := range shapes {
		c := newFACase(rng, sh.Hq, sh.Hk, sh.D, sh.page, sh.lens, sh.runs)
		want := c.referenceWith(sh.fast)
		var f16Err float64
		for _, split := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/split=%v", sh.name, split), func(t *testing.T) {
				w, m := maxDiff(c.ref(t, split), want)
				t.Logf("vs float32 reference: max %.3g mean %.3g", w, m)
				if bw, bm := faBounds(split); w > bw || m > bm {
					t.Errorf("twin vs float32 reference: max %.3g mean %.3g (bounds %g, %g)", w, m, bw, bm)
				}
				// The F16 rounding is really there, and split really
				// removes most of it.
				if !split {
					f16Err = m
					if w == 0 {
						t.Error("twin equals the float32 reference exactly: no F16 rounding of Q and P")
					}
				} else if m > f16Err/20 {
					t.Errorf("split mean error %.3g, F16 %.3g: the remainders are not applied", m, f16Err)
				}
			})
		}
	}
}

// TestMMAFragmentLayoutsWarpSim: the kernel's placement of Q, K, P and V
// fragments (its index arithmetic, transliterated) under the PTX rules for
// ldmatrix and mma.m16n8k16 computes S = Q·Kᵀ and O = P·V of plain math;
// the K addressing of the V side (a layout mistake) does not.
func TestMMAFragmentLayoutsWarpSim(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	for _, D := range []int{64, 128} {
		t.Run(fmt.Sprintf("D=%d", D), func(t *testing.T) {
			KS := D + 8
			b := &faBlock{D: D, KS: KS, sm: make([]uint16, 2*faKC*KS), ksb: 0, vsb: faKC * KS}
			K := make([][]float32, faKC) // [key][d]
			V := make([][]float32, faKC)
			for j := 0; j < faKC; j++ {
				K[j], V[j] = make([]float32, D), make([]float32, D)
				for d := 0; d < D; d++ {
					kh, vh := f2h(float32(rng.NormFloat64())), f2h(float32(rng.NormFloat64()))
					K[j][d], V[j][d] = h2f(kh), h2f(vh)
					b.sm[b.ksb+j*KS+d], b.sm[b.vsb+j*KS+d] = kh, vh
				}
			}
			const warp = 2
			Q := make([][]float32, faRows)
			for r := range Q {
				Q[r] = randF32(rng, D, 1)
			}
			qa, _ := faQFrags(D, warp, false, func(r int) []float32 { return Q[r] })
			s := faScores(b, qa, nil)
			// S in accumulator layout: tile j, lane, element e -> row
			// 16·warp + g + 8(e>>1), key 8j + 2c + (e&1).
			for j := range s {
				for lane := 0; lane < 32; lane++ {
					for e := 0; e < 4; e++ {
						r := warp*16 + lane>>2 + 8*(e>>1)
						key := 8*j + 2*(lane&3) + e&1
						var want float64
						for d := 0; d < D; d++ {
							want += float64(h2f(f2h(Q[r][d]))) * float64(K[key][d])
						}
						if math.Abs(want-float64(s[j][lane][e])) > 1e-4*math.Max(1, math.Abs(want)) {
							t.Fatalf("S[%d][%d] = %v, want %v", r-warp*16, key, s[j][lane][e], want)
						}
					}
				}
			}
			// P (F16, in S's accumulator layout) times V.
			P := make([][]float32, 16)
			p := make([][32][4]uint16, faKC/8)
			for r := range P {
				P[r] = make([]float32, faKC)
			}
			for j := range p {
				for lane := 0; lane < 32; lane++ {
					for e := 0; e < 4; e++ {
						h := f2h(rng.Float32())
						p[j][lane][e] = h
						P[lane>>2+8*(e>>1)][8*j+2*(lane&3)+e&1] = h2f(h)
					}
				}
			}
			check := func(b *faBlock) error {
				o := make([][32][4]float32, D/8)
				faPV(b, faPFrags(p), nil, o)
				for j := range o {
					for lane := 0; lane < 32; lane++ {
						for e := 0; e < 4; e++ {
							r, col := lane>>2+8*(e>>1), 8*j+2*(lane&3)+e&1
							var want float64
							for key := 0; key < faKC; key++ {
								want += float64(P[r][key]) * float64(V[key][col])
							}
							if math.Abs(want-float64(o[j][lane][e])) > 1e-4*math.Max(1, math.Abs(want)) {
								return fmt.Errorf("O[%d][%d] = %v, want %v", r, col, o[j][lane][e], want)
							}
						}
					}
				}
				return nil
			}
			if err := check(b); err != nil {
				t.Fatal(err)
			}
			// Negative control: V read through non-transposed ldmatrix
			// (K's path) must not pass.
			o := make([][32][4]float32, D/8)
			pa := faPFrags(p)
			for k := 0; k < faKC/16; k++ {
				var addr [32]int
				for lane := range addr {
					addr[lane] = b.vsb + faKAddr(lane, KS) + k*16*KS
				}
				r := ptxLdmatrixX4(b.sm, addr, false)
				var b0 [32][2]uint32
				for lane := range r {
					b0[lane] = [2]uint32{r[lane][0], r[lane][1]}
				}
				pk := pa[k]
				ptxMMA16816(&o[0], &pk, &b0)
			}
			var want float64
			for key := 0; key < faKC; key++ {
				want += float64(P[0][key]) * float64(V[key][0])
			}
			if math.Abs(want-float64(o[0][0][0])) < 1e-4*math.Max(1, math.Abs(want)) {
				t.Fatalf("a non-transposed V load gave the right O[0][0] = %v: the check cannot tell layouts apart", want)
			}
		})
	}
}

// TestPrefillTilesMMA: tiles of MMARows/G tokens, split at sequence
// changes and position gaps; PrefillTiles keeps its 32-row tiles.
func TestPrefillTilesMMA(t *testing.T) {
	seq := make([]int32, 0, 200)
	pos := make([]int32, 0, 200)
	for p := 0; p < 150; p++ {
		seq, pos = append(seq, 0), append(pos, int32(p))
	}
	seq, pos = append(seq, 1, 2, 2), append(pos, 9, 4, 6)
	tests := []struct {
		Hq, Hk    int
		wantTiles int
		per       int
	}{{8, 8, 3 + 3, 64}, {8, 4, 5 + 3, 32}, {32, 8, 10 + 3, 16}, {8, 1, 19 + 3, 8}, {6, 2, 8 + 3, 21}}
	for _, tc := range tests {
		a := AttnParams{Heads: tc.Hq, KVHeads: tc.Hk, HeadDim: 128, PageSize: 16, MaxPages: 16}
		if got := MMATileTokens(a); got != tc.per {
			t.Errorf("G=%d: %d tokens per tile, want %d", tc.Hq/tc.Hk, got, tc.per)
		}
		st, ln := PrefillTilesMMA(seq, pos, a)
		if len(st) != tc.wantTiles {
			t.Errorf("G=%d: %d tiles %v, want %d", tc.Hq/tc.Hk, len(st), ln, tc.wantTiles)
		}
		covered := 0
		for i := range st {
			if int(st[i]) != covered || int(ln[i])*tc.Hq/tc.Hk > MMARows {
				t.Fatalf("G=%d: tile %d = (%d, %d) after %d tokens", tc.Hq/tc.Hk, i, st[i], ln[i], covered)
			}
			covered += int(ln[i])
		}
		if covered != len(seq) {
			t.Fatalf("tiles cover %d of %d tokens", covered, len(seq))
		}
	}
	// The scalar kernel's tiles: 32 rows.
	a := AttnParams{Heads: 32, KVHeads: 8, HeadDim: 128, PageSize: 16, MaxPages: 16}
	if _, ln := PrefillTiles(seq, pos, a); ln[0] != 8 {
		t.Fatalf("PrefillTiles: first tile of %d tokens, want 8", ln[0])
	}
	if MMAPrefillSupports(AttnParams{Heads: 4, KVHeads: 2, HeadDim: 256, PageSize: 16, MaxPages: 1}) ||
		!MMAPrefillSupports(AttnParams{Heads: 4, KVHeads: 2, HeadDim: 64, PageSize: 16, MaxPages: 1}) {
		t.Fatal("MMAPrefillSupports: head dims 64 and 128 only")
	}
}

// TestGPUAttnPrefillMMA runs attn_prefill_mma on the device (skips without
// one) against its twin (the same roundings: differences of float32
// summation order, which may move a weight by one F16 step) and against the
// float32 reference (the F16 bound).
func TestGPUAttnPrefillMMA(t *testing.T) {
	d := gpu(t)
	rng := rand.New(rand.NewPCG(47, 48))
	for _, sh := range faShapes() {
		c := newFACase(rng, sh.Hq, sh.Hk, sh.D, sh.page, sh.lens, sh.runs)
		want := c.reference()
		for _, split := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/split=%v", sh.name, split), func(t *testing.T) {
				got := c.runDevice(t, d, split)
				w1, m1 := maxDiff(got, c.ref(t, split))
				w2, m2 := maxDiff(got, want)
				t.Logf("vs twin: max %.3g mean %.3g; vs float32 reference: max %.3g mean %.3g", w1, m1, w2, m2)
				if w1 > 5e-4 || m1 > 2e-6 {
					t.Errorf("device vs twin: max %.3g mean %.3g", w1, m1)
				}
				if bw, bm := faBounds(split); w2 > bw || m2 > bm {
					t.Errorf("device vs float32 reference: max %.3g mean %.3g (bounds %g, %g)", w2, m2, bw, bm)
				}
			})
		}
	}
}

// runDevice computes the case's attention with AttnPrefillMMA on d.
func (c faCase) runDevice(t *testing.T, d *Device, split bool) []float32 {
	out := make([]float32, len(c.q))
	for i := range out {
		out[i] = float32(math.NaN())
	}
	do(t, d, func(s *Stream) error {
		var ptrs []DevPtr
		defer func() {
			for _, p := range ptrs {
				s.Free(p)
			}
		}()
		up := func(v []byte) DevPtr {
			p, _ := s.Alloc(uint64(max(4, len(v))))
			s.Upload(p, v)
			ptrs = append(ptrs, p)
			return p
		}
		st, ln := PrefillTilesMMA(c.seq, c.pos, c.a)
		kc, vc, tables := up(bytesOf(c.kc)), up(bytesOf(c.vc)), up(bytesOf(c.tables))
		seq, np, sp, lp := up(bytesOf(c.seq)), up(bytesOf(c.npos)), up(bytesOf(st)), up(bytesOf(ln))
		qp, op := up(bytesOf(c.q)), up(bytesOf(out))
		if err := s.AttnPrefillMMA(op, qp, kc, vc, tables, seq, np, sp, lp, len(st), c.a, split); err != nil {
			return err
		}
		return s.DownloadF32(out, op)
	})
	return out
}
