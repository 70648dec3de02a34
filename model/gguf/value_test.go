package gguf

import (
	"math"
	"slices"
	"testing"
)

func TestValueAccessors(t *testing.T) {
	i64s, _ := ArrayValue(ValueInt64, []Value{Int64Value(1), Int64Value(math.MaxInt32 + 1)})
	u8s, _ := ArrayValue(ValueUint8, []Value{Uint8Value(255), Uint8Value(0)})
	f64s, _ := ArrayValue(ValueFloat64, []Value{Float64Value(0.5), Float64Value(-2)})
	cases := []struct {
		name  string
		v     Value
		uint  any // uint64 or nil when AsUint must fail
		int   any
		float any
		str   string
	}{
		{"uint8", Uint8Value(200), uint64(200), int64(200), 200.0, "200"},
		{"int8 negative", Int8Value(-1), nil, int64(-1), -1.0, "-1"},
		{"int16", Int16Value(-300), nil, int64(-300), -300.0, "-300"},
		{"uint64 max", Uint64Value(math.MaxUint64), uint64(math.MaxUint64), nil, float64(math.MaxUint64), "18446744073709551615"},
		{"int64 min", Int64Value(math.MinInt64), nil, int64(math.MinInt64), float64(math.MinInt64), "-9223372036854775808"},
		{"float32", Float32Value(0.25), nil, nil, 0.25, "0.25"},
		{"float64", Float64Value(1e300), nil, nil, 1e300, "1e+300"},
		{"bool", BoolValue(true), nil, nil, nil, "true"},
		{"string", StringValue("a\"b"), nil, nil, nil, `"a\"b"`},
		{"array", Int32sValue([]int32{1, 2}), nil, nil, nil, "[1, 2]"},
		{"long array", Float32sValue(make([]float32, 9)), nil, nil, nil, "[0, 0, 0, 0, 0, 0, 0, 0, ... (9 FLOAT32)]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u, ok := c.v.AsUint()
			if (c.uint == nil) == ok || (ok && u != c.uint.(uint64)) {
				t.Errorf("AsUint = %d, %v", u, ok)
			}
			i, ok := c.v.AsInt()
			if (c.int == nil) == ok || (ok && i != c.int.(int64)) {
				t.Errorf("AsInt = %d, %v", i, ok)
			}
			f, ok := c.v.AsFloat()
			if (c.float == nil) == ok || (ok && f != c.float.(float64)) {
				t.Errorf("AsFloat = %v, %v", f, ok)
			}
			if s := c.v.String(); s != c.str {
				t.Errorf("String = %s, want %s", s, c.str)
			}
		})
	}
	if _, ok := i64s.AsInt32s(); ok {
		t.Error("AsInt32s accepted an element beyond int32")
	}
	if x, ok := u8s.AsInt32s(); !ok || !slices.Equal(x, []int32{255, 0}) {
		t.Errorf("AsInt32s(uint8) = %v", x)
	}
	if x, ok := f64s.AsFloat32s(); !ok || !slices.Equal(x, []float32{0.5, -2}) {
		t.Errorf("AsFloat32s(float64) = %v", x)
	}
	if _, ok := u8s.Index(2); ok {
		t.Error("Index out of range succeeded")
	}
	if _, ok := Uint8Value(1).Index(0); ok {
		t.Error("Index of a scalar succeeded")
	}
	if Uint8Value(1).Len() != 0 || u8s.Len() != 2 {
		t.Error("Len")
	}
	if vals, ok := StringsValue([]string{"x", "y"}).AsValues(); !ok || len(vals) != 2 || vals[1].str != "y" {
		t.Errorf("AsValues = %v", vals)
	}
	var zero Value
	if _, ok := zero.AsStrings(); ok {
		t.Error("zero Value is an array")
	}
}

func TestArrayValueDepth(t *testing.T) {
	v, err := ArrayValue(ValueUint8, nil)
	must(t, err)
	for i := 1; i < maxArrayDepth; i++ {
		if v, err = ArrayValue(ValueArray, []Value{v}); err != nil {
			t.Fatalf("depth %d: %v", i+1, err)
		}
	}
	if _, err := ArrayValue(ValueArray, []Value{v}); err == nil {
		t.Error("array deeper than the limit accepted")
	}
	if _, err := ArrayValue(ValueType(42), nil); err == nil {
		t.Error("unknown element type accepted")
	}
}
