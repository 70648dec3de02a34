package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFillBlkSIMD: the AVX2 block sums give fillBlk's s8, dT and s8T bit
// for bit, for quantized activations and for raw int8 patterns covering
// the full range (-128..127).
func TestFillBlkSIMD(t *testing.T) {
	if !hasAVX2 || !blkActive {
		t.Skip("no AVX2 blocked kernels")
	}
	const n, cols = 11, 256
	r := rand.New(rand.NewPCG(47, 48))
	cases := []struct {
		name string
		fill func(a *actBuf)
	}{
		{"quantized", func(a *actBuf) {
			x := randNormal(r, n*cols, 3)
			for i := 0; i < n; i++ {
				quantRowQ8(x[i*cols:(i+1)*cols], a.qs[i*cols:(i+1)*cols], a.d[i*cols/qk:(i+1)*cols/qk], nil)
			}
		}},
		{"raw extremes", func(a *actBuf) {
			for i := range a.qs[:n*cols] {
				switch i % 3 {
				case 0:
					a.qs[i] = -128
				case 1:
					a.qs[i] = 127
				default:
					a.qs[i] = int8(r.IntN(256) - 128)
				}
			}
			for i := range a.d {
				a.d[i] = float32(i) * 0.25
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want, got actBuf
			want.prepare(actQ8_0, n, cols)
			c.fill(&want)
			got.prepare(actQ8_0, n, cols)
			copy(got.qs, want.qs)
			copy(got.d, want.d)
			for i := 0; i < n; i++ {
				want.fillBlk(i, cols)
				got.fillBlkSIMD(i, cols)
			}
			if !slices.Equal(got.s8, want.s8) || !slices.Equal(got.s8T, want.s8T) || !slices.Equal(got.dT, want.dT) {
				t.Fatalf("fillBlkSIMD differs from fillBlk: s8 %v vs %v", got.s8[:8], want.s8[:8])
			}
		})
	}
}
