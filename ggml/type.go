package ggml

import (
	"errors"
	"fmt"
	"strings"
)

// Type is a GGML tensor type id (llama.cpp numbering).
type Type uint32

// Tensor type ids, numbered as in ggml's enum ggml_type. Ids 4, 5 and 31-33,
// 36-38 were removed upstream and are unknown here.
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2_K    Type = 10
	TypeQ3_K    Type = 11
	TypeQ4_K    Type = 12
	TypeQ5_K    Type = 13
	TypeQ6_K    Type = 14
	TypeQ8_K    Type = 15
	TypeIQ2_XXS Type = 16
	TypeIQ2_XS  Type = 17
	TypeIQ3_XXS Type = 18
	TypeIQ1_S   Type = 19
	TypeIQ4_NL  Type = 20
	TypeIQ3_S   Type = 21
	TypeIQ2_S   Type = 22
	TypeIQ4_XS  Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1_M   Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39
)

// ErrUnsupportedType is wrapped by errors about tensor types that are unknown
// or that oengine cannot compute with.
var ErrUnsupportedType = errors.New("ggml: unsupported tensor type")

// typeInfo describes the block layout of one tensor type.
type typeInfo struct {
	name      string
	blockElem int  // elements per block
	blockSize int  // bytes per block
	supported bool // oengine reads and computes with it
}

// types is indexed by Type; unknown ids have an empty name. Block sizes follow ggml's type traits; those of
// unsupported types are kept so that errors and tools can still describe them.
var types = [...]typeInfo{
	TypeF32:     {"F32", 1, 4, true},
	TypeF16:     {"F16", 1, 2, true},
	TypeQ4_0:    {"Q4_0", 32, 18, true},  // f16 d, 16 bytes of nibbles
	TypeQ4_1:    {"Q4_1", 32, 20, true},  // f16 d, f16 m, 16 bytes of nibbles
	TypeQ5_0:    {"Q5_0", 32, 22, true},  // f16 d, 4 bytes high bits, 16 bytes nibbles
	TypeQ5_1:    {"Q5_1", 32, 24, true},  // f16 d, f16 m, 4 bytes high bits, 16 bytes nibbles
	TypeQ8_0:    {"Q8_0", 32, 34, true},  // f16 d, 32 int8
	TypeQ8_1:    {"Q8_1", 32, 36, false}, // f16 d, f16 s, 32 int8
	TypeQ2_K:    {"Q2_K", 256, 84, true},
	TypeQ3_K:    {"Q3_K", 256, 110, true},
	TypeQ4_K:    {"Q4_K", 256, 144, true},
	TypeQ5_K:    {"Q5_K", 256, 176, true},
	TypeQ6_K:    {"Q6_K", 256, 210, true},
	TypeQ8_K:    {"Q8_K", 256, 292, true}, // f32 d, 256 int8, 16 int16 sums
	TypeIQ2_XXS: {"IQ2_XXS", 256, 66, false},
	TypeIQ2_XS:  {"IQ2_XS", 256, 74, false},
	TypeIQ3_XXS: {"IQ3_XXS", 256, 98, false},
	TypeIQ1_S:   {"IQ1_S", 256, 50, false},
	TypeIQ4_NL:  {"IQ4_NL", 32, 18, true}, // f16 d, 16 bytes of nibbles indexing a level table
	TypeIQ3_S:   {"IQ3_S", 256, 110, false},
	TypeIQ2_S:   {"IQ2_S", 256, 82, false},
	TypeIQ4_XS:  {"IQ4_XS", 256, 136, true}, // f16 d, u16 + 4 bytes of 6-bit scales, 128 bytes of nibbles
	TypeI8:      {"I8", 1, 1, false},
	TypeI16:     {"I16", 1, 2, false},
	TypeI32:     {"I32", 1, 4, false},
	TypeI64:     {"I64", 1, 8, false},
	TypeF64:     {"F64", 1, 8, false},
	TypeIQ1_M:   {"IQ1_M", 256, 56, false},
	TypeBF16:    {"BF16", 1, 2, true},
	TypeTQ1_0:   {"TQ1_0", 256, 54, false},
	TypeTQ2_0:   {"TQ2_0", 256, 66, false},
	TypeMXFP4:   {"MXFP4", 32, 17, true}, // e8m0 scale, 16 bytes of E2M1 nibbles
}

// lookup returns the traits of t; ok is false for an unknown id.
func lookup(t Type) (typeInfo, bool) {
	if uint64(t) >= uint64(len(types)) || types[t].name == "" {
		return typeInfo{}, false
	}
	return types[t], true
}

// String returns the ggml name of the type ("F32", "Q4_K", ...), or
// "type(N)" for an unknown id.
func (t Type) String() string {
	if ti, ok := lookup(t); ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Known reports whether the id names a ggml type (supported or not).
func (t Type) Known() bool {
	_, ok := lookup(t)
	return ok
}

// Supported reports whether oengine can load and compute with tensors of
// this type.
func (t Type) Supported() bool { ti, _ := lookup(t); return ti.supported }

// BlockElems returns the number of elements per block (1 for F32, F16 and
// BF16, 32 for the legacy quants, 256 for the K-quants), or 0 for an unknown
// type.
func (t Type) BlockElems() int { ti, _ := lookup(t); return ti.blockElem }

// BlockBytes returns the number of bytes per block, or 0 for an unknown type.
func (t Type) BlockBytes() int { ti, _ := lookup(t); return ti.blockSize }

// RowBytes returns the bytes needed for n consecutive elements of this type.
// It fails when the type is unsupported, n is negative, n is not a multiple
// of BlockElems, or the size overflows int.
func (t Type) RowBytes(n int) (int, error) {
	ti, ok := lookup(t)
	if !ok || !ti.supported {
		return 0, fmt.Errorf("%w %s", ErrUnsupportedType, t)
	}
	if n < 0 {
		return 0, fmt.Errorf("ggml: negative element count %d", n)
	}
	if n%ti.blockElem != 0 {
		return 0, fmt.Errorf("ggml: %d elements is not a multiple of the %s block size %d", n, t, ti.blockElem)
	}
	blocks := n / ti.blockElem
	if blocks > maxInt/ti.blockSize {
		return 0, fmt.Errorf("ggml: %d elements of %s overflow", n, t)
	}
	return blocks * ti.blockSize, nil
}

const maxInt = int(^uint(0) >> 1)

// ParseType parses a type name such as "q4_0", "Q4_K" or "f16"
// (case-insensitive). It accepts every known type, supported or not.
func ParseType(s string) (Type, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	for t, ti := range types {
		if ti.name != "" && ti.name == u {
			return Type(t), nil
		}
	}
	return 0, fmt.Errorf("ggml: unknown tensor type %q", s)
}
