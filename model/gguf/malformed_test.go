package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"oengine/ggml"
)

// raw hand-encodes GGUF fields, including ones the Writer refuses to write.
type raw struct{ bytes.Buffer }

func (r *raw) u32(x uint32) *raw { binary.Write(&r.Buffer, binary.LittleEndian, x); return r }
func (r *raw) u64(x uint64) *raw { binary.Write(&r.Buffer, binary.LittleEndian, x); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.WriteString(s); return r }

// header writes magic, version 3 and the counts.
func header(tensors, kvs uint64) *raw {
	r := &raw{}
	r.WriteString("GGUF")
	return r.u32(3).u64(tensors).u64(kvs)
}

// kvU32 writes one UINT32 key/value pair.
func (r *raw) kvU32(key string, v uint32) *raw { return r.str(key).u32(uint32(ValueUint32)).u32(v) }

// tensor writes one tensor info.
func (r *raw) tensor(name string, dims []uint64, t ggml.Type, off uint64) *raw {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	return r.u32(uint32(t)).u64(off)
}

// data pads to a 32-byte boundary then appends n bytes of tensor data.
func (r *raw) data(n int) *raw {
	for r.Len()%32 != 0 {
		r.WriteByte(0)
	}
	r.Write(make([]byte, n))
	return r
}

func (r *raw) bytes() []byte { return append([]byte(nil), r.Bytes()...) }

// nestedArrays encodes depth arrays of arrays around an empty UINT8 array.
func nestedArrays(r *raw, depth int) *raw {
	for i := 0; i < depth; i++ {
		r.u32(uint32(ValueArray)).u64(1)
	}
	return r.u32(uint32(ValueUint8)).u64(0)
}

type malformedCase struct {
	name string
	data []byte
	want string // substring of the error
	// unsupported marks errors that wrap ggml.ErrUnsupportedType instead of
	// matching ErrMalformed.
	unsupported bool
}

func malformedCases() []malformedCase {
	valid := func() *raw { return header(1, 1).kvU32("a", 1).tensor("t", []uint64{4}, ggml.TypeF32, 0) }
	bigEndian := &raw{}
	bigEndian.WriteString("GGUF")
	binary.Write(bigEndian, binary.BigEndian, uint32(3))
	bigEndian.u64(0).u64(0)
	v1 := &raw{}
	v1.WriteString("GGUF")
	v1.u32(1).u32(0).u32(0)
	v4 := header(0, 0)
	binary.LittleEndian.PutUint32(v4.Bytes()[4:], 4)
	return []malformedCase{
		{name: "empty", data: nil, want: "too short"},
		{name: "three bytes", data: []byte("GGU"), want: "too short"},
		{name: "bad magic", data: append([]byte("GGML"), header(0, 0).Bytes()[4:]...), want: "bad magic"},
		{name: "version 1", data: v1.bytes(), want: "version 1"},
		{name: "version 4", data: v4.bytes(), want: "unsupported GGUF version 4"},
		{name: "big endian", data: bigEndian.bytes(), want: "big-endian"},
		{name: "truncated counts", data: header(0, 0).bytes()[:12], want: "truncated tensor count"},
		{name: "huge tensor count", data: header(math.MaxUint64, 0).bytes(), want: "cannot fit"},
		{name: "huge kv count", data: header(0, 1<<62).bytes(), want: "cannot fit"},
		{name: "too many kvs", data: append(header(0, maxKV+1).bytes(), make([]byte, 13*(maxKV+1))...), want: "exceed the limits"},
		{name: "huge key length", data: header(0, 1).u64(math.MaxUint64).u32(0).u32(0).bytes(), want: "metadata key 0 length"},
		{name: "huge string value", data: header(0, 1).str("k").u32(uint32(ValueString)).u64(1 << 60).bytes(), want: "string length"},
		{name: "huge array", data: header(0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueUint32)).u64(1 << 61).bytes(), want: "array of"},
		{name: "huge string array", data: header(0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueString)).u64(1 << 40).u64(0).bytes(), want: "array of"},
		{name: "array data truncated", data: header(0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueUint64)).u64(2).u64(0).u32(0).bytes(), want: "array of 2 UINT64"},
		{name: "nested array bomb", data: nestedArrays(header(0, 1).str("k").u32(uint32(ValueArray)), maxArrayDepth).bytes(), want: "nest deeper"},
		{name: "unknown value type", data: header(0, 1).str("k").u32(13).u32(0).bytes(), want: "unknown value type 13"},
		{name: "unknown array type", data: header(0, 1).str("k").u32(uint32(ValueArray)).u32(99).u64(0).bytes(), want: "unknown array element type 99"},
		{name: "bool 2", data: header(0, 1).str("k").u32(uint32(ValueBool)).u32(2).bytes(), want: "neither 0 nor 1"},
		{name: "duplicate key", data: header(0, 2).kvU32("k", 1).kvU32("k", 2).bytes(), want: `duplicate metadata key "k"`},
		{name: "alignment zero", data: header(0, 1).kvU32(KeyAlignment, 0).bytes(), want: "general.alignment"},
		{name: "alignment 48", data: header(0, 1).kvU32(KeyAlignment, 48).bytes(), want: "power of two"},
		{name: "alignment string", data: header(0, 1).str(KeyAlignment).u32(uint32(ValueString)).str("32").bytes(), want: "UINT32"},
		{name: "zero dims", data: header(1, 0).tensor("t", nil, ggml.TypeF32, 0).data(16).bytes(), want: `tensor "t" has 0 dimensions`},
		{name: "five dims", data: header(1, 0).tensor("t", []uint64{1, 1, 1, 1, 1}, ggml.TypeF32, 0).data(16).bytes(), want: "5 dimensions"},
		{name: "zero dim", data: header(1, 0).tensor("t", []uint64{4, 0}, ggml.TypeF32, 0).data(16).bytes(), want: "dimension 1 is zero"},
		{name: "dim overflow", data: header(1, 0).tensor("t", []uint64{1 << 32, 1 << 32}, ggml.TypeF32, 0).data(16).bytes(), want: "overflow"},
		{name: "elements overflow", data: header(1, 0).tensor("t", []uint64{1 << 40, 1 << 30}, ggml.TypeF32, 0).data(16).bytes(), want: "overflow"},
		{name: "partial block", data: header(1, 0).tensor("t", []uint64{16}, ggml.TypeQ4_0, 0).data(64).bytes(), want: "not a multiple of the Q4_0 block size"},
		{name: "unknown type", data: header(1, 0).tensor("t", []uint64{4}, ggml.Type(4), 0).data(16).bytes(), want: `tensor "t" has unknown type id 4`, unsupported: true},
		{name: "huge type id", data: header(1, 0).tensor("t", []uint64{4}, ggml.Type(math.MaxUint32), 0).data(16).bytes(), want: "unknown type id 4294967295", unsupported: true},
		{name: "unsupported type", data: header(1, 0).tensor("t", []uint64{256}, ggml.TypeIQ2_XS, 0).data(74).bytes(), want: `tensor "t" has unsupported type IQ2_XS (id 17)`, unsupported: true},
		{name: "duplicate tensor", data: header(2, 0).tensor("t", []uint64{4}, ggml.TypeF32, 0).tensor("t", []uint64{4}, ggml.TypeF32, 32).data(64).bytes(), want: `duplicate tensor "t"`},
		{name: "overlapping tensors", data: header(2, 0).tensor("a", []uint64{16}, ggml.TypeF32, 0).tensor("b", []uint64{4}, ggml.TypeF32, 32).data(64).bytes(), want: `tensor "b" at data offset 32 overlaps tensor "a"`},
		{name: "same offset", data: header(2, 0).tensor("a", []uint64{4}, ggml.TypeF32, 32).tensor("b", []uint64{4}, ggml.TypeF32, 32).data(64).bytes(), want: "overlaps"},
		{name: "misaligned offset", data: header(1, 0).tensor("t", []uint64{4}, ggml.TypeF32, 4).data(64).bytes(), want: "not a multiple of the alignment"},
		{name: "offset out of bounds", data: header(1, 0).tensor("t", []uint64{4}, ggml.TypeF32, 64).data(64).bytes(), want: "ends past the data section"},
		{name: "size out of bounds", data: header(1, 0).tensor("t", []uint64{32}, ggml.TypeF32, 0).data(64).bytes(), want: "ends past the data section"},
		{name: "offset overflow", data: header(1, 0).tensor("t", []uint64{32}, ggml.TypeF32, math.MaxUint64-31).data(64).bytes(), want: "ends past the data section"},
		{name: "no data section", data: valid().bytes(), want: "truncated before the data section"},
		{name: "data truncated", data: valid().data(15).bytes(), want: "ends past the data section"},
		{name: "truncated tensor info", data: header(1, 0).str(strings.Repeat("x", 20)).u32(2).u64(4).bytes(), want: "truncated dimensions"},
	}
}

func TestParseMalformed(t *testing.T) {
	for _, c := range malformedCases() {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse(c.data)
			if err == nil {
				t.Fatalf("Parse succeeded: %d keys, %d tensors", len(f.keys), len(f.Tensors))
			}
			if !strings.HasPrefix(err.Error(), "gguf: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
			if c.unsupported {
				if !errors.Is(err, ggml.ErrUnsupportedType) || errors.Is(err, ErrMalformed) {
					t.Errorf("error %v: want ggml.ErrUnsupportedType only", err)
				}
			} else if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not match ErrMalformed", err)
			}
		})
	}
}

// TestParseValidVariants checks files the malformed cases border on.
func TestParseValidVariants(t *testing.T) {
	cases := []struct {
		name string
		data []byte
	}{
		{"no tensors no padding", header(0, 1).kvU32("a", 1).bytes()},
		{"one tensor", header(1, 1).kvU32("a", 1).tensor("t", []uint64{4}, ggml.TypeF32, 0).data(16).bytes()},
		{"nested at the limit", nestedArrays(header(0, 1).str("k").u32(uint32(ValueArray)), maxArrayDepth-1).bytes()},
		{"alignment 1", header(1, 1).kvU32(KeyAlignment, 1).tensor("t", []uint64{4}, ggml.TypeF32, 3).data(32).bytes()},
		{"trailing bytes", header(1, 0).tensor("t", []uint64{4}, ggml.TypeF32, 32).data(100).bytes()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Parse(c.data); err != nil {
				t.Fatal(err)
			}
		})
	}
	v2 := header(1, 0).tensor("t", []uint64{4}, ggml.TypeF32, 0).data(16).bytes()
	binary.LittleEndian.PutUint32(v2[4:], 2)
	f, err := Parse(v2)
	if err != nil || f.Version != 2 {
		t.Fatalf("v2: %v", err)
	}
}

// TestParseEveryTruncation cuts a valid file at every byte: each prefix must
// fail cleanly.
func TestParseEveryTruncation(t *testing.T) {
	b, err := sampleWriter(t).Bytes()
	must(t, err)
	for n := 0; n < len(b); n++ {
		if _, err := Parse(b[:n]); err == nil {
			t.Fatalf("prefix of %d/%d bytes parsed", n, len(b))
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatalf("prefix %d: %v does not match ErrMalformed", n, err)
		}
	}
}
