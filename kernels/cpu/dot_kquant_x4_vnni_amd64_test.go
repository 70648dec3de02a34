package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// kzRandK fills a K-quant activation buffer for 4 tokens × nb super-blocks:
// random int8 quants (full range, -128 included), exact bsums, and scales
// drawn from ordinary, tiny, huge and zero values.
func kzRandAct(rng *rand.Rand, nb int) (qs []int8, d []float32, bsums []int16) {
	cols := nb * qkK
	qs = make([]int8, 4*cols)
	d = make([]float32, 4*nb)
	bsums = make([]int16, 4*cols/16)
	for i := range qs {
		qs[i] = int8(rng.IntN(256) - 128)
	}
	for i := range bsums {
		s := 0
		for _, q := range qs[16*i : 16*i+16] {
			s += int(q)
		}
		bsums[i] = int16(s)
	}
	for i := range d {
		d[i] = kzRandScale(rng)
	}
	return
}

func kzRandScale(rng *rand.Rand) float32 {
	switch rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return float32(rng.NormFloat64()) * 1e-30
	case 2:
		return float32(rng.NormFloat64()) * 1e30
	default:
		return float32(rng.NormFloat64()) * 0.01
	}
}

// kzRandRowK: random bytes with d and dmin set to random finite halves
// (subnormal, huge, negative and zero ones included).
func kzRandRowK(rng *rand.Rand, nb, bs int) []byte {
	row := make([]byte, nb*bs)
	for i := range row {
		row[i] = byte(rng.Uint32())
	}
	for b := 0; b < nb; b++ {
		off := b * bs
		if bs == 210 {
			off += 208
		}
		for k := 0; k < 2; k++ {
			var h uint16
			switch rng.IntN(6) {
			case 0:
				h = uint16(rng.IntN(0x400)) // subnormal
			case 1:
				h = 0x7bff // 65504
			case 2:
				h = 0
			default:
				h = F32ToF16(float32(rng.NormFloat64()) * 0.01)
			}
			if rng.IntN(2) == 0 {
				h |= 0x8000
			}
			binary.LittleEndian.PutUint16(row[off+2*k:], h)
			if bs == 210 {
				break
			}
		}
	}
	return row
}

func kzSame(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestKZMatchesAVX2: the AVX-512 four-token kernels give the AVX2
// four-token and one-token kernels' bits for every token.
func TestKZMatchesAVX2(t *testing.T) {
	if !hasAVX512KZ {
		t.Skip("no AVX-512 VNNI")
	}
	type kfun func(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)
	type k1fun func(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32
	cases := []struct {
		typ      ggml.Type
		bs       int
		kz, avx2 kfun
		one      k1fun
	}{
		{ggml.TypeQ4_K, 144, dotQ4_Kx4AVX512, dotQ4_Kx4AVX2, dotQ4_KAVX2},
		{ggml.TypeQ6_K, 210, dotQ6_Kx4AVX512, dotQ6_Kx4AVX2, dotQ6_KAVX2},
	}
	rng := rand.New(rand.NewPCG(71, 72))
	for _, c := range cases {
		for _, nb := range []int{1, 2, 3, 5, 8, 11, 64, 65} {
			t.Run(fmt.Sprintf("%s/nb%d", c.typ, nb), func(t *testing.T) {
				cols := nb * qkK
				for rep := 0; rep < 200; rep++ {
					row := kzRandRowK(rng, nb, c.bs)
					qs, d, bsums := kzRandAct(rng, nb)
					var got, want [4]float32
					c.kz(&row[0], &qs[0], &d[0], &bsums[0], nb, cols, 4*nb, &got[0])
					c.avx2(&row[0], &qs[0], &d[0], &bsums[0], nb, cols, 4*nb, &want[0])
					for i := range got {
						one := c.one(&row[0], &qs[i*cols], &d[i*nb], &bsums[i*cols/16], nb)
						if !kzSame(got[i], want[i]) || !kzSame(got[i], one) {
							t.Fatalf("rep %d token %d: avx512 %g (%#x), avx2 x4 %g (%#x), avx2 %g", rep, i,
								got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]), one)
						}
					}
				}
			})
		}
	}
}

// TestKZInstalled: with AVX-512 VNNI the kernel table uses the kernels.
func TestKZInstalled(t *testing.T) {
	if !hasAVX512KZ {
		t.Skip("no AVX-512 VNNI")
	}
	for typ := range kzKernels4 {
		if kernels[typ].dot4 == nil {
			t.Errorf("%s: no dot4", typ)
		}
	}
}

// BenchmarkKZ: GOP/s of the AVX2 and AVX-512 four-token kernels (one row,
// 4 tokens, 2048 columns, in cache), single thread.
func BenchmarkKZ(b *testing.B) {
	if !hasAVX512KZ {
		b.Skip("no AVX-512 VNNI")
	}
	const cols = 2048
	rng := rand.New(rand.NewPCG(73, 74))
	for _, typ := range []ggml.Type{ggml.TypeQ4_K, ggml.TypeQ6_K} {
		k := kernels[typ]
		row := randomRow(rng, typ, cols)
		x := randNormal(rng, 4*cols, 1)
		var a actBuf
		a.prepare(k.act, 4, cols)
		for i := 0; i < 4; i++ {
			a.quantizeToken(k.act, i, cols, x[i*cols:(i+1)*cols])
		}
		var v4 actView
		a.viewN(k.act, 0, 4, cols, x, &v4)
		var sink float32
		for _, impl := range []struct {
			name string
			f    func(row []byte, a actView, cols int) [4]float32
		}{{"avx2", simdKernels4[typ]}, {"avx512", kzKernels4[typ]}} {
			if impl.f == nil {
				continue
			}
			b.Run(typ.String()+"/"+impl.name, func(b *testing.B) {
				best := bestOf(b, func() { o := impl.f(row, v4, cols); sink += o[0] })
				b.ReportMetric(2*4*cols/best, "GOP/s-best")
			})
		}
		if f := kzKernels4r[typ]; f != nil {
			const nrows = 64
			rb := len(row)
			rows := make([]byte, nrows*rb)
			for r := 0; r < nrows; r++ {
				copy(rows[r*rb:], row)
			}
			dst := make([]float32, 4*nrows)
			b.Run(typ.String()+"/avx512rows64", func(b *testing.B) {
				best := bestOf(b, func() { f(rows, rb, v4, cols, dst, nrows) })
				b.ReportMetric(2*4*cols*nrows/best, "GOP/s-best")
			})
		}
		_ = sink
	}
}

// TestKZRows: the many-row forms write dst[t*dstride+r] for every row (odd
// row counts included), equal to the one-token AVX2 kernel, and nothing else.
func TestKZRows(t *testing.T) {
	if !hasAVX512KZ {
		t.Skip("no AVX-512 VNNI")
	}
	type k1fun func(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32
	cases := []struct {
		typ ggml.Type
		bs  int
		one k1fun
	}{
		{ggml.TypeQ4_K, 144, dotQ4_KAVX2},
		{ggml.TypeQ6_K, 210, dotQ6_KAVX2},
	}
	rng := rand.New(rand.NewPCG(75, 76))
	for _, c := range cases {
		f := kzKernels4r[c.typ]
		for _, nb := range []int{1, 3, 8, 64, 66} {
			for _, nrows := range []int{1, 2, 5, 7} {
				cols, rb := nb*qkK, nb*c.bs
				rows := kzRandRowK(rng, nb*nrows, c.bs)
				qs, d, bsums := kzRandAct(rng, nb)
				a := actView{qs: qs, d: d, bsums: bsums}
				dstride := nrows + 3
				dst := make([]float32, 4*dstride)
				const canary = float32(-12345)
				for i := range dst {
					dst[i] = canary
				}
				f(rows, rb, a, cols, dst, dstride)
				for i, v := range dst {
					tok, r := i/dstride, i%dstride
					if r >= nrows {
						if v != canary {
							t.Fatalf("%s nb %d rows %d: dst[%d] written", c.typ, nb, nrows, i)
						}
						continue
					}
					want := c.one(&rows[r*rb], &qs[tok*cols], &d[tok*nb], &bsums[tok*cols/16], nb)
					if !kzSame(v, want) {
						t.Fatalf("%s nb %d rows %d: row %d token %d: %g, want %g", c.typ, nb, nrows, r, tok, v, want)
					}
				}
			}
		}
	}
}
