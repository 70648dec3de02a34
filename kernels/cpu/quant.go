// Package cpu holds oengine's CPU kernels: GGML block formats (quantize,
// dequantize), dot products and matrix-vector products over quantized
// weights, a persistent worker pool, and the element-wise and attention
// operations of the forward pass. Every optimised kernel has a plain Go
// reference twin in this package and a test comparing the two.
package cpu

import (
	"errors"
	"fmt"
	"math"

	"oengine/ggml"
)

// ErrType is wrapped by errors about tensor types this package cannot
// encode or decode.
var ErrType = errors.New("cpu: unsupported tensor type")

// blockCodec decodes and encodes one block of a type.
type blockCodec struct {
	elems, bytes int
	dequant      func(b []byte, y []float32)
	quant        func(x []float32, b []byte) // nil: no encoder
}

var codecs = map[ggml.Type]blockCodec{
	ggml.TypeF32:    {1, 4, dequantF32, quantF32},
	ggml.TypeF16:    {1, 2, func(b []byte, y []float32) { y[0] = F16ToF32(le16(b)) }, func(x []float32, b []byte) { put16(b, F32ToF16(x[0])) }},
	ggml.TypeBF16:   {1, 2, func(b []byte, y []float32) { y[0] = BF16ToF32(le16(b)) }, func(x []float32, b []byte) { put16(b, F32ToBF16(x[0])) }},
	ggml.TypeQ4_0:   {qk, 18, dequantQ4_0, quantQ4_0},
	ggml.TypeQ4_1:   {qk, 20, dequantQ4_1, quantQ4_1},
	ggml.TypeQ5_0:   {qk, 22, dequantQ5_0, quantQ5_0},
	ggml.TypeQ5_1:   {qk, 24, dequantQ5_1, quantQ5_1},
	ggml.TypeQ8_0:   {qk, 34, dequantQ8_0, quantQ8_0},
	ggml.TypeQ2_K:   {qkK, 84, dequantQ2_K, quantQ2_K},
	ggml.TypeQ3_K:   {qkK, 110, dequantQ3_K, quantQ3_K},
	ggml.TypeQ4_K:   {qkK, 144, dequantQ4_K, quantQ4_K},
	ggml.TypeQ5_K:   {qkK, 176, dequantQ5_K, quantQ5_K},
	ggml.TypeQ6_K:   {qkK, 210, dequantQ6_K, quantQ6_K},
	ggml.TypeQ8_K:   {qkK, 292, dequantQ8_K, quantQ8_K},
	ggml.TypeIQ4_NL: {qk, 18, dequantIQ4_NL, quantIQ4_NL},
	ggml.TypeIQ4_XS: {qkK, 136, dequantIQ4_XS, quantIQ4_XS},
	ggml.TypeMXFP4:  {qk, 17, dequantMXFP4, quantMXFP4},
}

func dequantF32(b []byte, y []float32) {
	y[0] = math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}

func quantF32(x []float32, b []byte) {
	v := math.Float32bits(x[0])
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// codecFor returns the codec of t and checks that n elements are whole blocks
// that fit in have bytes.
func codecFor(t ggml.Type, n, have int) (blockCodec, error) {
	c, ok := codecs[t]
	if !ok {
		return c, fmt.Errorf("%w %s", ErrType, t)
	}
	if n%c.elems != 0 {
		return c, fmt.Errorf("cpu: %d elements is not a multiple of the %s block size %d", n, t, c.elems)
	}
	if need := n / c.elems * c.bytes; have < need {
		return c, fmt.Errorf("cpu: %d %s elements need %d bytes, have %d", n, t, need, have)
	}
	return c, nil
}

// Dequantize decodes len(dst) elements of type t from src, which must hold
// at least that many whole blocks. It is the plain reference decoder.
func Dequantize(t ggml.Type, src []byte, dst []float32) error {
	c, err := codecFor(t, len(dst), len(src))
	if err != nil {
		return err
	}
	switch t {
	case ggml.TypeF16:
		tab := f16Table()
		for i := range dst {
			dst[i] = tab[le16(src[2*i:])]
		}
		return nil
	case ggml.TypeBF16:
		for i := range dst {
			dst[i] = BF16ToF32(le16(src[2*i:]))
		}
		return nil
	}
	for i, o := 0, 0; i < len(dst); i, o = i+c.elems, o+c.bytes {
		c.dequant(src[o:o+c.bytes], dst[i:i+c.elems])
	}
	return nil
}

// CanQuantize reports whether Quantize can encode type t.
func CanQuantize(t ggml.Type) bool {
	c, ok := codecs[t]
	return ok && c.quant != nil
}

// Quantize encodes all of src as type t into dst, which must have room for
// len(src)/BlockElems whole blocks.
func Quantize(t ggml.Type, src []float32, dst []byte) error {
	c, err := codecFor(t, len(src), len(dst))
	if err != nil {
		return err
	}
	if c.quant == nil {
		return fmt.Errorf("%w: no encoder for %s", ErrType, t)
	}
	for i, o := 0, 0; i < len(src); i, o = i+c.elems, o+c.bytes {
		c.quant(src[i:i+c.elems], dst[o:o+c.bytes])
	}
	return nil
}

// DotRef returns the dot product of one encoded row of type t with x,
// accumulated in float64 over the exactly decoded weights (no activation
// quantization). It is the reference twin of every dot kernel; it returns
// NaN when the type is unsupported or row is too short for len(x) elements.
func DotRef(t ggml.Type, row []byte, x []float32) float64 {
	c, err := codecFor(t, len(x), len(row))
	if err != nil {
		return math.NaN()
	}
	var buf [qkK]float32
	var sum float64
	for i, o := 0, 0; i < len(x); i, o = i+c.elems, o+c.bytes {
		w := buf[:c.elems]
		c.dequant(row[o:o+c.bytes], w)
		for j, v := range w {
			sum += float64(v) * float64(x[i+j])
		}
	}
	return sum
}
