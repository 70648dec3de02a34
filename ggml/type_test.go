package ggml

import (
	"errors"
	"testing"
)

func TestTypeTable(t *testing.T) {
	cases := []struct {
		t         Type
		name      string
		elems     int
		bytes     int
		supported bool
		rowOf256  int
	}{
		{TypeF32, "F32", 1, 4, true, 1024},
		{TypeF16, "F16", 1, 2, true, 512},
		{TypeBF16, "BF16", 1, 2, true, 512},
		{TypeQ4_0, "Q4_0", 32, 18, true, 144},
		{TypeQ4_1, "Q4_1", 32, 20, true, 160},
		{TypeQ5_0, "Q5_0", 32, 22, true, 176},
		{TypeQ5_1, "Q5_1", 32, 24, true, 192},
		{TypeQ8_0, "Q8_0", 32, 34, true, 272},
		{TypeQ2_K, "Q2_K", 256, 84, true, 84},
		{TypeQ3_K, "Q3_K", 256, 110, true, 110},
		{TypeQ4_K, "Q4_K", 256, 144, true, 144},
		{TypeQ5_K, "Q5_K", 256, 176, true, 176},
		{TypeQ6_K, "Q6_K", 256, 210, true, 210},
		{TypeQ8_K, "Q8_K", 256, 292, true, 292},
		{TypeQ8_1, "Q8_1", 32, 36, false, 0},
		{TypeIQ2_XXS, "IQ2_XXS", 256, 66, false, 0},
		{TypeIQ4_XS, "IQ4_XS", 256, 136, true, 136},
		{TypeIQ4_NL, "IQ4_NL", 32, 18, true, 144},
		{TypeIQ3_S, "IQ3_S", 256, 110, false, 0},
		{TypeI32, "I32", 1, 4, false, 0},
		{TypeF64, "F64", 1, 8, false, 0},
		{TypeMXFP4, "MXFP4", 32, 17, true, 136},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.t.String() != c.name || c.t.BlockElems() != c.elems || c.t.BlockBytes() != c.bytes ||
				c.t.Supported() != c.supported || !c.t.Known() {
				t.Errorf("%d: got %s %d %d %v", uint32(c.t), c.t, c.t.BlockElems(), c.t.BlockBytes(), c.t.Supported())
			}
			rb, err := c.t.RowBytes(256)
			if c.supported && (err != nil || rb != c.rowOf256) {
				t.Errorf("RowBytes(256) = %d, %v; want %d", rb, err, c.rowOf256)
			}
			if !c.supported && !errors.Is(err, ErrUnsupportedType) {
				t.Errorf("RowBytes of unsupported type: %v", err)
			}
			p, err := ParseType(c.name)
			if err != nil || p != c.t {
				t.Errorf("ParseType(%q) = %v, %v", c.name, p, err)
			}
		})
	}
}

func TestTypeUnknown(t *testing.T) {
	for _, id := range []Type{4, 5, 31, 36, 40, 1 << 31} {
		if id.Known() || id.Supported() || id.BlockElems() != 0 || id.BlockBytes() != 0 {
			t.Errorf("type %d looks known", uint32(id))
		}
		if _, err := id.RowBytes(32); err == nil {
			t.Errorf("RowBytes of type %d succeeded", uint32(id))
		}
	}
	if s := Type(4).String(); s != "type(4)" {
		t.Errorf("String = %q", s)
	}
}

func TestParseTypeSpellings(t *testing.T) {
	cases := []struct {
		in   string
		want Type
		ok   bool
	}{
		{"q4_0", TypeQ4_0, true},
		{"Q4_K", TypeQ4_K, true},
		{"f16", TypeF16, true},
		{" bf16 ", TypeBF16, true},
		{"iq2_xxs", TypeIQ2_XXS, true},
		{"q4_k_m", 0, false},
		{"", 0, false},
		{"type(4)", 0, false},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseType(c.in)
			if (err == nil) != c.ok || (c.ok && got != c.want) {
				t.Errorf("ParseType(%q) = %v, %v", c.in, got, err)
			}
		})
	}
}

func TestRowBytesErrors(t *testing.T) {
	cases := []struct {
		name string
		t    Type
		n    int
	}{
		{"partial Q4_0 block", TypeQ4_0, 33},
		{"partial K block", TypeQ6_K, 128},
		{"negative", TypeF32, -4},
		{"overflow", TypeF32, maxInt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if n, err := c.t.RowBytes(c.n); err == nil {
				t.Errorf("RowBytes(%d) = %d", c.n, n)
			}
		})
	}
	if n, err := TypeQ4_K.RowBytes(0); err != nil || n != 0 {
		t.Errorf("RowBytes(0) = %d, %v", n, err)
	}
}
