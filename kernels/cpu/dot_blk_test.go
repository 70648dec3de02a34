package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"oengine/ggml"
)

// TestBlkKernels: the blocked gemm (1 row × 8 tokens), gemv (8 rows × 1
// token) and one-pair kernels agree bit for bit, and each matches the
// plain Go twin blkDotRef within float32 rounding (1e-5·Σ|terms|).
func TestBlkKernels(t *testing.T) {
	if !blkActive {
		t.Skip("no blocked kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0} {
		bk := kernels[typ].blk
		for _, sh := range []struct{ cols, n int }{{256, 8}, {96, 5}, {2048, 11}, {32, 1}} {
			t.Run(fmt.Sprintf("%s/%dx%d", typ, sh.cols, sh.n), func(t *testing.T) {
				const rows = 8
				w := randomMatrix(t, rng, typ, rows, sh.cols)
				x := randNormal(rng, sh.n*sh.cols, 1)
				for i := 0; i < sh.cols; i += 7 { // saturated activations
					x[i] = 40
				}
				var a actBuf
				a.prepare(actQ8_0, sh.n, sh.cols)
				for i := 0; i < sh.n; i++ {
					a.quantizeToken(actQ8_0, i, sh.cols, x[i*sh.cols:(i+1)*sh.cols])
				}
				rb := w.rowBytes()
				nb := sh.cols / qk
				gemv := make([][8]float32, sh.n)
				for i := range gemv {
					blkGemv(bk, w.Data, rb, &a, i, sh.cols, &gemv[i])
				}
				if blkPacked {
					panel := make([]byte, nb*panelBlock)
					packPanel(bk, panel, w.Data, nil, rb, nb)
					for i := 0; i+4 <= sh.n; i++ {
						var out4 [32]float32
						if !blkGemmPacked4(bk, panel, &a, i, sh.cols, &out4) {
							break
						}
						for j := 0; j < 32; j++ {
							if math.Float32bits(out4[j]) != math.Float32bits(gemv[i+j/8][j%8]) {
								t.Fatalf("row %d token %d: packed x4 %g, gemv %g", j%8, i+j/8, out4[j], gemv[i+j/8][j%8])
							}
						}
					}
					for i := 0; i < sh.n; i++ {
						var out [8]float32
						blkGemmPacked(bk, panel, &a, i, sh.cols, &out)
						for r := range out {
							if math.Float32bits(out[r]) != math.Float32bits(gemv[i][r]) {
								t.Fatalf("row %d token %d: packed %g, gemv %g", r, i, out[r], gemv[i][r])
							}
						}
					}
				}
				for r := 0; r < rows; r++ {
					var v actView
					for g := 0; g < blkGroups(sh.n); g++ {
						var out [8]float32
						blkGemm(bk, w.Row(r), &a, g, sh.cols, &out)
						for tt := 0; tt < 8 && g*8+tt < sh.n; tt++ {
							i := g*8 + tt
							if math.Float32bits(out[tt]) != math.Float32bits(gemv[i][r]) {
								t.Fatalf("row %d token %d: gemm %g, gemv %g", r, i, out[tt], gemv[i][r])
							}
						}
					}
					for i := 0; i < sh.n; i++ {
						a.view(actQ8_0, i, sh.cols, x, &v)
						one := kernels[typ].dot(w.Row(r), v)
						if math.Float32bits(one) != math.Float32bits(gemv[i][r]) {
							t.Fatalf("row %d token %d: one-pair %g, gemv %g", r, i, one, gemv[i][r])
						}
						ref := blkDotRef(typ == ggml.TypeQ4_0, w.Row(r), v.qs, v.d)
						xq, _ := quantActRef(actQ8_0, x[i*sh.cols:(i+1)*sh.cols])
						_, mag := quantDotRef(t, typ, w.Row(r), xq, nil)
						if d := math.Abs(float64(one) - float64(ref)); d > 1e-5*mag+1e-6 {
							t.Fatalf("row %d token %d: kernel %g, Go twin %g (nb %d)", r, i, one, ref, nb)
						}
					}
				}
			})
		}
	}
}

// BenchmarkBlk reports GB/s of weights for the blocked kernels alone
// (single thread, 2048 columns, weights in cache): gemm per 8-token group,
// gemv per 8 rows.
func BenchmarkBlk(b *testing.B) {
	if !blkActive {
		b.Skip("no blocked kernels")
	}
	const cols = 2048
	rng := rand.New(rand.NewPCG(43, 44))
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0} {
		bk := kernels[typ].blk
		w := randomMatrix(b, rng, typ, 8, cols)
		x := randNormal(rng, 8*cols, 1)
		var a actBuf
		a.prepare(actQ8_0, 8, cols)
		for i := 0; i < 8; i++ {
			a.quantizeToken(actQ8_0, i, cols, x[i*cols:(i+1)*cols])
		}
		var out [8]float32
		b.Run(typ.String()+"/gemm", func(b *testing.B) {
			b.SetBytes(int64(w.rowBytes()))
			best := bestOf(b, func() { blkGemm(bk, w.Row(0), &a, 0, cols, &out) })
			b.ReportMetric(2*8*cols/best, "GOP/s-best")
		})
		b.Run(typ.String()+"/gemv", func(b *testing.B) {
			b.SetBytes(int64(len(w.Data)))
			best := bestOf(b, func() { blkGemv(bk, w.Data, w.rowBytes(), &a, 0, cols, &out) })
			b.ReportMetric(2*8*cols/best, "GOP/s-best")
		})
	}
}

// bestOf runs fn b.N times in batches of 64 and returns the fastest batch's
// time per call in ns: on a loaded machine the best batch is the one that
// ran uninterrupted, so it shows the kernel's own speed.
func bestOf(b *testing.B, fn func()) float64 {
	best := math.Inf(1)
	for done := 0; done < b.N; done += 64 {
		t0 := time.Now()
		for range 64 {
			fn()
		}
		best = min(best, float64(time.Since(t0).Nanoseconds())/64)
	}
	return best
}

// BenchmarkDotKernels reports the best-batch GOP/s of every type's
// one-token kernel and four-token kernel (2048 columns, weights in cache),
// single thread.
func BenchmarkDotKernels(b *testing.B) {
	const cols = 2048
	rng := rand.New(rand.NewPCG(45, 46))
	for _, typ := range allTypes {
		k := kernels[typ]
		row := randomRow(rng, typ, cols)
		x := randNormal(rng, 4*cols, 1)
		var a actBuf
		a.prepare(k.act, 4, cols)
		for i := 0; i < 4; i++ {
			a.quantizeToken(k.act, i, cols, x[i*cols:(i+1)*cols])
		}
		var v1, v4 actView
		a.view(k.act, 0, cols, x, &v1)
		a.viewN(k.act, 0, 4, cols, x, &v4)
		var sink float32
		b.Run(typ.String()+"/dot", func(b *testing.B) {
			b.SetBytes(int64(len(row)))
			best := bestOf(b, func() { sink += k.dot(row, v1) })
			b.ReportMetric(2*cols/best, "GOP/s-best")
		})
		if k.dot4 != nil {
			b.Run(typ.String()+"/dot4", func(b *testing.B) {
				b.SetBytes(int64(len(row)))
				best := bestOf(b, func() { o := k.dot4(row, v4, cols); sink += o[0] })
				b.ReportMetric(2*4*cols/best, "GOP/s-best")
			})
		}
		_ = sink
	}
}

// BenchmarkBlkPacked: the packed kernels (8 rows × 1 token per call,
// panel in cache) and the packing itself, best-batch.
func BenchmarkBlkPacked(b *testing.B) {
	if !blkActive || !blkPacked {
		b.Skip("no packed kernels")
	}
	const cols = 2048
	rng := rand.New(rand.NewPCG(49, 50))
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0} {
		bk := kernels[typ].blk
		w := randomMatrix(b, rng, typ, 8, cols)
		x := randNormal(rng, cols, 1)
		var a actBuf
		a.prepare(actQ8_0, 1, cols)
		a.quantizeToken(actQ8_0, 0, cols, x)
		nb := cols / qk
		panel := make([]byte, nb*panelBlock)
		packPanel(bk, panel, w.Data, nil, w.rowBytes(), nb)
		var out [8]float32
		b.Run(typ.String()+"/gemm", func(b *testing.B) {
			b.SetBytes(int64(len(w.Data)))
			best := bestOf(b, func() { blkGemmPacked(bk, panel, &a, 0, cols, &out) })
			b.ReportMetric(2*8*cols/best, "GOP/s-best")
		})
		b.Run(typ.String()+"/gemm4", func(b *testing.B) {
			x4 := randNormal(rng, 4*cols, 1)
			var a4 actBuf
			a4.prepare(actQ8_0, 4, cols)
			for i := 0; i < 4; i++ {
				a4.quantizeToken(actQ8_0, i, cols, x4[i*cols:(i+1)*cols])
			}
			var out4 [32]float32
			if !blkGemmPacked4(bk, panel, &a4, 0, cols, &out4) {
				b.Skip("no four-token packed kernel")
			}
			b.SetBytes(int64(len(w.Data)))
			best := bestOf(b, func() { blkGemmPacked4(bk, panel, &a4, 0, cols, &out4) })
			b.ReportMetric(2*4*8*cols/best, "GOP/s-best")
		})
		b.Run(typ.String()+"/pack", func(b *testing.B) {
			b.SetBytes(int64(len(w.Data)))
			best := bestOf(b, func() { packPanel(bk, panel, w.Data, nil, w.rowBytes(), nb) })
			b.ReportMetric(float64(len(w.Data))/best, "GB/s-best")
		})
	}
}

// TestDot22BitwiseEqualsDot: a two-row × two-token kernel must give, per
// pair, exactly the one-token kernel's bits (batch invariance).
func TestDot22BitwiseEqualsDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for _, typ := range allTypes {
		k := kernels[typ]
		if k.dot22 == nil {
			continue
		}
		for _, cols := range []int{8, 24, 100, 256, 2048} {
			t.Run(fmt.Sprintf("%s/%d", typ, cols), func(t *testing.T) {
				w := randomMatrix(t, rng, typ, 2, cols)
				x := randNormal(rng, 2*cols, 1)
				var a actBuf
				a.prepare(k.act, 2, cols)
				var v2, v1 actView
				a.viewN(k.act, 0, 2, cols, x, &v2)
				o := k.dot22(w.Data, w.rowBytes(), v2, cols)
				for p, got := range o {
					r, tok := p/2, p%2
					a.view(k.act, tok, cols, x, &v1)
					want := k.dot(w.Row(r), v1)
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("row %d token %d: tile %g, one-token %g", r, tok, got, want)
					}
				}
			})
		}
	}
}

// BenchmarkDot22: the two-row × two-token kernels, best-batch GOP/s
// (2048 columns, in cache, single thread).
func BenchmarkDot22(b *testing.B) {
	const cols = 2048
	rng := rand.New(rand.NewPCG(53, 54))
	for _, typ := range allTypes {
		k := kernels[typ]
		if k.dot22 == nil {
			continue
		}
		w := randomMatrix(b, rng, typ, 2, cols)
		x := randNormal(rng, 2*cols, 1)
		var a actBuf
		a.prepare(k.act, 2, cols)
		var v2 actView
		a.viewN(k.act, 0, 2, cols, x, &v2)
		var sink float32
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(w.Data)))
			best := bestOf(b, func() { o := k.dot22(w.Data, w.rowBytes(), v2, cols); sink += o[0] })
			b.ReportMetric(2*4*cols/best, "GOP/s-best")
		})
		_ = sink
	}
}
