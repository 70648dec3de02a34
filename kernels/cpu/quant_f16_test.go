package cpu

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// f16Positives lists the float64 values of the finite non-negative F16 bit
// patterns 0x0000..0x7bff (increasing) for the brute-force reference.
func f16Positives() []float64 {
	v := make([]float64, 0x7c00)
	for h := range v {
		e, m := h>>10, float64(h&0x3ff)
		if e == 0 {
			v[h] = m * math.Exp2(-24)
		} else {
			v[h] = (1 + m/1024) * math.Exp2(float64(e-15))
		}
	}
	return v
}

// refF32ToF16 rounds f to nearest, ties to even, by searching the table.
func refF32ToF16(pos []float64, f float32) uint16 {
	sign := uint16(0)
	a := float64(f)
	if math.Signbit(a) {
		sign, a = 0x8000, -a
	}
	// Beyond max (65504) + half an ulp (16) rounds to Inf.
	if a >= 65520 {
		return sign | 0x7c00
	}
	i := sort.SearchFloat64s(pos, a) // pos[i] >= a
	if i == len(pos) {
		return sign | 0x7bff // in (65504, 65520)
	}
	if pos[i] == a {
		return sign | uint16(i)
	}
	lo, hi := i-1, i
	dl, dh := a-pos[lo], pos[hi]-a
	switch {
	case dl < dh:
		return sign | uint16(lo)
	case dh < dl:
		return sign | uint16(hi)
	case lo%2 == 0:
		return sign | uint16(lo)
	}
	return sign | uint16(hi)
}

func TestF16Conversions(t *testing.T) {
	pos := f16Positives()
	// Widening is exact and narrowing inverts it for every non-NaN pattern.
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			if !math.IsNaN(float64(f)) {
				t.Fatalf("%#04x: NaN expected, got %g", h, f)
			}
			continue
		}
		if h&0x7fff < 0x7c00 {
			want := pos[h&0x7fff]
			if h&0x8000 != 0 {
				want = -want
			}
			if float64(f) != want {
				t.Fatalf("F16ToF32(%#04x) = %g, want %g", h, f, want)
			}
		}
		if back := F32ToF16(f); back != uint16(h) {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, back)
		}
	}
	cases := []struct {
		name string
		f    float32
	}{
		{"zero", 0}, {"neg zero", float32(math.Copysign(0, -1))}, {"one", 1},
		{"max", 65504}, {"round to max", 65519.99}, {"round to inf", 65520}, {"huge", 1e30},
		{"min subnormal", float32(math.Exp2(-24))}, {"half min subnormal tie", float32(math.Exp2(-25))},
		{"just above tie", math.Nextafter32(float32(math.Exp2(-25)), 1)}, {"tiny", 1e-30},
		{"tie to even up", 1 + 3*float32(math.Exp2(-11))}, {"tie to even down", 1 + float32(math.Exp2(-11))},
		{"largest subnormal boundary", float32(math.Exp2(-14)) - float32(math.Exp2(-25))},
	}
	for _, c := range cases {
		if got, want := F32ToF16(c.f), refF32ToF16(pos, c.f); got != want {
			t.Errorf("%s: F32ToF16(%g) = %#04x, want %#04x", c.name, c.f, got, want)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200000; i++ {
		// Random bit patterns whose magnitude is in the F16 range and beyond.
		f := math.Float32frombits(rng.Uint32()&0x8fffffff | uint32(rng.IntN(40)+97)<<23)
		if got, want := F32ToF16(f), refF32ToF16(pos, f); got != want {
			t.Fatalf("F32ToF16(%g) = %#04x, want %#04x", f, got, want)
		}
	}
	if F32ToF16(float32(math.Inf(-1))) != 0xfc00 || F32ToF16(float32(math.NaN()))&0x7fff <= 0x7c00 {
		t.Error("Inf/NaN narrowing")
	}
}

func TestBF16Conversions(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 200000; i++ {
		f := math.Float32frombits(rng.Uint32())
		b := F32ToBF16(f)
		if math.IsNaN(float64(f)) {
			if !math.IsNaN(float64(BF16ToF32(b))) {
				t.Fatalf("NaN %#08x narrowed to %#04x", math.Float32bits(f), b)
			}
			continue
		}
		// The two candidates are truncation and truncation+1 ulp.
		lo := uint16(math.Float32bits(f) >> 16)
		d0 := math.Abs(float64(BF16ToF32(lo)) - float64(f))
		next := float64(BF16ToF32(lo + 1))
		if math.IsInf(next, 0) { // overflow: Inf sits where 2^128 would
			next = math.Copysign(math.Exp2(128), next)
		}
		d1 := math.Abs(next - float64(f))
		want := lo
		if d1 < d0 || (d1 == d0 && lo&1 == 1) {
			want = lo + 1
		}
		if b != want {
			t.Fatalf("F32ToBF16(%g) = %#04x, want %#04x", f, b, want)
		}
		if BF16ToF32(b) != math.Float32frombits(uint32(b)<<16) {
			t.Fatal("BF16ToF32 not exact")
		}
	}
}
