package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

func TestBF16F16Span(t *testing.T) {
	enc := func(vs ...float32) []byte {
		b := make([]byte, 2*len(vs))
		for i, v := range vs {
			put16(b[2*i:], F32ToBF16(v))
		}
		return b
	}
	cases := []struct {
		name string
		data []byte
		pow2 int
		ok   bool
	}{
		{"zeros", enc(0, float32(math.Copysign(0, -1))), 0, true},
		{"fits as is", enc(1, -0.5, 1.0/1024, 30000), 0, true},
		{"tiny values scale up", enc(0.25, 1e-7, -3e-9), 12, true}, // 3e-9 < 2^-28: its lowest bit weighs 2^-36
		{"large values scale down", enc(1e6, 1), -4, true},         // 1e6/16 < 65504
		{"34 binades", enc(0.5, 0.5/(1<<34)), 0, false},
		{"infinity", enc(1, float32(math.Inf(1))), 0, false},
		{"NaN", enc(float32(math.NaN())), 0, false},
		{"BF16 subnormal", []byte{0x01, 0x00}, 0, false},
	}
	for _, c := range cases {
		pow2, ok := bf16F16Span(c.data)
		if ok != c.ok || ok && pow2 != c.pow2 {
			t.Errorf("%s: pow2 %d ok %v, want %d %v", c.name, pow2, ok, c.pow2, c.ok)
		}
	}
}

// TestPackBF16: a BF16 matrix converted to F16 (values times 2^pow2)
// computes, through every MatMul path (one token, the tiles, the rows
// kernels, n up to 20), bitwise the products of its BF16 bytes, and
// RowF32 decodes the BF16 values; GGML arithmetic treats it as BF16.
func TestPackBF16(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no F16 kernels on this CPU")
	}
	pool := NewPool(2)
	defer pool.Close()
	rng := rand.New(rand.NewPCG(51, 52))
	for _, c := range []struct {
		rows, cols int
		tiny       bool // a few values near 1e-7: pow2 > 0
	}{{37, 256, true}, {48, 2048, true}, {19, 100, false}, {64, 264, true}} {
		t.Run(fmt.Sprintf("%dx%d", c.rows, c.cols), func(t *testing.T) {
			vals := randNormal(rng, c.rows*c.cols, 0.02)
			if c.tiny {
				for i := 0; i < len(vals); i += 97 {
					vals[i] *= 5e-6
				}
			} else { // magnitudes in [0.01, 0.05): F16 as they are
				for i := range vals {
					vals[i] = float32(math.Copysign(0.01+0.04*rng.Float64(), float64(vals[i])))
				}
			}
			data := make([]byte, 2*len(vals))
			if err := Quantize(ggml.TypeBF16, vals, data); err != nil {
				t.Fatal(err)
			}
			m, err := NewMatrix(ggml.TypeBF16, c.rows, c.cols, data)
			if err != nil {
				t.Fatal(err)
			}
			conv, ok := PackDecodeLayout(m, make([]byte, len(data)))
			if !ok || conv.Type != ggml.TypeF16 || !conv.FromBF16() || (conv.pow2 > 0) != c.tiny {
				t.Fatalf("not converted: ok %v type %s pow2 %d", ok, conv.Type, conv.pow2)
			}
			for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 13, 20} {
				x := randNormal(rng, n*c.cols, 1)
				want, got := make([]float32, n*c.rows), make([]float32, n*c.rows)
				pool.MatMul(want, m, x, n)
				pool.MatMul(got, conv, x, n)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n %d: element %d (token %d row %d): converted %g, BF16 %g", n, i, i/c.rows, i%c.rows, got[i], want[i])
					}
				}
				var g GGMLMat
				g.MatMul(pool, got, conv, x, n)
				if i := firstDiffF32(got, want); i >= 0 {
					t.Fatalf("n %d: GGML arithmetic differs at %d", n, i)
				}
			}
			row, ref := make([]float32, c.cols), make([]float32, c.cols)
			conv.RowF32(c.rows-1, row, nil)
			m.RowF32(c.rows-1, ref, nil)
			if i := firstDiffF32(row, ref); i >= 0 {
				t.Fatalf("RowF32 col %d: %g, BF16 %g", i, row[i], ref[i])
			}
		})
	}
}

func firstDiffF32(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestStoreRowF16SIMD: StoreRowF16 (VCVTPS2PH over whole groups of 8
// where there is AVX2, F32ToF16 for the rest) gives F32ToF16's bits for
// every kind of value: ties, subnormals, underflow, overflow to infinity,
// infinities, NaNs and signed zeros, at every offset of the tail.
func TestStoreRowF16SIMD(t *testing.T) {
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65519.996, 65520, -65520, 1e9,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00123),
		5.96e-8, 2.98e-8, 2.97e-8, 6.1e-5, -6.09e-5, 1.0009765625, 1.00048828125, 1.00146484375, 3.0517578e-5}
	r := rand.New(rand.NewPCG(21, 22))
	src := append([]float32(nil), special...)
	for range 4000 {
		src = append(src, math.Float32frombits(r.Uint32()))
	}
	for n := 0; n <= len(src); n += 1 + n/3 {
		got := make([]uint16, n)
		StoreRowF16(got, src[:n])
		for i, x := range src[:n] {
			if want := F32ToF16(x); got[i] != want {
				t.Fatalf("n=%d value %d (%g, %#x): %#04x, F32ToF16 %#04x", n, i, x, math.Float32bits(x), got[i], want)
			}
		}
	}
}
