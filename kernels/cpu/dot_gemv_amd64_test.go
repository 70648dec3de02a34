package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"oengine/ggml"
)

// TestGemv8: the 8-row decode kernels give, for every row, exactly the bits of
// the one-row kernel blkDot1 (whose Go twin blkDotRef TestBlkKernels
// checks), for odd and even row counts, tails of fewer than 8 blocks and
// any prefetch distance.
func TestGemv8(t *testing.T) {
	if !blkActive {
		t.Skip("no blocked kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(61, 62))
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0} {
		bk := kernels[typ].blk
		for _, sh := range []struct{ rows, cols, pf int }{
			{8, 256, 0}, {7, 96, 512}, {16, 2048, 1024}, {1, 32, 64}, {17, 544, 4096}, {24, 288, 100}, {40, 64, 9999}, {8, 32, 0},
		} {
			t.Run(fmt.Sprintf("%s/%dx%d/pf%d", typ, sh.rows, sh.cols, sh.pf), func(t *testing.T) {
				w := randomMatrix(t, rng, typ, sh.rows, sh.cols)
				x := randNormal(rng, sh.cols, 1)
				for i := 0; i < sh.cols; i += 5 { // saturated activations
					x[i] = -30
				}
				var a actBuf
				a.prepare(actQ8_0, 1, sh.cols)
				a.quantizeToken(actQ8_0, 0, sh.cols, x)
				var v actView
				a.view(actQ8_0, 0, sh.cols, x, &v)
				out := make([]float32, sh.rows+1)
				out[sh.rows] = 12345 // must stay untouched
				blkDotRowsPF(bk, w.Data, w.rowBytes(), v.qs, v.d, v.s8, out[:sh.rows], sh.pf)
				for r := 0; r < sh.rows; r++ {
					want := blkDot1(bk, w.Row(r), v.qs, v.d, v.s8)
					if math.Float32bits(out[r]) != math.Float32bits(want) {
						t.Fatalf("row %d: 8-row kernel %g, one-row %g", r, out[r], want)
					}
				}
				if out[sh.rows] != 12345 {
					t.Fatalf("wrote past the last row")
				}
			})
		}
	}
}

// TestGemv8Extremes: the largest block sums the 8-row kernels can meet
// (every Q4_0 nibble 15 or 0, every Q8_0 weight ±127, activations all ±127)
// still give the one-row kernel's bits (the Q4_0 kernel sums int16 pair
// products across the block before widening).
func TestGemv8Extremes(t *testing.T) {
	if !blkActive {
		t.Skip("no blocked kernels on this CPU")
	}
	const rows, cols = 16, 256
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0} {
		for _, sign := range []float32{1, -1} {
			bk := kernels[typ].blk
			bb := 34
			if bk.q4 {
				bb = 18
			}
			nb := cols / qk
			data := make([]byte, rows*nb*bb)
			for r := 0; r < rows; r++ {
				for b := 0; b < nb; b++ {
					blk := data[(r*nb+b)*bb:]
					blk[0], blk[1] = 0x00, 0x3c // f16 1.0
					for j := 2; j < bb; j++ {
						switch {
						case bk.q4 && r%2 == 0:
							blk[j] = 0xff // nibbles 15: +7 after the -8 offset
						case bk.q4:
							blk[j] = 0x00 // nibbles 0: -8
						case r%2 == 0:
							blk[j] = 127
						default:
							blk[j] = 0x81 // -127
						}
					}
				}
			}
			x := make([]float32, cols)
			for i := range x {
				x[i] = sign
			}
			var a actBuf
			a.prepare(actQ8_0, 1, cols)
			a.quantizeToken(actQ8_0, 0, cols, x)
			var v actView
			a.view(actQ8_0, 0, cols, x, &v)
			out := make([]float32, rows)
			blkDotRows(bk, data, nb*bb, v.qs, v.d, v.s8, out)
			for r := range out {
				want := blkDot1(bk, data[r*nb*bb:(r+1)*nb*bb], v.qs, v.d, v.s8)
				if math.Float32bits(out[r]) != math.Float32bits(want) || want == 0 {
					t.Fatalf("%s sign %g row %d: 8-row kernel %g, one-row %g", typ, sign, r, out[r], want)
				}
			}
		}
	}
}

// TestRowsKernels: the many-row decode kernels (K-quants, F16) give, per
// row, exactly the bits of the type's one-row SIMD kernel (whose Go twin
// TestDotKernelsMatchPortable checks), for several row counts, column counts
// (F16 tails of cols%8 elements) and prefetch distances.
func TestRowsKernels(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(63, 64))
	for typ, rk := range rowsKernels {
		k := kernels[typ]
		colsList := []int{256, 512, 2048}
		if typ == ggml.TypeF16 {
			colsList = []int{8, 100, 256, 2056, 40}
		}
		for _, cols := range colsList {
			for _, sh := range []struct{ rows, pf int }{{1, 0}, {5, 2048}, {16, 64}} {
				t.Run(fmt.Sprintf("%s/%dx%d/pf%d", typ, sh.rows, cols, sh.pf), func(t *testing.T) {
					w := randomMatrix(t, rng, typ, sh.rows, cols)
					x := randNormal(rng, cols, 1)
					x[0] = 50
					var a actBuf
					a.prepare(k.act, 1, cols)
					a.quantizeToken(k.act, 0, cols, x)
					var v actView
					a.view(k.act, 0, cols, x, &v)
					out := make([]float32, sh.rows+1)
					out[sh.rows] = 12345
					rk(w.Data, w.rowBytes(), v, out[:sh.rows], sh.pf)
					for r := 0; r < sh.rows; r++ {
						want := k.dot(w.Row(r), v)
						if math.Float32bits(out[r]) != math.Float32bits(want) {
							t.Fatalf("row %d: rows kernel %g, one-row %g", r, out[r], want)
						}
					}
					if out[sh.rows] != 12345 {
						t.Fatalf("wrote past the last row")
					}
				})
			}
		}
	}
}

// decodeBench is a weight matrix much larger than the last-level cache
// (about 160 MB) and one token's activations, for the DRAM benchmarks.
type decodeBench struct {
	w   Matrix
	rb  int
	a   actBuf
	v   actView
	out []float32
}

func newDecodeBench(b *testing.B, typ ggml.Type, cols int) *decodeBench {
	rb, _ := typ.RowBytes(cols)
	rows := (160 << 20) / rb &^ 63 // a multiple of 16 (tiles)
	db := &decodeBench{w: benchMatrix(b, typ, rows, cols), rb: rb}
	x := randNormal(rand.New(rand.NewPCG(57, 58)), cols, 1)
	act := kernels[typ].act
	db.a.prepare(act, 1, cols)
	db.a.quantizeToken(act, 0, cols, x)
	db.a.view(act, 0, cols, x, &db.v)
	db.out = make([]float32, rows)
	return db
}

// variant is one kernel of a side-by-side benchmark: fn does one pass.
type variant struct {
	name string
	fn   func()
}

// roundRobin runs the variants in turn (A, B, C, A, B, C, ...), each b.N
// times, a pass being reps calls of fn over bytes of weights, and reports
// each variant's fastest pass in GB/s: the variants share the machine's
// disturbances, and the fastest pass is the one that ran undisturbed.
func roundRobin(b *testing.B, bytes, reps int, vs []variant) {
	best := make([]float64, len(vs))
	for i := range best {
		best[i] = math.Inf(1)
	}
	for range b.N {
		for i, v := range vs {
			t0 := time.Now()
			for range reps {
				v.fn()
			}
			best[i] = min(best[i], float64(time.Since(t0).Nanoseconds())/float64(reps))
		}
	}
	for i, v := range vs {
		b.ReportMetric(float64(bytes)/best[i], v.name+"-GB/s")
	}
}

// split returns k benches over consecutive row ranges of db's matrix
// (multiples of 16 rows), sharing its activations.
func (db *decodeBench) split(k int) []*decodeBench {
	var out []*decodeBench
	rows := db.w.Rows
	for h := 0; h < k; h++ {
		lo, hi := (h*rows/k)&^15, ((h+1)*rows/k)&^15
		c := *db
		c.w.Rows, c.w.Data = hi-lo, db.w.Data[lo*db.rb:hi*db.rb]
		c.out = db.out[lo:hi]
		out = append(out, &c)
	}
	return out
}

// oldPath is the decode loop before the many-row kernels: the one-row
// kernel called for every row.
func (db *decodeBench) oldPath() func() {
	w, rb, v, out := db.w, db.rb, db.v, db.out
	if bk := kernels[w.Type].blk; bk != nil {
		return func() {
			for r := range out {
				out[r] = blkDot1(bk, w.Data[r*rb:(r+1)*rb], v.qs, v.d, v.s8)
			}
		}
	}
	dot := simdKernels[w.Type]
	return func() {
		for r := range out {
			out[r] = dot(w.Data[r*rb:(r+1)*rb], v)
		}
	}
}

// newPath is the decode path of MatMul, in tiles of 16 rows as the pool
// splits it, with prefetch distance pf (< 0: the default).
func (db *decodeBench) newPath(pf int) func() {
	w, rb, v, out := db.w, db.rb, db.v, db.out
	if bk := kernels[w.Type].blk; bk != nil {
		if pf < 0 {
			pf = gemvAhead * 8 * rb
		}
		return func() {
			for r := 0; r < len(out); r += 16 {
				blkDotRowsPF(bk, w.Data[r*rb:(r+16)*rb], rb, v.qs, v.d, v.s8, out[r:r+16], pf)
			}
		}
	}
	rk := rowsKernels[w.Type]
	if pf < 0 {
		pf = decodePF
	}
	return func() {
		for r := 0; r < len(out); r += 16 {
			rk(w.Data[r*rb:(r+16)*rb], rb, v, out[r:r+16], pf)
		}
	}
}

// BenchmarkDecodePF: the decode kernels from DRAM for several prefetch
// distances (bytes ahead; for Q4_0 / Q8_0 in rows ahead of the 8-row
// group), single thread, side by side, GB/s; 2048 columns (attention,
// gate/up) and 5632 (ffn_down of tinyllama).
func BenchmarkDecodePF(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2")
	}
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeQ6_K, ggml.TypeF16} {
		for _, cols := range []int{2048, 5632} {
			db := newDecodeBench(b, typ, cols)
			var sink uint64
			vs := []variant{{"read", func() { sink += readAVX2(&db.w.Data[0], len(db.w.Data)&^127, 2048) }}}
			if kernels[typ].blk != nil {
				for _, rows := range []int{0, 4, 8, 16} {
					vs = append(vs, variant{fmt.Sprintf("ahead%drows", rows), db.newPath(rows * db.rb)})
				}
			} else {
				for _, pf := range []int{0, 1024, 2048, 4096} {
					vs = append(vs, variant{fmt.Sprintf("pf%d", pf), db.newPath(pf)})
				}
			}
			b.Run(fmt.Sprintf("%s/%d", typ, cols), func(b *testing.B) { roundRobin(b, len(db.w.Data), 1, vs) })
			_ = sink
			delete(benchMatrices, fmt.Sprint(typ, db.w.Rows, db.w.Cols))
		}
	}
}

// TestGemv8Q8_0Tokens: a Q8_0 decode step of two or three tokens, each
// group of 8 rows read once for all of them (blkDotRowsFew), gives every
// (row, token) bitwise what decoding the token alone gives, for row counts
// with and without a partial group, one and several blocks, across thread
// counts; other token counts and Q4_0 are left to the per-token kernels.
func TestGemv8Q8_0Tokens(t *testing.T) {
	if !blkActive {
		t.Skip("no blocked kernels on this CPU")
	}
	defer func(on bool) { q8FewOn = on }(q8FewOn)
	rng := rand.New(rand.NewPCG(81, 82))
	for _, threads := range []int{1, 2} {
		pool := NewPool(threads)
		for _, sh := range []struct{ rows, cols int }{{8, 32}, {37, 96}, {64, 2048}, {5, 64}} {
			w := randomMatrix(t, rng, ggml.TypeQ8_0, sh.rows, sh.cols)
			for _, n := range []int{2, 3} {
				t.Run(fmt.Sprintf("t%d/%dx%d/n%d", threads, sh.rows, sh.cols, n), func(t *testing.T) {
					x := randNormal(rng, n*sh.cols, 1)
					q8FewOn = true
					got := make([]float32, n*sh.rows)
					pool.MatMul(got, w, x, n)
					one := make([]float32, sh.rows)
					for i := range n {
						pool.MatMul(one, w, x[i*sh.cols:(i+1)*sh.cols], 1)
						for r, want := range one {
							if g := got[i*sh.rows+r]; math.Float32bits(g) != math.Float32bits(want) {
								t.Fatalf("token %d row %d: %g with the others, %g alone", i, r, g, want)
							}
						}
					}
				})
			}
		}
		pool.Close()
	}
	bk := blkKernels[ggml.TypeQ8_0]
	q8FewOn = true
	qs, d, out := make([]int8, 4*32), make([]float32, 4), make([]float32, 4*8)
	rows := make([]byte, 8*34)
	for _, n := range []int{1, 4} {
		if blkDotRowsFew(bk, rows, 34, qs[:n*32], d[:n], n, out, 8) {
			t.Errorf("blkDotRowsFew took %d tokens", n)
		}
	}
	if blkDotRowsFew(blkKernels[ggml.TypeQ4_0], make([]byte, 8*18), 18, qs[:64], d[:2], 2, out, 8) {
		t.Error("blkDotRowsFew took Q4_0 rows")
	}
}
