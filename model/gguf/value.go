package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is a GGUF metadata value type.
type ValueType uint32

// Metadata value types, numbered as in the GGUF specification.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL",
	"STRING", "ARRAY", "UINT64", "INT64", "FLOAT64",
}

// String returns the specification's name of the type ("UINT32", ...).
func (t ValueType) String() string {
	if t.valid() {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("valuetype(%d)", uint32(t))
}

func (t ValueType) valid() bool { return uint64(t) < uint64(len(valueTypeNames)) }

// size returns the encoded size of a fixed-size scalar, 0 for STRING, ARRAY
// and unknown types.
func (t ValueType) size() int {
	switch t {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one encoded value of this type can take:
// a STRING needs its 8-byte length, an ARRAY its 4-byte type and 8-byte count.
func (t ValueType) minSize() int {
	switch t {
	case ValueString:
		return 8
	case ValueArray:
		return 12
	}
	return t.size()
}

func (t ValueType) isInt() bool {
	switch t {
	case ValueUint8, ValueInt8, ValueUint16, ValueInt16, ValueUint32, ValueInt32, ValueUint64, ValueInt64:
		return true
	}
	return false
}

func (t ValueType) signed() bool {
	return t == ValueInt8 || t == ValueInt16 || t == ValueInt32 || t == ValueInt64
}

// Value is one metadata value. Scalars keep their bits; arrays of fixed-size
// scalars keep their little-endian encoding (owned, never a view into a
// mapped file), arrays of strings a []string, and arrays of arrays nested
// Values. The zero Value is UINT8 0.
type Value struct {
	typ        ValueType
	elem       ValueType // ARRAY: element type
	bits       uint64    // integers (signed ones sign-extended), bool 0/1, FLOAT32 as float32 bits, FLOAT64 as float64 bits
	str        string    // STRING
	*arrayData           // ARRAY only (non-nil exactly when typ == ValueArray)
}

// arrayData holds an array's elements; exactly one slice is used.
type arrayData struct {
	n    int      // element count
	raw  []byte   // fixed-size scalars: n*elem.size() bytes, little-endian
	strs []string // STRING elements
	arr  []Value  // ARRAY elements
}

// Type returns the value's type.
func (v Value) Type() ValueType { return v.typ }

// ElemType returns the element type of an ARRAY (meaningless otherwise).
func (v Value) ElemType() ValueType { return v.elem }

// Len returns the number of elements of an ARRAY, 0 for scalars.
func (v Value) Len() int {
	if v.typ != ValueArray {
		return 0
	}
	return v.n
}

// Index returns element i of an ARRAY as a Value; ok is false when v is not
// an array or i is out of range.
func (v Value) Index(i int) (Value, bool) {
	if v.typ != ValueArray || i < 0 || i >= v.n {
		return Value{}, false
	}
	switch {
	case v.elem == ValueString:
		return StringValue(v.strs[i]), true
	case v.elem == ValueArray:
		return v.arr[i], true
	default:
		return scalarAt(v.elem, v.raw, i), true
	}
}

// scalarAt decodes element i of a fixed-size scalar array.
func scalarAt(t ValueType, raw []byte, i int) Value {
	sz := t.size()
	b := raw[i*sz : (i+1)*sz]
	var bits uint64
	switch t {
	case ValueUint8, ValueBool:
		bits = uint64(b[0])
	case ValueInt8:
		bits = uint64(int64(int8(b[0])))
	case ValueUint16:
		bits = uint64(binary.LittleEndian.Uint16(b))
	case ValueInt16:
		bits = uint64(int64(int16(binary.LittleEndian.Uint16(b))))
	case ValueUint32:
		bits = uint64(binary.LittleEndian.Uint32(b))
	case ValueInt32:
		bits = uint64(int64(int32(binary.LittleEndian.Uint32(b))))
	case ValueFloat32:
		bits = uint64(binary.LittleEndian.Uint32(b))
	case ValueUint64, ValueInt64:
		bits = binary.LittleEndian.Uint64(b)
	case ValueFloat64:
		bits = binary.LittleEndian.Uint64(b)
	}
	return Value{typ: t, bits: bits}
}

// AsString returns a STRING's text.
func (v Value) AsString() (string, bool) {
	if v.typ != ValueString {
		return "", false
	}
	return v.str, true
}

// AsUint returns any integer value that is not negative.
func (v Value) AsUint() (uint64, bool) {
	if !v.typ.isInt() || (v.typ.signed() && int64(v.bits) < 0) {
		return 0, false
	}
	return v.bits, true
}

// AsInt returns any integer value that fits an int64.
func (v Value) AsInt() (int64, bool) {
	if !v.typ.isInt() || (v.typ == ValueUint64 && v.bits > math.MaxInt64) {
		return 0, false
	}
	return int64(v.bits), true
}

// AsFloat returns a FLOAT32 or FLOAT64, or an integer converted.
func (v Value) AsFloat() (float64, bool) {
	switch {
	case v.typ == ValueFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case v.typ == ValueFloat64:
		return math.Float64frombits(v.bits), true
	case v.typ == ValueUint64:
		return float64(v.bits), true
	case v.typ.isInt():
		return float64(int64(v.bits)), true
	}
	return 0, false
}

// AsBool returns a BOOL.
func (v Value) AsBool() (bool, bool) {
	if v.typ != ValueBool {
		return false, false
	}
	return v.bits != 0, true
}

// AsStrings returns an ARRAY of STRING. The slice is shared: do not modify it.
func (v Value) AsStrings() ([]string, bool) {
	if v.typ != ValueArray || v.elem != ValueString {
		return nil, false
	}
	return v.strs, true
}

// AsBytes returns an ARRAY of UINT8 or INT8 as a new byte slice (a blob
// such as a SentencePiece vocabulary's precompiled_charsmap).
func (v Value) AsBytes() ([]byte, bool) {
	if v.typ != ValueArray || (v.elem != ValueUint8 && v.elem != ValueInt8) {
		return nil, false
	}
	return append([]byte(nil), v.raw[:v.n]...), true
}

// AsFloat32s returns an ARRAY of FLOAT32 (or FLOAT64, converted) as a new slice.
func (v Value) AsFloat32s() ([]float32, bool) {
	if v.typ != ValueArray || (v.elem != ValueFloat32 && v.elem != ValueFloat64) {
		return nil, false
	}
	out := make([]float32, v.n)
	for i := range out {
		if v.elem == ValueFloat32 {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(v.raw[4*i:]))
		} else {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(v.raw[8*i:])))
		}
	}
	return out, true
}

// AsInt32s returns an ARRAY of any integer type whose every element fits an
// int32, as a new slice.
func (v Value) AsInt32s() ([]int32, bool) {
	if v.typ != ValueArray || !v.elem.isInt() {
		return nil, false
	}
	out := make([]int32, v.n)
	for i := range out {
		e := scalarAt(v.elem, v.raw, i)
		x, ok := e.AsInt()
		if !ok || x < math.MinInt32 || x > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

// AsValues returns the elements of any ARRAY as Values (a new slice).
func (v Value) AsValues() ([]Value, bool) {
	if v.typ != ValueArray {
		return nil, false
	}
	out := make([]Value, v.n)
	for i := range out {
		out[i], _ = v.Index(i)
	}
	return out, true
}

// String formats the value for people: scalars as Go would print them,
// strings quoted, arrays as [a, b, ...] with at most 8 elements shown.
func (v Value) String() string {
	switch {
	case v.typ == ValueString:
		return strconv.Quote(v.str)
	case v.typ == ValueBool:
		return strconv.FormatBool(v.bits != 0)
	case v.typ == ValueFloat32:
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(v.bits))), 'g', -1, 32)
	case v.typ == ValueFloat64:
		return strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 64)
	case v.typ == ValueUint64 || (v.typ.isInt() && !v.typ.signed()):
		return strconv.FormatUint(v.bits, 10)
	case v.typ.isInt():
		return strconv.FormatInt(int64(v.bits), 10)
	case v.typ == ValueArray:
		const show = 8
		var sb strings.Builder
		sb.WriteString("[")
		for i := 0; i < v.n && i < show; i++ {
			if i > 0 {
				sb.WriteString(", ")
			}
			e, _ := v.Index(i)
			sb.WriteString(e.String())
		}
		if v.n > show {
			fmt.Fprintf(&sb, ", ... (%d %s)", v.n, v.elem)
		}
		sb.WriteString("]")
		return sb.String()
	}
	return v.typ.String()
}

// Scalar constructors.

func Uint8Value(x uint8) Value     { return Value{typ: ValueUint8, bits: uint64(x)} }
func Int8Value(x int8) Value       { return Value{typ: ValueInt8, bits: uint64(int64(x))} }
func Uint16Value(x uint16) Value   { return Value{typ: ValueUint16, bits: uint64(x)} }
func Int16Value(x int16) Value     { return Value{typ: ValueInt16, bits: uint64(int64(x))} }
func Uint32Value(x uint32) Value   { return Value{typ: ValueUint32, bits: uint64(x)} }
func Int32Value(x int32) Value     { return Value{typ: ValueInt32, bits: uint64(int64(x))} }
func Uint64Value(x uint64) Value   { return Value{typ: ValueUint64, bits: x} }
func Int64Value(x int64) Value     { return Value{typ: ValueInt64, bits: uint64(x)} }
func StringValue(s string) Value   { return Value{typ: ValueString, str: s} }
func Float64Value(x float64) Value { return Value{typ: ValueFloat64, bits: math.Float64bits(x)} }

// Float32Value makes a FLOAT32 (its bits are kept exactly).
func Float32Value(x float32) Value {
	return Value{typ: ValueFloat32, bits: uint64(math.Float32bits(x))}
}

// BoolValue makes a BOOL.
func BoolValue(b bool) Value {
	v := Value{typ: ValueBool}
	if b {
		v.bits = 1
	}
	return v
}

// StringsValue makes an ARRAY of STRING (the slice is copied).
func StringsValue(s []string) Value {
	return Value{typ: ValueArray, elem: ValueString, arrayData: &arrayData{n: len(s), strs: append([]string(nil), s...)}}
}

// BytesValue makes an ARRAY of UINT8 (the slice is copied).
func BytesValue(b []byte) Value {
	return Value{typ: ValueArray, elem: ValueUint8, arrayData: &arrayData{n: len(b), raw: append([]byte(nil), b...)}}
}

// Float32sValue makes an ARRAY of FLOAT32.
func Float32sValue(x []float32) Value {
	raw := make([]byte, 4*len(x))
	for i, f := range x {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	return Value{typ: ValueArray, elem: ValueFloat32, arrayData: &arrayData{n: len(x), raw: raw}}
}

// Int32sValue makes an ARRAY of INT32.
func Int32sValue(x []int32) Value {
	raw := make([]byte, 4*len(x))
	for i, e := range x {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(e))
	}
	return Value{typ: ValueArray, elem: ValueInt32, arrayData: &arrayData{n: len(x), raw: raw}}
}

// ArrayValue makes an ARRAY whose elements all have type elem. Arrays of
// arrays may nest up to the reader's depth limit.
func ArrayValue(elem ValueType, vals []Value) (Value, error) {
	if !elem.valid() {
		return Value{}, fmt.Errorf("gguf: unknown array element type %d", uint32(elem))
	}
	v := Value{typ: ValueArray, elem: elem, arrayData: &arrayData{n: len(vals)}}
	for i, e := range vals {
		if e.typ != elem {
			return Value{}, fmt.Errorf("gguf: array element %d is %s, want %s", i, e.typ, elem)
		}
	}
	switch elem {
	case ValueString:
		v.strs = make([]string, len(vals))
		for i, e := range vals {
			v.strs[i] = e.str
		}
	case ValueArray:
		if d := depth(vals); d+1 > maxArrayDepth {
			return Value{}, fmt.Errorf("gguf: arrays nest deeper than %d", maxArrayDepth)
		}
		v.arr = append([]Value(nil), vals...)
	default:
		sz := elem.size()
		v.raw = make([]byte, sz*len(vals))
		for i, e := range vals {
			putScalar(v.raw[i*sz:], elem, e.bits)
		}
	}
	return v, nil
}

// depth returns the deepest array nesting among vals (1 for an array of
// scalars).
func depth(vals []Value) int {
	d := 0
	for _, e := range vals {
		if e.typ == ValueArray {
			dd := 1
			if e.elem == ValueArray {
				dd += depth(e.arr)
			}
			d = max(d, dd)
		}
	}
	return d
}

// putScalar encodes a scalar's bits as elem into b.
func putScalar(b []byte, t ValueType, bits uint64) {
	switch t.size() {
	case 1:
		b[0] = byte(bits)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(bits))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(bits))
	case 8:
		binary.LittleEndian.PutUint64(b, bits)
	}
}
