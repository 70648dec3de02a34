package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestMatMulVsRef: MatMul on random weights (random quant bits) against
// MatMulRef (within the documented activation-quantization bound) and
// against the float64 dot with the quantized activations (2e-5 relative),
// for every type and shapes whose rows do not divide evenly over 3 threads.
func TestMatMulVsRef(t *testing.T) {
	shapes := []struct{ rows, cols, n int }{
		{1, 256, 1}, {37, 512, 3}, {19, 256, 17}, {5, 768, 9},
		{130, 256, 5}, // above smallMatMul: split over the workers
	}
	rng := rand.New(rand.NewPCG(9, 10))
	pool := NewPool(3)
	defer pool.Close()
	for _, typ := range allTypes {
		for _, sh := range shapes {
			name := fmt.Sprintf("%s/%dx%d/n%d", typ, sh.rows, sh.cols, sh.n)
			t.Run(name, func(t *testing.T) {
				w := randomMatrix(t, rng, typ, sh.rows, sh.cols)
				x := randNormal(rng, sh.n*sh.cols, 1)
				got := make([]float32, sh.n*sh.rows)
				ref := make([]float32, sh.n*sh.rows)
				pool.MatMul(got, w, x, sh.n)
				MatMulRef(ref, w, x, sh.n)
				for i := 0; i < sh.n; i++ {
					xi := x[i*sh.cols : (i+1)*sh.cols]
					xq, sCorr := quantActRef(kernels[typ].act, xi)
					for r := 0; r < sh.rows; r++ {
						g := float64(got[i*sh.rows+r])
						if b := actErrBound(t, typ, w.Row(r), xi); math.Abs(g-float64(ref[i*sh.rows+r])) > b {
							t.Fatalf("token %d row %d: %g vs ref %g (bound %g)", i, r, g, ref[i*sh.rows+r], b)
						}
						exp, mag := quantDotRef(t, typ, w.Row(r), xq, sCorr)
						if math.Abs(g-exp) > 2e-5*mag+1e-6 {
							t.Fatalf("token %d row %d: %g vs quantized-activation dot %g", i, r, g, exp)
						}
					}
				}
			})
		}
	}
}

// randomMatrix builds a matrix from randomRow rows (random quant bits).
func randomMatrix(t testing.TB, rng *rand.Rand, typ ggml.Type, rows, cols int) Matrix {
	t.Helper()
	var data []byte
	for r := 0; r < rows; r++ {
		data = append(data, randomRow(rng, typ, cols)...)
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMatMulBatchInvariance: the output of a token is bitwise the same
// whether it runs alone or inside a batch with other tokens, at any
// position, with any thread count.
func TestMatMulBatchInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const rows, cols, n = 150, 256, 19 // 150: 16-row tiles + 6, 64-row float tiles + 22
	p1, p3 := NewPool(1), NewPool(3)
	defer p1.Close()
	defer p3.Close()
	for _, typ := range allTypes {
		t.Run(typ.String(), func(t *testing.T) {
			w := randMatrix(t, rng, typ, rows, cols)
			x := randNormal(rng, n*cols, 1)
			batch := make([]float32, n*rows)
			p3.MatMul(batch, w, x, n)
			// Sub-batches of tokens 1..m on either side of each path's
			// threshold (decode kernels, packed panels from packMin,
			// token tiles above 8).
			subs := map[int][]float32{}
			for _, m := range []int{2, 3, 4, 5, 7, 8, 9, 16} {
				subs[m] = make([]float32, m*rows)
				p1.MatMul(subs[m], w, x[cols:(m+1)*cols], m)
			}
			one := make([]float32, rows)
			for i := 0; i < n; i++ {
				p1.MatMul(one, w, x[i*cols:(i+1)*cols], 1)
				for r := range one {
					if math.Float32bits(one[r]) != math.Float32bits(batch[i*rows+r]) {
						t.Fatalf("token %d row %d: alone %g, in batch of %d %g", i, r, one[r], n, batch[i*rows+r])
					}
					for m, sub := range subs {
						if i >= 1 && i <= m && math.Float32bits(one[r]) != math.Float32bits(sub[(i-1)*rows+r]) {
							t.Fatalf("token %d row %d: alone %g, in batch of %d %g", i, r, one[r], m, sub[(i-1)*rows+r])
						}
					}
				}
			}
		})
	}
}

// TestMatMulAllocs: no allocation per call once the scratch has grown, on
// the caller-only path (small) and the worker path (above smallMatMul).
func TestMatMulAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	pool := NewPool(2)
	defer pool.Close()
	for _, typ := range allTypes {
		for _, sh := range []struct{ rows, cols, n int }{{16, 256, 1}, {16, 256, 3}, {16, 256, 12}, {64, 512, 6}, {64, 512, 7}} {
			w := randomMatrix(t, rng, typ, sh.rows, sh.cols)
			x := randNormal(rng, sh.n*sh.cols, 1)
			dst := make([]float32, sh.n*sh.rows)
			pool.MatMul(dst, w, x, sh.n)
			if a := testing.AllocsPerRun(5, func() { pool.MatMul(dst, w, x, sh.n) }); a != 0 {
				t.Errorf("%s %+v: %v allocations per MatMul", typ, sh, a)
			}
			// The same matrix as load rewrites it (a decode layout, BF16 as
			// F16), where this CPU does.
			if pk, ok := PackDecodeLayout(w, append([]byte(nil), w.Data...)); ok {
				pool.MatMul(dst, pk, x, sh.n)
				if a := testing.AllocsPerRun(5, func() { pool.MatMul(dst, pk, x, sh.n) }); a != 0 {
					t.Errorf("%s %+v rewritten at load: %v allocations per MatMul", typ, sh, a)
				}
			}
		}
	}
}

func TestNewMatrix(t *testing.T) {
	cases := []struct {
		name       string
		typ        ggml.Type
		rows, cols int
		bytes      int
		ok         bool
	}{
		{"q4_0 ok", ggml.TypeQ4_0, 2, 64, 2 * 36, true},
		{"q4_k ok", ggml.TypeQ4_K, 3, 256, 3 * 144, true},
		{"f16 ok", ggml.TypeF16, 2, 3, 12, true},
		{"short data", ggml.TypeQ4_0, 2, 64, 71, false},
		{"long data", ggml.TypeQ4_0, 2, 64, 73, false},
		{"partial block", ggml.TypeQ4_K, 1, 128, 72, false},
		{"zero rows", ggml.TypeF32, 0, 4, 0, false},
		{"negative cols", ggml.TypeF32, 1, -4, 0, false},
		{"unsupported type", ggml.TypeIQ2_XXS, 1, 256, 66, false},
		{"q8_k is not a weight type", ggml.TypeQ8_K, 1, 256, 292, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewMatrix(c.typ, c.rows, c.cols, make([]byte, c.bytes))
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
		})
	}
}
