package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestF16RowsBitwiseEqualsDot: every (row, token) the rows kernels compute
// is bitwise the one-token kernel's result (batch invariance), for the
// AVX2 kernels (two and three tokens) and the AVX-512 ones (two to eight,
// two row streams and an odd last row), lengths that end after 32-, 16-
// and 8-element steps or in elements past the last multiple of 8, one row
// and many, and sub-ranges of rows and tokens; everything outside the
// range is left untouched, and other token counts are refused.
func TestF16RowsBitwiseEqualsDot(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no F16 rows kernel on this CPU")
	}
	defer func(on bool) { f16RowsZOn = on }(f16RowsZOn)
	cases := []f16Case{
		{"tail only", 3, 8, 2, 0, 3, 0},
		{"one 16-step", 3, 16, 3, 0, 3, 0},
		{"16-step and tail", 4, 24, 2, 0, 4, 0},
		{"32-steps", 5, 64, 3, 0, 5, 0},
		{"32, 16 and 8", 7, 32 + 16 + 8, 3, 0, 7, 0},
		{"one row", 1, 2048, 2, 0, 1, 0},
		{"two rows", 2, 2048, 5, 0, 2, 0},
		{"model width", 16, 2048, 3, 0, 16, 0},
		{"cols not multiple of 8", 9, 2051, 3, 0, 9, 0},
		{"short and odd", 5, 13, 2, 0, 5, 0},
		{"sub-range", 30, 520, 9, 5, 26, 6},
		{"sub-range, odd rows", 30, 520, 9, 4, 27, 5},
		{"one token", 8, 64, 1, 0, 8, 0},
		{"four tokens", 8, 64, 4, 0, 8, 0},
		{"four tokens, odd", 11, 24 + 2048, 4, 0, 11, 0},
		{"five tokens", 13, 56, 5, 0, 13, 0},
		{"five tokens, cols not multiple of 8", 6, 1027, 5, 0, 6, 0},
		{"six tokens", 8, 64, 6, 0, 8, 0},
		{"seven tokens, odd rows", 9, 2048 + 24, 7, 0, 9, 0},
		{"eight tokens", 6, 520, 8, 0, 6, 0},
		{"eight of ten tokens", 7, 72, 10, 1, 6, 2},
		{"nine tokens", 8, 64, 9, 0, 8, 0},
		{"no rows", 8, 64, 3, 4, 4, 0},
	}
	rng := rand.New(rand.NewPCG(71, 72))
	pool := NewPool(1)
	defer pool.Close()
	for _, z := range []bool{false, true} {
		if z && !hasAVX512F16 {
			t.Log("no AVX-512 rows kernels on this CPU")
			continue
		}
		f16RowsZOn = z
		most := f16RowsMax
		if z {
			most = f16RowsZMax
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("z=%v/%s", z, c.name), func(t *testing.T) {
				w, x := f16TileInput(t, rng, c.rows, c.cols, c.n)
				op, dst := canaryOp(w, c.n)
				pool.scratch.x = x
				done := pool.rowsF16(&op, c.r0, c.r1, c.t0, c.n)
				if want := c.n-c.t0 >= 2 && c.n-c.t0 <= most && c.r1 > c.r0; done != want {
					t.Fatalf("rowsF16 reported %v, want %v", done, want)
				}
				if !done {
					checkAgainstDot(t, w, x, dst, 0, 0, 0, 0) // untouched
					return
				}
				checkAgainstDot(t, w, x, dst, c.r0, c.r1, c.t0, c.n)
			})
		}
	}
}

// TestMatMulF16FewOnOff: MatMul of F16 weights gives bitwise the same
// result with the kernels for a few tokens (rows kernels, 2×5 tile) and
// without them (2×2 tile, 3×4 tile, one-token kernel), for 1-5 tokens
// alone and left after 2×6 tiles, across thread counts.
func TestMatMulF16FewOnOff(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no F16 rows kernel on this CPU")
	}
	defer func(on, z bool) { f16FewOn, f16RowsZOn = on, z }(f16FewOn, f16RowsZOn)
	rng := rand.New(rand.NewPCG(73, 74))
	for _, threads := range []int{1, 2} {
		pool := NewPool(threads)
		for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 23} {
			t.Run(fmt.Sprintf("n%d/t%d", n, threads), func(t *testing.T) {
				const rows, cols = 37, 264
				w := randomMatrix(t, rng, ggml.TypeF16, rows, cols)
				x := randNormal(rng, n*cols, 1)
				checkSwitchSameBits(t, pool, w, x, n, func(on bool) { f16FewOn = on }, "f16FewOn")
				if hasAVX512F16 {
					checkSwitchSameBits(t, pool, w, x, n, func(on bool) { f16RowsZOn = on }, "f16RowsZOn")
				}
			})
		}
		pool.Close()
	}
}
