package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"

	"oengine/ggml"
)

// Limits on hostile input. Every count read from a file is also checked
// against the bytes that remain before anything is allocated for it.
const (
	maxArrayDepth = 8 // arrays of arrays nest at most this deep
	// maxNested bounds the elements of all arrays of arrays in a file
	// (no model uses them; each costs a Value).
	maxNested = 1 << 16
	// maxKV and maxTensors bound the counts far above any real model (tens
	// of keys, a few thousand tensors) so that a file of tiny entries cannot
	// make the parser allocate many times its size.
	maxKV      = 1 << 16
	maxTensors = 1 << 20
	maxDims    = 4 // GGML_MAX_DIMS
	// maxAlignment bounds general.alignment so that padding stays sane.
	maxAlignment = 1 << 30
	// DefaultAlignment is the data alignment when general.alignment is absent.
	DefaultAlignment = 32
	// KeyAlignment is the metadata key that sets the data alignment.
	KeyAlignment = "general.alignment"

	magic = 0x46554747 // "GGUF" little-endian

	minKVBytes     = 8 + 4 + 1         // key length, value type, 1-byte value
	minTensorBytes = 8 + 4 + 8 + 4 + 8 // name length, n_dims, one dim, type, offset
)

// ErrMalformed is matched (errors.Is) by every error about a file that does
// not follow the GGUF format or breaks a limit.
var ErrMalformed = errors.New("gguf: malformed file")

// FormatError describes a malformed or unsupported file. Offset is the byte
// offset in the file where the problem was found.
type FormatError struct {
	Offset int64
	Msg    string
	Err    error // an underlying sentinel such as ggml.ErrUnsupportedType, or nil
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("gguf: %s (at offset %d)", e.Msg, e.Offset)
}

// Unwrap returns the underlying sentinel, if any.
func (e *FormatError) Unwrap() error { return e.Err }

// Is makes every FormatError match ErrMalformed, except those that wrap
// ggml.ErrUnsupportedType (a valid file with a tensor type oengine cannot use).
func (e *FormatError) Is(target error) bool {
	return target == ErrMalformed && !errors.Is(e.Err, ggml.ErrUnsupportedType)
}

// decoder reads little-endian GGUF fields from b, tracking the offset.
type decoder struct {
	b      []byte
	off    int
	nested int // elements of arrays of arrays read so far
}

func (d *decoder) errf(off int, format string, args ...any) error {
	return &FormatError{Offset: int64(off), Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

// need fails unless n more bytes are available.
func (d *decoder) need(n uint64, what string) error {
	if n > uint64(d.remaining()) {
		return d.errf(d.off, "truncated %s: need %d bytes, %d remain", what, n, d.remaining())
	}
	return nil
}

func (d *decoder) u8(what string) (uint8, error) {
	if err := d.need(1, what); err != nil {
		return 0, err
	}
	x := d.b[d.off]
	d.off++
	return x, nil
}

func (d *decoder) u32(what string) (uint32, error) {
	if err := d.need(4, what); err != nil {
		return 0, err
	}
	x := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return x, nil
}

func (d *decoder) u64(what string) (uint64, error) {
	if err := d.need(8, what); err != nil {
		return 0, err
	}
	x := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return x, nil
}

// bytes returns a view of the next n bytes.
func (d *decoder) bytes(n uint64, what string) ([]byte, error) {
	if err := d.need(n, what); err != nil {
		return nil, err
	}
	b := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return b, nil
}

// str reads a GGUF string: a uint64 length then that many bytes (copied).
func (d *decoder) str(what string) (string, error) {
	start := d.off
	n, err := d.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > uint64(d.remaining()) {
		return "", d.errf(start, "%s length %d exceeds the %d bytes that remain", what, n, d.remaining())
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s, nil
}

// value reads one metadata value of type t; depth counts enclosing arrays.
func (d *decoder) value(t ValueType, depth int) (Value, error) {
	start := d.off
	switch t {
	case ValueString:
		s, err := d.str("string")
		return Value{typ: ValueString, str: s}, err
	case ValueArray:
		return d.array(depth)
	case ValueBool:
		x, err := d.u8("bool")
		if err != nil {
			return Value{}, err
		}
		if x > 1 {
			return Value{}, d.errf(start, "bool value %d is neither 0 nor 1", x)
		}
		return Value{typ: ValueBool, bits: uint64(x)}, nil
	}
	sz := t.size()
	if sz == 0 {
		return Value{}, d.errf(start, "unknown value type %d", uint32(t))
	}
	b, err := d.bytes(uint64(sz), t.String())
	if err != nil {
		return Value{}, err
	}
	return scalarAt(t, b, 0), nil
}

// array reads an ARRAY body: element type, count, elements.
func (d *decoder) array(depth int) (Value, error) {
	start := d.off
	if depth+1 > maxArrayDepth {
		return Value{}, d.errf(start, "arrays nest deeper than %d", maxArrayDepth)
	}
	et, err := d.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Value{}, d.errf(start, "unknown array element type %d", et)
	}
	n, err := d.u64("array length")
	if err != nil {
		return Value{}, err
	}
	// Every element takes at least minSize bytes: refuse counts the rest of
	// the file cannot hold before allocating anything for them.
	if n > uint64(d.remaining()/elem.minSize()) {
		return Value{}, d.errf(start, "array of %d %s exceeds the %d bytes that remain", n, elem, d.remaining())
	}
	v := Value{typ: ValueArray, elem: elem, arrayData: &arrayData{n: int(n)}}
	switch elem {
	case ValueString:
		if v.strs, err = d.strings(int(n)); err != nil {
			return Value{}, err
		}
	case ValueArray:
		if d.nested += int(n); d.nested > maxNested {
			return Value{}, d.errf(start, "more than %d elements in arrays of arrays", maxNested)
		}
		v.arr = make([]Value, n)
		for i := range v.arr {
			if v.arr[i], err = d.array(depth + 1); err != nil {
				return Value{}, err
			}
		}
	default:
		b, err := d.bytes(n*uint64(elem.size()), "array data")
		if err != nil {
			return Value{}, err
		}
		if elem == ValueBool {
			for i, x := range b {
				if x > 1 {
					return Value{}, d.errf(d.off-len(b)+i, "bool array element %d is %d, neither 0 nor 1", i, x)
				}
			}
		}
		v.raw = append([]byte(nil), b...) // owned: must outlive an unmapped file
	}
	return v, nil
}

// strings reads n GGUF strings. A first pass validates every length; the
// strings then share one copy of the whole run (length prefixes included),
// so a vocabulary costs two allocations rather than one per token.
func (d *decoder) strings(n int) ([]string, error) {
	start := d.off
	for i := 0; i < n; i++ {
		off := d.off
		l, err := d.u64("array string length")
		if err != nil {
			return nil, err
		}
		if l > uint64(d.remaining()) {
			return nil, d.errf(off, "array string %d length %d exceeds the %d bytes that remain", i, l, d.remaining())
		}
		d.off += int(l)
	}
	run := string(d.b[start:d.off])
	out := make([]string, n)
	pos := 0
	for i := range out {
		l := int(binary.LittleEndian.Uint64(d.b[start+pos:]))
		out[i] = run[pos+8 : pos+8+l]
		pos += 8 + l
	}
	return out, nil
}
