package cpu

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"oengine/ggml"
)

// Benchmarks report MB/s of encoded weights read (b.SetBytes = weight
// bytes per call). Run: go test ./kernels/cpu -run '^$' -bench . -benchtime 20x

var benchMatrices = map[string]Matrix{}

// benchMatrix returns a rows×cols matrix of typ made of 64 quantized random
// rows repeated (quantizing millions of values would dominate setup).
func benchMatrix(b *testing.B, typ ggml.Type, rows, cols int) Matrix {
	key := fmt.Sprint(typ, rows, cols)
	if m, ok := benchMatrices[key]; ok {
		return m
	}
	rng := rand.New(rand.NewPCG(1, uint64(typ)))
	tile := randMatrix(b, rng, typ, 64, cols)
	data := make([]byte, 0, rows*len(tile.Data)/64)
	for len(data) < cap(data) {
		data = append(data, tile.Data[:min(len(tile.Data), cap(data)-len(data))]...)
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		b.Fatal(err)
	}
	benchMatrices[key] = m
	return m
}

func BenchmarkMatMul(b *testing.B) {
	pool := NewPool(0)
	defer pool.Close()
	for _, typ := range allTypes {
		for _, sh := range []struct{ rows, cols int }{{2048, 2048}, {5632, 2048}} {
			for _, n := range []int{1, 32} {
				b.Run(fmt.Sprintf("%s/%dx%d/n%d", typ, sh.rows, sh.cols, n), func(b *testing.B) {
					w := benchMatrix(b, typ, sh.rows, sh.cols)
					x := randNormal(rand.New(rand.NewPCG(2, 3)), n*sh.cols, 1)
					dst := make([]float32, n*sh.rows)
					b.SetBytes(int64(len(w.Data)))
					b.ResetTimer()
					for range b.N {
						pool.MatMul(dst, w, x, n)
					}
				})
			}
		}
	}
}

func BenchmarkDequantize(b *testing.B) {
	for _, typ := range allTypes {
		b.Run(typ.String(), func(b *testing.B) {
			w := benchMatrix(b, typ, 64, 4096)
			dst := make([]float32, 64*4096)
			b.SetBytes(int64(len(w.Data)))
			for range b.N {
				if err := Dequantize(typ, w.Data, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantizeActivations: one token of 4096 values per op; SetBytes
// counts the float32 input.
func BenchmarkQuantizeActivations(b *testing.B) {
	const cols = 4096
	x := randNormal(rand.New(rand.NewPCG(4, 5)), cols, 1)
	for _, k := range []struct {
		name string
		kind actKind
	}{{"Q8_0", actQ8_0}, {"Q8_1", actQ8_1}, {"Q8_K", actQ8K}} {
		b.Run(k.name, func(b *testing.B) {
			var a actBuf
			a.prepare(k.kind, 1, cols)
			b.SetBytes(4 * cols)
			for range b.N {
				a.quantizeToken(k.kind, 0, cols, x)
			}
		})
	}
}

func BenchmarkQuantize(b *testing.B) {
	x := randNormal(rand.New(rand.NewPCG(6, 7)), 4096, 1)
	for _, typ := range allTypes {
		b.Run(typ.String(), func(b *testing.B) {
			rb, _ := typ.RowBytes(len(x))
			dst := make([]byte, rb)
			b.SetBytes(4 * int64(len(x)))
			for range b.N {
				if err := Quantize(typ, x, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeLayers runs the decode products of several
// tinyllama-1.1b-shaped layers (q/k/v fused, o, gate/up fused, down; about
// 25 MB of weights per Q4_0 layer, 5 layers so the set is larger than the
// last-level cache) for one token on a 2-thread pool: the matmul part of a
// decode step with its pool hand-offs and activation quantization. MB/s is
// weight bytes read.
func BenchmarkDecodeLayers(b *testing.B) {
	const layers, dim, kvDim, ffn = 5, 2048, 256, 5632
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeF16} {
		b.Run(typ.String(), func(b *testing.B) {
			pool := NewPool(2)
			defer pool.Close()
			// Distinct matrices per layer (benchMatrix caches by shape).
			mk := func(rows, cols int) Matrix {
				m := benchMatrix(b, typ, rows, cols)
				return Matrix{Type: m.Type, Rows: m.Rows, Cols: m.Cols, Data: append([]byte(nil), m.Data...)}
			}
			type layer struct{ q, k, v, o, g, u, d Matrix }
			ls := make([]layer, layers)
			var bytes int64
			for i := range ls {
				ls[i] = layer{mk(dim, dim), mk(kvDim, dim), mk(kvDim, dim), mk(dim, dim), mk(ffn, dim), mk(ffn, dim), mk(dim, ffn)}
				for _, m := range []Matrix{ls[i].q, ls[i].k, ls[i].v, ls[i].o, ls[i].g, ls[i].u, ls[i].d} {
					bytes += int64(len(m.Data))
				}
			}
			x := randNormal(rand.New(rand.NewPCG(8, 9)), dim, 1)
			q, k, v := make([]float32, dim), make([]float32, kvDim), make([]float32, kvDim)
			o, g, u := make([]float32, dim), make([]float32, ffn), make([]float32, ffn)
			h := randNormal(rand.New(rand.NewPCG(10, 11)), ffn, 1)
			var qkv [3]MatOp
			var gu [2]MatOp
			b.SetBytes(bytes)
			b.ResetTimer()
			for range b.N {
				for _, l := range ls {
					qkv[0], qkv[1], qkv[2] = MatOp{Dst: q, W: l.q}, MatOp{Dst: k, W: l.k}, MatOp{Dst: v, W: l.v}
					pool.MatMuls(qkv[:], x, 1)
					pool.MatMul(o, l.o, q, 1)
					gu[0], gu[1] = MatOp{Dst: g, W: l.g}, MatOp{Dst: u, W: l.u}
					pool.MatMuls(gu[:], x, 1)
					pool.MatMul(o, l.d, h, 1)
				}
			}
		})
	}
}

// BenchmarkMatMulBatch measures the FFN gate product of tinyllama-1.1b
// (5632 × 2048) against n tokens on a 2-thread pool: n = 1..64 are decode
// steps of n sequences, 512 a prefill chunk. us/tok is the wall time per
// token, cpu-us/tok the process CPU time per token (both pool threads;
// steadier on a shared box).
func BenchmarkMatMulBatch(b *testing.B) {
	const rows, cols = 5632, 2048
	pool := NewPool(2)
	defer pool.Close()
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeQ6_K, ggml.TypeF16} {
		for _, n := range []int{1, 2, 4, 8, 12, 16, 24, 32, 64, 512} {
			b.Run(fmt.Sprintf("%s/n%d", typ, n), func(b *testing.B) {
				w := benchMatrix(b, typ, rows, cols)
				x := randNormal(rand.New(rand.NewPCG(2, 3)), n*cols, 1)
				dst := make([]float32, n*rows)
				pool.MatMul(dst, w, x, n) // warm-up: grow scratch
				b.ResetTimer()
				c0 := benchCPUTime()
				for range b.N {
					pool.MatMul(dst, w, x, n)
				}
				b.ReportMetric(float64(benchCPUTime()-c0)/1e3/float64(b.N*n), "cpu-us/tok")
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "us/tok")
			})
		}
	}
}

// benchCPUTime returns the process's user + system CPU time.
func benchCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchMatMulTurns times products of n random tokens over the matrices ws
// in turn (all of one shape; more than the caches hold, the weights come
// from DRAM) and reports us/mat, the time of one product.
func benchMatMulTurns(b *testing.B, pool *Pool, ws []Matrix, n int) {
	x := randNormal(rand.New(rand.NewPCG(2, 3)), n*ws[0].Cols, 1)
	dst := make([]float32, n*ws[0].Rows)
	pool.MatMul(dst, ws[0], x, n)
	b.ResetTimer()
	for i := range b.N {
		pool.MatMul(dst, ws[i%len(ws)], x, n)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/mat")
}

// BenchmarkMatMulFewTokens: products of a few tokens (a step of a few
// decoders, or of a token verifying drafts) with the kernels for them
// (few: f16FewOn and, with AVX-512, f16RowsZOn, kquantFewOn, q8FewOn,
// blkZFewOn, blkZFewMax at its default) and without (off: blkZFewMax 4),
// for F16 the AVX2 kernels where the AVX-512 ones run (few-avx2), for
// Q4_0 and Q8_0 the one-token kernel per token (few-pertoken), and for
// Q4_0, Q5_0 and Q8_0 the same bytes row-major (rowmajor: the path before
// their decode layouts), weights from DRAM: tinyllama-1.1b FFN matrices
// (5632 × 2048) in turn, 277 MB of F16, 156-227 MB of Q4_K / Q6_K, 294 MB
// of Q8_0, 190 MB of Q5_0 and 156 MB of Q4_0 (in the decode layout where
// it applies), on a 2-thread pool. us/mat is the time of one product; n1
// (the decode kernels) is the rate the others aim at.
func BenchmarkMatMulFewTokens(b *testing.B) {
	defer func(f, k, q, z, q4on bool, q4 int) {
		f16FewOn, kquantFewOn, q8FewOn, f16RowsZOn, blkZFewOn, blkZFewMax = f, k, q, z, q4on, q4
	}(f16FewOn, kquantFewOn, q8FewOn, f16RowsZOn, blkZFewOn, blkZFewMax)
	const rows, cols = 5632, 2048
	pool := NewPool(2)
	defer pool.Close()
	for _, c := range []struct {
		typ ggml.Type
		nm  int
	}{{ggml.TypeF16, 12}, {ggml.TypeQ4_K, 24}, {ggml.TypeQ6_K, 24}, {ggml.TypeQ8_0, 24}, {ggml.TypeQ4_0, 24}, {ggml.TypeQ5_0, 24}, {ggml.TypeIQ4_NL, 24}, {ggml.TypeIQ4_XS, 24}} {
		ws := make([]Matrix, c.nm)
		rm := make([]Matrix, c.nm) // the row-major matrices
		for i := range ws {
			m := benchMatrix(b, c.typ, rows, cols)
			var err error
			if rm[i], err = NewMatrix(c.typ, rows, cols, append([]byte(nil), m.Data...)); err != nil {
				b.Fatal(err)
			}
			ws[i] = rm[i]
			if c.typ == ggml.TypeQ4_0 || c.typ == ggml.TypeQ8_0 || c.typ == ggml.TypeQ5_0 || c.typ == ggml.TypeIQ4_NL {
				// The decode layout, as the model loads it.
				ws[i], _ = PackDecodeLayout(rm[i], append([]byte(nil), m.Data...))
			}
		}
		for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 32, 64, 128, 256, 512} {
			for _, mode := range []string{"off", "few", "few-avx2", "few-pertoken", "rowmajor"} {
				if mode == "few-avx2" && (c.typ != ggml.TypeF16 || !hasAVX512F16) {
					continue // the AVX2 kernels where the AVX-512 ones run
				}
				if mode == "few-pertoken" && (c.typ != ggml.TypeQ4_0 && c.typ != ggml.TypeQ8_0 || !q4zActive()) {
					continue // the one-token decode-layout kernel per token
				}
				if mode == "rowmajor" && (c.typ != ggml.TypeQ4_0 && c.typ != ggml.TypeQ8_0 && c.typ != ggml.TypeQ5_0 && c.typ != ggml.TypeIQ4_NL || !q4zActive()) {
					continue // the row-major rows (few on) against the layout
				}
				if n > 11 && c.typ != ggml.TypeQ8_0 && c.typ != ggml.TypeQ5_0 && c.typ != ggml.TypeIQ4_NL {
					continue
				}
				on := mode != "off"
				mats := ws
				if mode == "rowmajor" {
					mats = rm
				}
				b.Run(fmt.Sprintf("%s/n%d/%s", c.typ, n, mode), func(b *testing.B) {
					f16FewOn, kquantFewOn, q8FewOn = on, on, on
					blkZFewMax = map[bool]int{false: 4, true: blkZFewMaxDefault}[on]
					blkZFewOn = mode == "few"
					f16RowsZOn = mode == "few" && hasAVX512F16
					benchMatMulTurns(b, pool, mats, n)
				})
			}
		}
	}
}
