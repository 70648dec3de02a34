package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttendChunkMatchesAttendHeads: AttendChunk gives every token of a
// chunk the bits AttendHeads gives it alone, over group sizes 1..8 (lanes
// of one, two, four and eight heads per token in the tiles), head
// dimensions 64 and 128 (and 24, off the 8-value grid: the plain Go
// helpers), F16 and F32 stores with scrambled page tables, chunk lengths
// that are one token, part of a tile, and several tiles with a partial
// last one, and chunks starting at position 0, inside the first page and
// deep in the sequence; once more with the vector helpers off.
func TestAttendChunkMatchesAttendHeads(t *testing.T) {
	for _, simd := range []bool{true, false} {
		if simd && !attnAVX2 {
			continue
		}
		t.Run(fmt.Sprintf("simd%v", simd), func(t *testing.T) {
			saved := attnAVX2
			attnAVX2 = simd
			t.Cleanup(func() { attnAVX2 = saved })
			r := rand.New(rand.NewPCG(131, 132))
			type tc struct {
				kvh, g, d, page int
				f16             bool
			}
			var cases []tc
			for _, g := range []int{1, 2, 4, 8} {
				for _, d := range []int{64, 128} {
					for _, f16 := range []bool{true, false} {
						cases = append(cases, tc{kvh: 2, g: g, d: d, page: 16, f16: f16})
					}
				}
			}
			cases = append(cases, tc{3, 3, 24, 4, true}, tc{1, 5, 40, 8, false}, tc{4, 4, 64, 32, true})
			for _, c := range cases {
				for _, T := range []int{1, 2, 7, 64, 130} {
					for _, p0 := range []int{0, 5, 300} {
						if !simd && (T == 130 || p0 == 300) && c.d != 64 {
							continue // the plain path once per shape is enough
						}
						name := fmt.Sprintf("kvh%d_g%d_d%d_f16%v_T%d_p%d", c.kvh, c.g, c.d, c.f16, T, p0)
						checkAttendChunk(t, r, name, c.kvh, c.g, c.d, c.page, c.f16, T, p0, false, false)
					}
				}
			}
		})
	}
}

// TestAttendChunkIgnoresLaterRows: a token's result does not depend on
// the rows after its own position, although the tile computes scores for
// them: with NaN in the K and V rows of the chunk's last position every
// earlier token still gets AttendHeads' bits (a NaN weight or a zero
// weight times NaN would spread).
func TestAttendChunkIgnoresLaterRows(t *testing.T) {
	r := rand.New(rand.NewPCG(133, 134))
	for _, g := range []int{1, 4, 8} {
		for _, f16 := range []bool{true, false} {
			checkAttendChunk(t, r, fmt.Sprintf("g%d_f16%v", g, f16), 2, g, 64, 16, f16, 40, 70, true, false)
		}
	}
}

// TestAttendChunkSinks: with attention sinks (gpt-oss), AttendChunkSinks
// gives each token AttendHeadsWindow's bits with the same sinks.
func TestAttendChunkSinks(t *testing.T) {
	r := rand.New(rand.NewPCG(135, 136))
	for _, g := range []int{4, 8} {
		for _, f16 := range []bool{true, false} {
			for _, tp := range [][2]int{{7, 0}, {64, 5}, {33, 300}} {
				checkAttendChunk(t, r, fmt.Sprintf("g%d_f16%v_T%d_p%d", g, f16, tp[0], tp[1]), 2, g, 64, 16, f16, tp[0], tp[1], false, true)
			}
		}
	}
}

// checkAttendChunk builds a store of p0+T positions and compares
// AttendChunk over the T tokens at p0.. with AttendHeads per token; with
// poison, the last position's K and V rows hold NaN and the last token
// is not compared; with sinks, AttendChunkSinks and AttendHeadsWindow run
// with random sinks.
func checkAttendChunk(t *testing.T, r *rand.Rand, name string, kvh, g, d, page int, f16 bool, T, p0 int, poison, withSinks bool) {
	t.Helper()
	n := p0 + T
	stride := kvh * d
	k, table, _ := pagedStore(r, n, page, stride, f16)
	v, _ := sameTable(r, k, table, n, f16)
	if poison {
		for _, kv := range []KVRows{k, v} {
			i := kv.index(table, n-1, 0)
			for j := 0; j < stride; j++ {
				if f16 {
					kv.F16[i+j] = 0x7e00 // F16 NaN
				} else {
					kv.F32[i+j] = float32(math.NaN())
				}
			}
		}
	}
	qd := kvh * g * d
	q := randVec(r, T*qd, 2)
	const scale = 0.125
	got := make([]float32, T*qd)
	for i := range got {
		got[i] = float32(math.NaN()) // every value must be written
	}
	var sinks []float32
	if withSinks {
		sinks = randVec(r, kvh*g, 3)
	}
	AttendChunkSinks(got, q, T, kvh, g, k, v, table, p0, scale, sinks, make([]float32, AttnChunkScratch(g, n, d)))
	want := make([]float32, qd)
	scratch := make([]float32, AttnHeadsScratch(kvh, g, n, d))
	last := T
	if poison {
		last = T - 1
	}
	for tok := 0; tok < last; tok++ {
		AttendHeadsWindow(want, q[tok*qd:(tok+1)*qd], kvh, g, k, v, table, p0+tok+1, scale, AttnOpts{Sinks: sinks}, scratch)
		if i := firstDiff(got[tok*qd:(tok+1)*qd], want); i >= 0 {
			t.Fatalf("%s: token %d (position %d) query head %d value %d: %g, AttendHeads %g",
				name, tok, p0+tok, i/d, i%d, got[tok*qd+i], want[i])
		}
	}
}

// TestAttendFullMatchesAttendHeads: AttendFull (an encoder's attention,
// no causal mask) gives every query token AttendHeads' bits over all n
// positions, whatever the tile cut (T not a multiple of the tile), the
// group size, the store type and the page size; a poisoned row past n is
// never read.
func TestAttendFullMatchesAttendHeads(t *testing.T) {
	for _, simd := range []bool{true, false} {
		if simd && !attnAVX2 {
			continue
		}
		saved := attnAVX2
		attnAVX2 = simd
		r := rand.New(rand.NewPCG(137, 138))
		for _, c := range []struct{ kvh, g, d, page, T int }{
			{12, 1, 32, 16, 1}, {12, 1, 32, 16, 77}, {2, 4, 64, 16, 40}, {3, 3, 24, 4, 9}, {1, 8, 128, 32, 130},
		} {
			for _, f16 := range []bool{true, false} {
				name := fmt.Sprintf("simd%v_kvh%d_g%d_d%d_T%d_f16%v", simd, c.kvh, c.g, c.d, c.T, f16)
				n := c.T // every query attends to its whole sequence
				stride := c.kvh * c.d
				k, table, _ := pagedStore(r, n+1, c.page, stride, f16)
				v, _ := sameTable(r, k, table, n+1, f16)
				for _, kv := range []KVRows{k, v} { // row n: outside the sequence
					i := kv.index(table, n, 0)
					for j := 0; j < stride; j++ {
						if f16 {
							kv.F16[i+j] = 0x7e00
						} else {
							kv.F32[i+j] = float32(math.NaN())
						}
					}
				}
				qd := c.kvh * c.g * c.d
				q := randVec(r, c.T*qd, 2)
				got := make([]float32, c.T*qd)
				AttendFull(got, q, c.T, c.kvh, c.g, k, v, table, n, 0.125, make([]float32, AttnChunkScratch(c.g, n, c.d)))
				want := make([]float32, qd)
				scratch := make([]float32, AttnHeadsScratch(c.kvh, c.g, n, c.d))
				for tok := 0; tok < c.T; tok++ {
					AttendHeads(want, q[tok*qd:(tok+1)*qd], c.kvh, c.g, k, v, table, n, 0.125, scratch)
					if i := firstDiff(got[tok*qd:(tok+1)*qd], want); i >= 0 {
						t.Fatalf("%s: token %d value %d: %g, AttendHeads %g", name, tok, i, got[tok*qd+i], want[i])
					}
				}
			}
		}
		attnAVX2 = saved
	}
}

// TestAttendFullALiBi: AttendFullALiBi gives each token bit for bit
// AttendHeadsWindow's with the same slopes and its position, and that
// is the float64 formula softmax(scale·q·k − slope·|i − p|)·v.
func TestAttendFullALiBi(t *testing.T) {
	for _, simd := range []bool{true, false} {
		if simd && !attnAVX2 {
			continue
		}
		saved := attnAVX2
		attnAVX2 = simd
		r := rand.New(rand.NewPCG(139, 140))
		for _, c := range []struct{ kvh, g, d, page, T int }{
			{12, 1, 32, 16, 1}, {12, 1, 32, 16, 77}, {2, 4, 64, 16, 40}, {3, 3, 24, 4, 9}, {1, 8, 128, 32, 130},
		} {
			for _, f16 := range []bool{true, false} {
				name := fmt.Sprintf("simd%v_kvh%d_g%d_d%d_T%d_f16%v", simd, c.kvh, c.g, c.d, c.T, f16)
				n, stride := c.T, c.kvh*c.d
				k, table, _ := pagedStore(r, n, c.page, stride, f16)
				v, _ := sameTable(r, k, table, n, f16)
				qd := c.kvh * c.g * c.d
				q := randVec(r, c.T*qd, 2)
				slopes := make([]float32, c.kvh*c.g)
				for i := range slopes {
					slopes[i] = float32(math.Pow(2, -8*float64(i+1)/float64(len(slopes))))
				}
				got := make([]float32, c.T*qd)
				AttendFullALiBi(got, q, c.T, c.kvh, c.g, k, v, table, n, 0, 0.125, slopes, make([]float32, AttnChunkScratch(c.g, n, c.d)))
				want := make([]float32, qd)
				scratch := make([]float32, AttnHeadsScratch(c.kvh, c.g, n, c.d))
				for tok := 0; tok < c.T; tok++ {
					AttendHeadsWindow(want, q[tok*qd:(tok+1)*qd], c.kvh, c.g, k, v, table, n, 0.125, AttnOpts{ALiBi: slopes, QPos: tok}, scratch)
					if i := firstDiff(got[tok*qd:(tok+1)*qd], want); i >= 0 {
						t.Fatalf("%s: token %d value %d: %g, AttendHeadsWindow %g", name, tok, i, got[tok*qd+i], want[i])
					}
					// The formula, in float64, for one query head.
					hq := (tok*7 + 3) % (c.kvh * c.g)
					kvHead := hq / c.g
					row := func(kv KVRows, p int) []float64 {
						out := make([]float64, c.d)
						i := kv.index(table, p, kvHead*c.d)
						for j := range out {
							if f16 {
								out[j] = float64(F16ToF32(kv.F16[i+j]))
							} else {
								out[j] = float64(kv.F32[i+j])
							}
						}
						return out
					}
					qh := q[tok*qd+hq*c.d : tok*qd+(hq+1)*c.d]
					w := make([]float64, n)
					mx := math.Inf(-1)
					for p := range w {
						s := 0.0
						for j, kv := range row(k, p) {
							s += float64(qh[j]) * kv
						}
						w[p] = 0.125*s - float64(slopes[hq])*math.Abs(float64(tok-p))
						mx = math.Max(mx, w[p])
					}
					sum := 0.0
					for p := range w {
						w[p] = math.Exp(w[p] - mx)
						sum += w[p]
					}
					for j := 0; j < c.d; j++ {
						o := 0.0
						for p := range w {
							o += w[p] / sum * row(v, p)[j]
						}
						if g := float64(got[tok*qd+hq*c.d+j]); math.Abs(g-o) > 1e-4*(1+math.Abs(o)) {
							t.Fatalf("%s: token %d head %d value %d: %g, formula %g", name, tok, hq, j, g, o)
						}
					}
				}
			}
		}
		attnAVX2 = saved
	}
}
