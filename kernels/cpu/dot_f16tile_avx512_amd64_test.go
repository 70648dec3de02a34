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

// TestTileF16ZBitwiseEqualsDot: every (row, token) the AVX-512 4×6 tile
// computes is bitwise the one-token kernel's and the AVX2 2×6 tile's
// result, for row counts that leave rows over, several k-blocks, an
// 8-element tail, odd sub-ranges of rows and tokens, and special values;
// tokens past the last whole group of six, and everything outside the
// range, are left untouched.
func TestTileF16ZBitwiseEqualsDot(t *testing.T) {
	if !hasAVX512F16 {
		t.Skip("no AVX-512 F16 tile on this CPU")
	}
	defer func(on, rz bool, s f16Shape) { f16zOn, f16RowsZOn, f16TileShape = on, rz, s }(f16zOn, f16RowsZOn, f16TileShape)
	f16TileShape, f16RowsZOn = f16Shape26, false // the tiles alone (the rows kernels: dot_f16rows_amd64_test.go)
	cases := []f16Case{
		{"one step", 4, 16, 6, 0, 4, 0},
		{"tail only", 4, 8, 6, 0, 4, 0},
		{"tail after steps", 7, 24, 7, 0, 7, 0},
		{"one k-block", 5, 1024, 8, 0, 5, 0},
		{"two k-blocks", 5, 2 * 1024, 8, 0, 5, 0},
		{"k-blocks and tail", 16, 1024 + 40, 13, 0, 16, 0},
		{"three k-blocks, odd steps and tail", 9, 2*1024 + 56, 12, 0, 9, 0},
		{"partial block", 16, 256 + 48, 12, 0, 16, 0},
		{"many row groups", 40, 2048, 12, 0, 40, 0},
		{"more groups than one call", 37, 264, 18, 1, 37, 0},
		{"sub-tile", 30, 256, 19, 5, 26, 3},
		{"odd long block", 11, 3*512 + 8, 17, 1, 10, 2},
		{"three rows", 3, 64, 12, 0, 3, 0},
		{"too few tokens", 8, 64, 5, 0, 8, 0},
		{"cols not multiple of 8", 8, 20, 12, 0, 8, 0},
	}
	rng := rand.New(rand.NewPCG(71, 72))
	k := kernels[ggml.TypeF16]
	pool := NewPool(1)
	defer pool.Close()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := randomMatrix(t, rng, ggml.TypeF16, c.rows, c.cols)
			x := randNormal(rng, c.n*c.cols, 1)
			for i := 0; i < len(x); i += 13 {
				x[i] *= 300 // wider exponent range
			}
			if len(x) > 40 {
				x[7], x[len(x)-3] = 1e-40, float32(math.Inf(1)) // subnormal, inf (NaN results compare by bits)
			}
			const canary = -12345
			run := func(z bool) ([]float32, int) {
				f16zOn = z
				dst := make([]float32, c.n*c.rows)
				for i := range dst {
					dst[i] = canary
				}
				op := opPlan{w: w, k: k, dst: dst, rb: w.rowBytes()}
				pool.scratch.x = x
				return dst, pool.tileF16(&op, c.r0, c.r1, c.t0, c.n)
			}
			dst, got := run(true)
			ref, refGot := run(false)
			if got != refGot {
				t.Fatalf("AVX-512 tile returned %d, AVX2 tile %d", got, refGot)
			}
			var v actView
			for i := 0; i < c.n; i++ {
				v.x = x[i*c.cols : (i+1)*c.cols]
				for r := 0; r < c.rows; r++ {
					g := dst[i*c.rows+r]
					if math.Float32bits(g) != math.Float32bits(ref[i*c.rows+r]) {
						t.Fatalf("row %d token %d: AVX-512 %g, AVX2 tile %g", r, i, g, ref[i*c.rows+r])
					}
					if r < c.r0 || r >= c.r1 || i < c.t0 || i >= got {
						if g != canary {
							t.Fatalf("row %d token %d outside the tile was written", r, i)
						}
						continue
					}
					want := k.dot(w.Row(r), v)
					if math.Float32bits(g) != math.Float32bits(want) {
						t.Fatalf("row %d token %d: tile %g, one-token %g", r, i, g, want)
					}
				}
			}
		})
	}
}

// TestMatMulF16ZOnOff: MatMul of F16 weights gives bitwise the same result
// with the AVX-512 tile, the AVX2 tile and no tile, across thread counts.
func TestMatMulF16ZOnOff(t *testing.T) {
	if !hasAVX512F16 {
		t.Skip("no AVX-512 F16 tile on this CPU")
	}
	defer func(on, z bool, s f16Shape) { f16TileOn, f16zOn, f16TileShape = on, z, s }(f16TileOn, f16zOn, f16TileShape)
	f16TileShape = f16Shape26
	rng := rand.New(rand.NewPCG(73, 74))
	cases := []struct {
		name          string
		rows, cols, n int
	}{
		{"prefill", 70, 256, 21},
		{"short prompt", 33, 520, 6},
		{"decode", 40, 128, 1},
		{"long", 50, 64, 530},
		{"wide", 22, 5632, 13},
	}
	for _, threads := range []int{1, 2} {
		pool := NewPool(threads)
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/t%d", c.name, threads), func(t *testing.T) {
				w := randomMatrix(t, rng, ggml.TypeF16, c.rows, c.cols)
				x := randNormal(rng, c.n*c.cols, 1)
				out := func(on, z bool) []float32 {
					f16TileOn, f16zOn = on, z
					o := make([]float32, c.n*c.rows)
					pool.MatMul(o, w, x, c.n)
					return o
				}
				off, avx2, z := out(false, false), out(true, false), out(true, true)
				for i := range off {
					if math.Float32bits(z[i]) != math.Float32bits(off[i]) || math.Float32bits(avx2[i]) != math.Float32bits(off[i]) {
						t.Fatalf("token %d row %d: AVX-512 %g, AVX2 tile %g, untiled %g", i/c.rows, i%c.rows, z[i], avx2[i], off[i])
					}
				}
			})
		}
		pool.Close()
	}
}

// BenchmarkF16ZTile: kernel GFLOP/s of the AVX-512 4×6 tile next to the
// AVX2 2×6 tile, best batch, one thread, weights and activations in L1
// (512 columns, one row group: 4 rows for 4×6, 2 rows for 2×6).
// Run: go test ./kernels/cpu -run '^$' -bench F16ZTile -count 3
func BenchmarkF16ZTile(b *testing.B) {
	if !hasAVX512F16 {
		b.Skip("no AVX-512 F16 tile")
	}
	const cols = 512
	rng := rand.New(rand.NewPCG(75, 76))
	w := randomMatrix(b, rng, ggml.TypeF16, 4, cols)
	x := randNormal(rng, 6*cols, 1)
	rb := w.rowBytes()
	var sink float32
	b.Run("avx2-2x6", func(b *testing.B) {
		var acc [f16AccBytes]byte
		var out [12]float32
		best := bestOf(b, func() {
			f16Tile2x6AVX2(&w.Data[0], rb, 1, &x[0], cols, 4*cols, &acc[0])
			f16FinStoreAVX2(&acc[0], 1, 2, 6, 6, &out[0], 4*2)
			sink += out[0]
		})
		b.ReportMetric(float64(2*12*cols)/best, "GFLOP/s")
	})
	b.Run("avx512-4x6", func(b *testing.B) {
		var acc [f16zAccBytes]byte
		var out [24]float32
		best := bestOf(b, func() {
			f16Tile4x6AVX512(&w.Data[0], rb, 1, &x[0], cols, 4*cols, &acc[0], &out[0], 4*4)
			sink += out[0]
		})
		b.ReportMetric(float64(2*24*cols)/best, "GFLOP/s")
	})
	_ = sink
}

// BenchmarkF16ZTileUnit times single prefill work items (16 rows × n
// tokens, rows streaming from memory as in MatMul) with the AVX2 2×6 tile
// and the AVX-512 4×6 tile, alternating item by item on one thread, and
// reports each one's best GFLOP/s and the median paired speedup.
// Run: go test ./kernels/cpu -run '^$' -bench F16ZTileUnit -benchtime 200x
func BenchmarkF16ZTileUnit(b *testing.B) {
	if !hasAVX512F16 {
		b.Skip("no AVX-512 F16 tile")
	}
	defer func(on, z bool, s f16Shape) { f16TileOn, f16zOn, f16TileShape = on, z, s }(f16TileOn, f16zOn, f16TileShape)
	f16TileOn, f16TileShape = true, f16Shape26
	const rowC = 16
	for _, dims := range []struct{ rows, cols, n int }{{2048, 2048, 512}, {2048, 5632, 512}, {2048, 2048, 32}} {
		n := dims.n
		b.Run(fmt.Sprintf("%dx%d/n%d", dims.rows, dims.cols, n), func(b *testing.B) {
			pool := NewPool(1)
			defer pool.Close()
			w := benchMatrix(b, ggml.TypeF16, dims.rows, dims.cols)
			x := randNormal(rand.New(rand.NewPCG(77, 78)), n*dims.cols, 1)
			op := opPlan{w: w, k: kernels[ggml.TypeF16], dst: make([]float32, n*dims.rows), rb: w.rowBytes()}
			pool.scratch.x = x
			best := []float64{math.Inf(1), math.Inf(1)}
			var ratios []float64
			var ts [2]float64
			r0 := 0
			for it := range b.N {
				for j := range 2 {
					v := (j + it) % 2
					f16zOn = v == 1
					t0 := time.Now()
					pool.tile(0, &op, r0, r0+rowC, 0, n)
					ts[v] = float64(time.Since(t0).Nanoseconds())
					best[v] = min(best[v], ts[v])
				}
				r0 = (r0 + rowC) % dims.rows
				ratios = append(ratios, ts[0]/ts[1])
			}
			slices.Sort(ratios)
			flop := 2 * float64(rowC*n*dims.cols)
			b.ReportMetric(flop/best[0], "avx2-GFLOP/s")
			b.ReportMetric(flop/best[1], "avx512-GFLOP/s")
			b.ReportMetric(ratios[len(ratios)/2], "speedup")
		})
	}
}
