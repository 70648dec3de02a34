package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"oengine/ggml"
)

// f16Shapes are the tile shapes under test, by name.
var f16Shapes = []struct {
	name string
	sh   f16Shape
}{{"3x4", f16Shape34}, {"2x6", f16Shape26}, {"2x5", f16Shape25}}

// f16TileInput returns a rows×cols F16 matrix and n tokens of activations
// with a wide exponent range.
func f16TileInput(t *testing.T, rng *rand.Rand, rows, cols, n int) (Matrix, []float32) {
	w := randomMatrix(t, rng, ggml.TypeF16, rows, cols)
	x := randNormal(rng, n*cols, 1)
	for i := 0; i < len(x); i += 13 {
		x[i] *= 300
	}
	return w, x
}

// f16Case is a test product of the F16 kernels: rows × cols weights, n
// tokens, the kernel asked for rows [r0, r1) × tokens [t0, n).
type f16Case struct {
	name          string
	rows, cols, n int
	r0, r1, t0    int
}

// tileCanary marks the results a kernel must not write.
const tileCanary = -12345

// canaryOp returns the F16 product of w for n tokens, its destination
// filled with tileCanary.
func canaryOp(w Matrix, n int) (opPlan, []float32) {
	dst := make([]float32, n*w.Rows)
	for i := range dst {
		dst[i] = tileCanary
	}
	return opPlan{w: w, k: kernels[ggml.TypeF16], dst: dst, rb: w.rowBytes()}, dst
}

// checkAgainstDot fails t unless every (row, token) of dst ([n][w.Rows])
// in rows [r0, r1) × tokens [t0, t1) is bitwise the one-token kernel's
// result for x ([n][w.Cols]) and every other one is still tileCanary.
func checkAgainstDot(t *testing.T, w Matrix, x, dst []float32, r0, r1, t0, t1 int) {
	t.Helper()
	k := kernels[ggml.TypeF16]
	var v actView
	for i := 0; i < len(dst)/w.Rows; i++ {
		v.x = x[i*w.Cols : (i+1)*w.Cols]
		for r := 0; r < w.Rows; r++ {
			g := dst[i*w.Rows+r]
			if r < r0 || r >= r1 || i < t0 || i >= t1 {
				if g != tileCanary {
					t.Fatalf("row %d token %d outside the computed range was written", r, i)
				}
				continue
			}
			if want := k.dot(w.Row(r), v); math.Float32bits(g) != math.Float32bits(want) {
				t.Fatalf("row %d token %d: %g, one-token kernel %g", r, i, g, want)
			}
		}
	}
}

// TestTileF16BitwiseEqualsDot: every (row, token) an F16 tile computes is
// bitwise the one-token kernel's result (batch invariance), for each tile
// shape, row counts that leave rows over, several k-blocks, an 8-element
// tail and sub-ranges of rows and tokens; tokens past the last whole token
// group, and everything outside the range, are left untouched.
func TestTileF16BitwiseEqualsDot(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no F16 tile on this CPU")
	}
	defer func(s f16Shape) { f16TileShape = s }(f16TileShape)
	cases := []f16Case{
		{"one step", 6, 16, 6, 0, 6, 0},
		{"tail only", 6, 8, 6, 0, 6, 0},
		{"tail after steps", 7, 24, 7, 0, 7, 0},
		{"two k-blocks", 5, 2 * 512, 8, 0, 5, 0},
		{"k-blocks and tail", 16, 512 + 40, 13, 0, 16, 0},
		{"many row groups", 40, 2048, 12, 0, 40, 0},
		{"sub-tile", 30, 256, 19, 5, 26, 3},
		{"odd long block", 9, 3*512 + 8, 17, 1, 8, 2},
		{"too few rows", 1, 64, 8, 0, 1, 0},
		{"too few tokens", 8, 64, 3, 0, 8, 0},
		{"cols not multiple of 8", 8, 20, 12, 0, 8, 0},
	}
	rng := rand.New(rand.NewPCG(61, 62))
	pool := NewPool(1)
	defer pool.Close()
	for _, s := range f16Shapes {
		f16TileShape = s.sh
		for _, c := range cases {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				w, x := f16TileInput(t, rng, c.rows, c.cols, c.n)
				op, dst := canaryOp(w, c.n)
				pool.scratch.x = x
				got := pool.tileF16Shape(&op, s.sh, c.r0, c.r1, c.t0, c.n)
				want := c.t0 + (c.n-c.t0)/s.sh.toks*s.sh.toks
				if c.r1-c.r0 < s.sh.rows || c.n-c.t0 < s.sh.toks || c.cols%8 != 0 {
					want = c.t0
				}
				if got != want {
					t.Fatalf("tileF16 returned %d, want %d", got, want)
				}
				checkAgainstDot(t, w, x, dst, c.r0, c.r1, c.t0, got)
			})
		}
	}
}

// TestTileF16GroupOfFour: after its whole 2×6 groups, tileF16 computes
// the four or five tokens left (the tokens of a few decoders, or of one
// verifying drafts) with one tile: the 3×4 for four, the 2×5 for five
// (without f16FewOn, as before it: the 3×4 for four of five); every
// result is bitwise the one-token kernel's, and the rest is untouched.
// With the AVX-512 rows kernels on, it leaves two to five tokens to them
// (TestF16RowsBitwiseEqualsDot).
func TestTileF16GroupOfFour(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no F16 tile on this CPU")
	}
	defer func(s f16Shape, on, z bool) { f16TileShape, f16FewOn, f16RowsZOn = s, on, z }(f16TileShape, f16FewOn, f16RowsZOn)
	f16TileShape = f16Shape26
	rng := rand.New(rand.NewPCG(65, 66))
	pool := NewPool(1)
	defer pool.Close()
	const rows, cols = 16, 520
	for _, c := range []struct {
		few     bool
		n, want int
	}{
		{false, 3, 0}, {false, 4, 4}, {false, 5, 4}, {false, 6, 6}, {false, 9, 6}, {false, 10, 10}, {false, 11, 10}, {false, 12, 12},
		{true, 3, 0}, {true, 4, 4}, {true, 5, 5}, {true, 6, 6}, {true, 9, 6}, {true, 10, 10}, {true, 11, 11}, {true, 12, 12}, {true, 17, 17},
	} {
		t.Run(fmt.Sprintf("few=%v/n%d", c.few, c.n), func(t *testing.T) {
			f16FewOn, f16RowsZOn = c.few, false
			w, x := f16TileInput(t, rng, rows, cols, c.n)
			op, dst := canaryOp(w, c.n)
			pool.scratch.x = x
			if got := pool.tileF16(&op, 0, rows, 0, c.n); got != c.want {
				t.Fatalf("tileF16 returned %d, want %d", got, c.want)
			}
			checkAgainstDot(t, w, x, dst, 0, rows, 0, c.want)
		})
	}
}

// TestMatMulF16TileOnOff: MatMul of F16 weights gives bitwise the same
// result with each tile shape and without the tile (2×2 tile, four-token
// and one-token kernels), across thread counts and token-tile boundaries.
func TestMatMulF16TileOnOff(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no F16 tile on this CPU")
	}
	defer func(on bool, s f16Shape) { f16TileOn, f16TileShape = on, s }(f16TileOn, f16TileShape)
	rng := rand.New(rand.NewPCG(63, 64))
	cases := []struct {
		name          string
		rows, cols, n int
	}{
		{"prefill", 70, 256, 21},
		{"short prompt", 33, 520, 6},
		{"decode", 40, 128, 1},
		{"four decoders", 33, 520, 4},
		{"one token and four drafts", 40, 256, 5},
		{"a 2x6 group and a 3x4 group", 40, 264, 10},
		{"and one more", 19, 264, 11},
		{"long", 50, 64, 530},
	}
	for _, threads := range []int{1, 2} {
		pool := NewPool(threads)
		for _, c := range cases {
			w := randomMatrix(t, rng, ggml.TypeF16, c.rows, c.cols)
			x := randNormal(rng, c.n*c.cols, 1)
			off := make([]float32, c.n*c.rows)
			f16TileOn = false
			pool.MatMul(off, w, x, c.n)
			f16TileOn = true
			for _, s := range f16Shapes {
				t.Run(fmt.Sprintf("%s/%s/t%d", c.name, s.name, threads), func(t *testing.T) {
					f16TileShape = s.sh
					on := make([]float32, c.n*c.rows)
					pool.MatMul(on, w, x, c.n)
					for i := range on {
						if math.Float32bits(on[i]) != math.Float32bits(off[i]) {
							t.Fatalf("token %d row %d: tiled %g, untiled %g", i/c.rows, i%c.rows, on[i], off[i])
						}
					}
				})
			}
		}
		pool.Close()
	}
}

// BenchmarkF16Tile: the tile kernels against the 2×2 tile and the
// four-token kernel, best-batch GOP/s (512 columns: weights and
// activations in L1; single thread).
func BenchmarkF16Tile(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no F16 tile")
	}
	const cols = 512
	rng := rand.New(rand.NewPCG(65, 66))
	k := kernels[ggml.TypeF16]
	w := randomMatrix(b, rng, ggml.TypeF16, 3, cols)
	x := randNormal(rng, 6*cols, 1)
	v := actView{x: x}
	rb := w.rowBytes()
	var sink float32
	for _, s := range f16Shapes {
		b.Run(s.name, func(b *testing.B) {
			var acc [f16AccBytes]byte
			var out [12]float32
			best := bestOf(b, func() {
				s.sh.tile(&w.Data[0], rb, 1, &x[0], cols, 4*cols, &acc[0])
				f16FinStoreAVX2(&acc[0], 1, s.sh.rows, s.sh.toks, s.sh.pt, &out[0], 4*s.sh.rows)
				sink += out[0]
			})
			b.ReportMetric(float64(2*12*cols)/best, "GOP/s-best")
		})
	}
	b.Run("2x2", func(b *testing.B) {
		best := bestOf(b, func() { o := k.dot22(w.Data, rb, v, cols); sink += o[0] })
		b.ReportMetric(float64(2*4*cols)/best, "GOP/s-best")
	})
	b.Run("1x4", func(b *testing.B) {
		best := bestOf(b, func() { o := k.dot4(w.Data, v, cols); sink += o[0] })
		b.ReportMetric(float64(2*4*cols)/best, "GOP/s-best")
	})
	_ = sink
}

// BenchmarkF16TileUnit times single MatMul work items (16 rows × n
// tokens; 512 is the prefill tile) without the tile kernels (old: 2×2 tile) and with
// each shape, in rotating order item by item on one thread over fresh row
// chunks, and reports the median of the paired time ratios old/new (on a
// shared machine a ratio of neighbouring runs is what stays stable) and
// each variant's best item in GFLOP/s.
// Run: go test ./kernels/cpu -run '^$' -bench F16TileUnit -benchtime 200x
func BenchmarkF16TileUnit(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no F16 tile")
	}
	defer func(on bool, s f16Shape) { f16TileOn, f16TileShape = on, s }(f16TileOn, f16TileShape)
	const rowC = 16
	for _, dims := range []struct{ rows, cols, n int }{{2048, 2048, 512}, {2048, 5632, 512}, {2048, 2048, 32}} {
		n := dims.n
		b.Run(fmt.Sprintf("%dx%d/n%d", dims.rows, dims.cols, n), func(b *testing.B) {
			pool := NewPool(1)
			defer pool.Close()
			w := benchMatrix(b, ggml.TypeF16, dims.rows, dims.cols)
			x := randNormal(rand.New(rand.NewPCG(69, 70)), n*dims.cols, 1)
			op := opPlan{w: w, k: kernels[ggml.TypeF16], dst: make([]float32, n*dims.rows), rb: w.rowBytes()}
			pool.scratch.x = x
			nv := 1 + len(f16Shapes) // variant 0: old
			best := make([]float64, nv)
			for i := range best {
				best[i] = math.Inf(1)
			}
			ratios := make([][]float64, nv)
			ts := make([]float64, nv)
			r0 := 0
			for it := range b.N {
				for j := range nv {
					v := (j + it) % nv
					f16TileOn = v > 0
					if v > 0 {
						f16TileShape = f16Shapes[v-1].sh
					}
					t0 := time.Now()
					pool.tile(0, &op, r0, r0+rowC, 0, n)
					ts[v] = float64(time.Since(t0).Nanoseconds())
					best[v] = min(best[v], ts[v])
				}
				r0 = (r0 + rowC) % dims.rows
				for v := 1; v < nv; v++ {
					ratios[v] = append(ratios[v], ts[0]/ts[v])
				}
			}
			flop := 2 * float64(rowC*n*dims.cols)
			b.ReportMetric(flop/best[0], "old-GFLOP/s")
			for v, s := range f16Shapes {
				r := ratios[v+1]
				slices.Sort(r)
				b.ReportMetric(flop/best[v+1], s.name+"-GFLOP/s")
				b.ReportMetric(r[len(r)/2], s.name+"-speedup")
			}
		})
	}
}
