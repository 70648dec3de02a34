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

// TestMatMulsEqualsMatMul: a fused call gives each product bitwise what a
// separate MatMul gives, including products of different weight types
// (and so different activation kinds) in one call.
func TestMatMulsEqualsMatMul(t *testing.T) {
	cases := []struct {
		name  string
		types []ggml.Type
		rows  []int
		cols  int
		n     int
	}{
		{"qkv q4_0 decode", []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ4_0, ggml.TypeQ4_0}, []int{256, 64, 64}, 256, 1},
		{"qkv q4_k+q6_k prefill", []ggml.Type{ggml.TypeQ4_K, ggml.TypeQ4_K, ggml.TypeQ6_K}, []int{96, 32, 32}, 512, 13},
		{"mixed kinds", []ggml.Type{ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeQ5_1, ggml.TypeQ3_K}, []int{40, 17, 33, 9}, 256, 6},
		{"gate up f16", []ggml.Type{ggml.TypeF16, ggml.TypeF16}, []int{300, 300}, 128, 9},
		{"single", []ggml.Type{ggml.TypeBF16}, []int{5}, 64, 2},
	}
	rng := rand.New(rand.NewPCG(31, 32))
	for _, threads := range []int{1, 2, 3} {
		pool := NewPool(threads)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				x := randNormal(rng, c.n*c.cols, 1)
				ops := make([]MatOp, len(c.types))
				for j, typ := range c.types {
					ops[j] = MatOp{W: randomMatrix(t, rng, typ, c.rows[j], c.cols), Dst: make([]float32, c.n*c.rows[j])}
				}
				pool.MatMuls(ops, x, c.n)
				for j, op := range ops {
					want := make([]float32, len(op.Dst))
					pool.MatMul(want, op.W, x, c.n)
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(op.Dst[i]) {
							t.Fatalf("threads %d op %d (%s) value %d: MatMuls %g, MatMul %g", threads, j, op.W.Type, i, op.Dst[i], want[i])
						}
					}
				}
				if a := testing.AllocsPerRun(3, func() { pool.MatMuls(ops, x, c.n) }); a != 0 {
					t.Errorf("%v allocations per MatMuls", a)
				}
			})
		}
		pool.Close()
	}
}

func TestMatMulsBadShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	pool := NewPool(2)
	defer pool.Close()
	a := randomMatrix(t, rng, ggml.TypeQ8_0, 4, 64)
	b := randomMatrix(t, rng, ggml.TypeQ8_0, 4, 96)
	x := make([]float32, 96)
	cases := []struct {
		name string
		ops  []MatOp
	}{
		{"columns differ", []MatOp{{Dst: make([]float32, 4), W: a}, {Dst: make([]float32, 4), W: b}}},
		{"dst short", []MatOp{{Dst: make([]float32, 3), W: a}}},
		{"too many ops", make([]MatOp, maxMatOps+1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			pool.MatMuls(c.ops, x, 1)
		})
	}
	pool.MatMuls(nil, x, 1) // nothing to do
}

// TestPoolParkedWorkersWake: after a pause long enough for the helpers to
// stop spinning and park, a loop must still use them and complete.
func TestPoolParkedWorkersWake(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for rep := 0; rep < 3; rep++ {
		time.Sleep(20 * time.Millisecond)
		seen := make([]int32, 64)
		p.For(64, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				seen[i]++
			}
		})
		for i, v := range seen {
			if v != 1 {
				t.Fatalf("rep %d: index %d ran %d times", rep, i, v)
			}
		}
	}
}

// TestMatMulKQuantFewTokens: the last two or three tokens of a K-quant
// product computed by one more four-token group (kquantFewOn) give
// bitwise what the one-token kernel gives, with the many-row four-token
// kernel (dot4r, where this CPU has it) and with the one-row one, for
// products that end in such a group and ones whose tiles end mid-step
// (530 tokens: token tiles of 512), across thread counts; after a larger
// product, the scratch slots past a smaller one's last token are zero,
// not the larger one's tokens.
func TestMatMulKQuantFewTokens(t *testing.T) {
	defer func(on bool) { kquantFewOn = on }(kquantFewOn)
	rng := rand.New(rand.NewPCG(33, 34))
	const rows, cols = 37, 512
	for _, typ := range []ggml.Type{ggml.TypeQ2_K, ggml.TypeQ3_K, ggml.TypeQ4_K, ggml.TypeQ5_K, ggml.TypeQ6_K} {
		k := kernels[typ]
		if k.dot4 == nil {
			continue // no four-token kernel on this CPU
		}
		w := randomMatrix(t, rng, typ, rows, cols)
		for _, rowsKernel := range []bool{true, false} {
			if rowsKernel && k.dot4r == nil {
				continue
			}
			noRows := k
			noRows.dot4r = nil
			if !rowsKernel {
				kernels[typ] = noRows
			}
			for _, threads := range []int{1, 2} {
				pool := NewPool(threads)
				for _, n := range []int{2, 3, 6, 7, 10, 11, 530, 3} {
					x := randNormal(rng, n*cols, 1)
					checkSwitchSameBits(t, pool, w, x, n, func(on bool) { kquantFewOn = on },
						fmt.Sprintf("%s dot4r=%v threads %d n %d", typ, rowsKernel, threads, n))
					a := &pool.scratch.act[actQ8K]
					if len(a.qs) != (n+3)&^3*cols {
						t.Fatalf("n %d: Q8_K scratch of %d tokens, want whole groups of four", n, len(a.qs)/cols)
					}
					if slices.ContainsFunc(a.qs[n*cols:], func(q int8) bool { return q != 0 }) ||
						slices.ContainsFunc(a.d[n*cols/qkK:], func(d float32) bool { return d != 0 }) ||
						slices.ContainsFunc(a.bsums[n*cols/16:], func(s int16) bool { return s != 0 }) {
						t.Fatalf("n %d: scratch slots past the last token are not zero", n)
					}
				}
				pool.Close()
			}
			kernels[typ] = k
		}
	}
}

// checkSwitchSameBits runs pool.MatMul of w for the n tokens of x with a
// kernel switch (set) off, then on, and fails t at the first (token, row)
// whose bits differ; what names the case.
func checkSwitchSameBits(t *testing.T, pool *Pool, w Matrix, x []float32, n int, set func(on bool), what string) {
	t.Helper()
	off, on := make([]float32, n*w.Rows), make([]float32, n*w.Rows)
	set(false)
	pool.MatMul(off, w, x, n)
	set(true)
	pool.MatMul(on, w, x, n)
	for i := range on {
		if math.Float32bits(on[i]) != math.Float32bits(off[i]) {
			t.Fatalf("%s: token %d row %d: %g with the switch on, %g off", what, i/w.Rows, i%w.Rows, on[i], off[i])
		}
	}
}
