package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// convTypes are the types the blocked kernels run on rows converted to
// Q8_0 (blk_conv.go): the Go conversion (the twin), the AVX2 one, and
// the bytes of a block.
var convTypes = []struct {
	typ        ggml.Type
	twin, simd func(dst, src []byte, nb int)
	bb         int
}{
	{ggml.TypeIQ4_NL, iq4NLToQ8_0, iq4NLToQ8_0Rows, 18},
	{ggml.TypeQ5_0, q5_0ToQ8_0, q5_0ToQ8_0Rows, 22},
	{ggml.TypeMXFP4, mxfp4ToQ8_0, mxfp4ToQ8_0Rows, 17},
}

// convRow is randomRow for the conversion tests: MXFP4 rows also get
// exponents outside F16's range (mxfp4F16Scale's clamps) and at its edges.
func convRow(rng *rand.Rand, typ ggml.Type, cols int) []byte {
	row := randomRow(rng, typ, cols)
	if typ == ggml.TypeMXFP4 {
		edges := []byte{0, 1, 2, 103, 104, 143, 144, 254, 255}
		for o := 0; o < len(row); o += 17 {
			if rng.IntN(3) == 0 {
				row[o] = edges[rng.IntN(len(edges))]
			}
		}
	}
	return row
}

// TestConvToQ8_0: converted blocks decode to the original blocks' values
// exactly, and the AVX2 conversion writes the twin's bytes and nothing
// past them.
func TestConvToQ8_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, c := range convTypes {
		for _, nb := range []int{1, 2, 7, 64} {
			src := randomRow(rng, c.typ, nb*qk)
			want := make([]byte, 34*nb)
			c.twin(want, src, nb)
			a, b := make([]float32, nb*qk), make([]float32, nb*qk)
			if err := Dequantize(c.typ, src, a); err != nil { // exact: MXFP4 scales within F16's range here
				t.Fatal(err)
			}
			if err := Dequantize(ggml.TypeQ8_0, want, b); err != nil {
				t.Fatal(err)
			}
			if i := firstDiffF32(a, b); i >= 0 {
				t.Fatalf("%s nb %d element %d: %g, as Q8_0 %g", c.typ, nb, i, a[i], b[i])
			}
			if !hasAVX2 {
				continue
			}
			src = convRow(rng, c.typ, nb*qk)
			c.twin(want, src, nb)
			got := make([]byte, 34*nb+1)
			got[34*nb] = 0xA5
			c.simd(got[:34*nb], src, nb)
			if !bytes.Equal(got[:34*nb], want) || got[34*nb] != 0xA5 {
				t.Fatalf("%s nb %d: AVX2 conversion differs from the twin", c.typ, nb)
			}
		}
	}
}

// TestConvGemv: the one-token kernels of the converted types (MXFP4's
// 8-row AVX2 one, IQ4_NL's
// 8-row AVX2 and 16-row VNNI ones, Q5_0's 8-row AVX2 one) give, row by
// row, bitwise blkDot1 on the rows converted to Q8_0, and leave the rows
// past their whole groups to the caller.
func TestConvGemv(t *testing.T) {
	if !blkActive {
		t.Skip("no blocked kernels on this CPU")
	}
	iq4, q5, mx := convTypes[0], convTypes[1], convTypes[2]
	cases := []struct {
		typ   ggml.Type
		gemv  func(rows []byte, rb int, qs []int8, d []float32, s8 []int32, out []float32) int
		group int // 16: 16-row groups first, then 8
		conv  func(dst, src []byte, nb int)
		bb    int
	}{
		{ggml.TypeIQ4_NL, iq4NLGemv8, 8, iq4.twin, iq4.bb},
		{ggml.TypeIQ4_NL, iq4NLGemvZ, 16, iq4.twin, iq4.bb},
		{ggml.TypeQ5_0, q5_0Gemv8, 8, q5.twin, q5.bb},
		{ggml.TypeMXFP4, mxfp4Gemv8, 8, mx.twin, mx.bb},
	}
	rng := rand.New(rand.NewPCG(43, 44))
	for _, c := range cases {
		if c.group == 16 && !hasBlkZ {
			continue
		}
		bk := blkKernels[c.typ]
		for _, nb := range []int{1, 3, 64} {
			cols, rb := nb*qk, c.bb*nb
			for _, n := range []int{7, 8, 16, 23, 40} {
				t.Run(fmt.Sprintf("%s/group%d/nb%d/n%d", c.typ, c.group, nb, n), func(t *testing.T) {
					rows := make([]byte, 0, n*rb)
					for r := 0; r < n; r++ {
						rows = append(rows, convRow(rng, c.typ, cols)...)
					}
					x := randNormal(rng, cols, 1)
					if n == 23 { // saturated activations: every q8 is ±127
						for i := range x {
							x[i] = float32(1 - 2*rng.IntN(2))
						}
					}
					var a actBuf
					a.prepare(actQ8_0, 1, cols)
					a.quantizeToken(actQ8_0, 0, cols, x)
					out := make([]float32, n)
					done := c.gemv(rows, rb, a.qs, a.d, a.s8, out)
					want := n / 8 * 8
					if c.group == 16 {
						want = n/16*16 + n%16/8*8
					}
					if done != want {
						t.Fatalf("%d rows computed, want %d", done, want)
					}
					q8 := make([]byte, 34*nb)
					for r := 0; r < done; r++ {
						c.conv(q8, rows[r*rb:(r+1)*rb], nb)
						if ref := blkDot1(bk, q8, a.qs, a.d, a.s8); math.Float32bits(out[r]) != math.Float32bits(ref) {
							t.Fatalf("row %d: %g, blkDot1 %g", r, out[r], ref)
						}
					}
				})
			}
		}
	}
}

// TestMXFP4ConvEveryScale: the AVX2 conversion's scale table gives
// mxfp4F16Scale for every exponent byte.
func TestMXFP4ConvEveryScale(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	src := make([]byte, 17*256)
	for e := range 256 {
		src[17*e] = byte(e)
		src[17*e+1+e%16] = byte(e) // some levels too
	}
	want, got := make([]byte, 34*256), make([]byte, 34*256)
	mxfp4ToQ8_0(want, src, 256)
	mxfp4ToQ8_0Rows(got, src, 256)
	if !bytes.Equal(got, want) {
		t.Fatal("AVX2 conversion differs from the twin")
	}
	for e := range 256 {
		if le16(got[34*e:]) != mxfp4F16Scale(byte(e)) {
			t.Fatalf("exponent %d: scale %#x", e, le16(got[34*e:]))
		}
	}
}
