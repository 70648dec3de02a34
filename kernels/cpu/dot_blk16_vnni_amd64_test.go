package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// extremeRows sets some blocks of w to the extreme weights (Q4_0 nibbles 0
// and 15, Q8_0 bytes -128 and 127) and large scales.
func extremeRows(rng *rand.Rand, w Matrix) {
	bb := 34
	if w.Type == ggml.TypeQ4_0 {
		bb = 18
	}
	for b := 0; b+bb <= len(w.Data); b += bb {
		switch rng.IntN(6) {
		case 0:
			for j := 2; j < bb; j++ {
				w.Data[b+j] = 0x00
			}
		case 1:
			for j := 2; j < bb; j++ {
				w.Data[b+j] = 0xff
			}
		case 2:
			for j := 2; j < bb; j++ {
				if w.Type == ggml.TypeQ4_0 {
					w.Data[b+j] = 0xf0
				} else {
					w.Data[b+j] = byte(0x80 | (j&1)*0x7f) // -128 / -1
				}
			}
		case 3:
			if w.Type == ggml.TypeQ8_0 {
				for j := 2; j < bb; j++ {
					w.Data[b+j] = 0x7f
				}
			}
			w.Data[b], w.Data[b+1] = 0xff, 0x7b // f16 max
		}
	}
}

func blkzInputs(t testing.TB, rng *rand.Rand, typ ggml.Type, rows, cols, n int) (Matrix, []float32) {
	w := randomMatrix(t, rng, typ, rows, cols)
	extremeRows(rng, w)
	x := randNormal(rng, n*cols, 1)
	for i := 0; i < len(x); i += 7 { // saturated activations
		x[i] = 40
	}
	for i := 3; i < len(x); i += 11 {
		x[i] = -40
	}
	if n > 2 { // a token of one repeated extreme value
		for j := 0; j < cols; j++ {
			x[2*cols+j] = -1e3
		}
	}
	return w, x
}

// TestBlkZKernels: the AVX-512 16-row panel kernels (8 tokens and 1 token)
// equal the AVX2 gemv kernels bit for bit.
func TestBlkZKernels(t *testing.T) {
	if !hasBlkZ || !blkActive {
		t.Skip("no AVX-512 VNNI")
	}
	rng := rand.New(rand.NewPCG(61, 62))
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0} {
		bk := kernels[typ].blk
		for _, sh := range []struct{ cols, n int }{{32, 1}, {96, 8}, {256, 17}, {2048, 24}, {5632, 9}} {
			t.Run(fmt.Sprintf("%s/%dx%d", typ, sh.cols, sh.n), func(t *testing.T) {
				w, x := blkzInputs(t, rng, typ, 16, sh.cols, sh.n)
				var a actBuf
				a.prepare(actQ8_0, sh.n, sh.cols)
				for i := 0; i < sh.n; i++ {
					a.quantizeToken(actQ8_0, i, sh.cols, x[i*sh.cols:(i+1)*sh.cols])
				}
				rb, nb := w.rowBytes(), sh.cols/qk
				want := make([][16]float32, sh.n)
				for i := range want {
					var o [8]float32
					blkGemv(bk, w.Data, rb, &a, i, sh.cols, &o)
					copy(want[i][:8], o[:])
					blkGemv(bk, w.Data[8*rb:], rb, &a, i, sh.cols, &o)
					copy(want[i][8:], o[:])
				}
				panel := make([]byte, nb*panelBlockZ)
				packPanelZ(bk, panel, w.Data, rb, nb)
				panelAsm := make([]byte, nb*panelBlockZ)
				packPanelZAsm(bk, panelAsm, w.Data, rb, nb)
				for j := range panel {
					if panel[j] != panelAsm[j] {
						t.Fatalf("panel byte %d (block %d): Go %#x, asm %#x", j, j/panelBlockZ, panel[j], panelAsm[j])
					}
				}
				for g := 0; g+1 <= sh.n/8; g++ {
					var out [128]float32
					blkGemmZ8(bk, panel, &a, g, sh.cols, &out)
					for j, v := range out {
						i, r := g*8+j/16, j%16
						if math.Float32bits(v) != math.Float32bits(want[i][r]) {
							t.Fatalf("z8 row %d token %d: %g, gemv %g", r, i, v, want[i][r])
						}
					}
				}
				for i := 0; i < sh.n; i++ {
					var out [16]float32
					blkGemmZ1(bk, panel, &a, i, sh.cols, &out)
					for r, v := range out {
						if math.Float32bits(v) != math.Float32bits(want[i][r]) {
							t.Fatalf("z1 row %d token %d: %g, gemv %g", r, i, v, want[i][r])
						}
					}
				}
			})
		}
	}
}

// TestBlkZMatMul: whole products (odd row counts, token counts around the
// tile sizes) with the AVX-512 panels equal those without them and those
// of each token alone, bit for bit.
func TestBlkZMatMul(t *testing.T) {
	if blkZTile == nil {
		t.Skip("no AVX-512 VNNI")
	}
	rng := rand.New(rand.NewPCG(63, 64))
	p1, p2 := NewPool(1), NewPool(2)
	defer p1.Close()
	defer p2.Close()
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0} {
		for _, sh := range []struct{ rows, cols, n int }{{53, 256, 16}, {37, 96, 23}, {64, 512, 40}, {19, 64, 530}} {
			t.Run(fmt.Sprintf("%s/%dx%dx%d", typ, sh.rows, sh.cols, sh.n), func(t *testing.T) {
				w, x := blkzInputs(t, rng, typ, sh.rows, sh.cols, sh.n)
				z := make([]float32, sh.n*sh.rows)
				p2.MatMul(z, w, x, sh.n)
				save := blkZTile
				blkZTile = nil
				avx2 := make([]float32, sh.n*sh.rows)
				p2.MatMul(avx2, w, x, sh.n)
				blkZTile = save
				one := make([]float32, sh.rows)
				for i := 0; i < sh.n; i++ {
					p1.MatMul(one, w, x[i*sh.cols:(i+1)*sh.cols], 1)
					for r := range one {
						k := i*sh.rows + r
						if math.Float32bits(z[k]) != math.Float32bits(avx2[k]) || math.Float32bits(z[k]) != math.Float32bits(one[r]) {
							t.Fatalf("token %d row %d: avx512 %g, avx2 %g, alone %g", i, r, z[k], avx2[k], one[r])
						}
					}
				}
			})
		}
	}
}

// BenchmarkBlkZ: GOP/s of the prefill panel kernels, AVX2 (8-row panel × 4
// tokens) next to AVX-512 (16-row panel × 8 tokens), single thread, 2048
// columns, in cache; and the packing rates.
func BenchmarkBlkZ(b *testing.B) {
	if !hasBlkZ || !blkActive {
		b.Skip("no AVX-512 VNNI")
	}
	const cols, n = 2048, 8
	rng := rand.New(rand.NewPCG(65, 66))
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0} {
		bk := kernels[typ].blk
		w := randomMatrix(b, rng, typ, 16, cols)
		x := randNormal(rng, n*cols, 1)
		var a actBuf
		a.prepare(actQ8_0, n, cols)
		for i := 0; i < n; i++ {
			a.quantizeToken(actQ8_0, i, cols, x[i*cols:(i+1)*cols])
		}
		nb := cols / qk
		panel := make([]byte, nb*panelBlock)
		packPanel(bk, panel, w.Data, nil, w.rowBytes(), nb)
		panelZ := make([]byte, nb*panelBlockZ)
		packPanelZ(bk, panelZ, w.Data, w.rowBytes(), nb)
		b.Run(typ.String()+"/avx2-p4", func(b *testing.B) {
			var out4 [32]float32
			best := bestOf(b, func() { blkGemmPacked4(bk, panel, &a, 0, cols, &out4) })
			b.ReportMetric(2*4*8*cols/best, "GOP/s-best")
		})
		b.Run(typ.String()+"/avx512-z8", func(b *testing.B) {
			var out [128]float32
			best := bestOf(b, func() { blkGemmZ8(bk, panelZ, &a, 0, cols, &out) })
			b.ReportMetric(2*8*16*cols/best, "GOP/s-best")
		})
		b.Run(typ.String()+"/avx512-z1", func(b *testing.B) {
			var out [16]float32
			best := bestOf(b, func() { blkGemmZ1(bk, panelZ, &a, 0, cols, &out) })
			b.ReportMetric(2*16*cols/best, "GOP/s-best")
		})
		b.Run(typ.String()+"/pack8", func(b *testing.B) {
			best := bestOf(b, func() { packPanel(bk, panel, w.Data, nil, w.rowBytes(), nb) })
			b.ReportMetric(float64(len(w.Data)/2)/best, "GB/s-best")
		})
		b.Run(typ.String()+"/pack16", func(b *testing.B) {
			best := bestOf(b, func() { packPanelZ(bk, panelZ, w.Data, w.rowBytes(), nb) })
			b.ReportMetric(float64(len(w.Data))/best, "GB/s-best")
		})
		b.Run(typ.String()+"/pack16asm", func(b *testing.B) {
			best := bestOf(b, func() { packPanelZAsm(bk, panelZ, w.Data, w.rowBytes(), nb) })
			b.ReportMetric(float64(len(w.Data))/best, "GB/s-best")
		})
	}
}
