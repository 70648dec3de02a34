package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"oengine/ggml"
)

// Writer builds a GGUF v3 file in memory order: header, metadata in the
// order keys were first set, tensor infos in the order tensors were added,
// padding, then each tensor's data at an aligned offset.
type Writer struct {
	align   uint64
	keys    []string
	kv      map[string]Value
	tensors []*TensorInfo // Offset is assigned by layout
	names   map[string]bool
	err     error // first error of a Set* helper that cannot return one
}

// NewWriter returns an empty writer with the default alignment (32).
func NewWriter() *Writer {
	return &Writer{align: DefaultAlignment, kv: map[string]Value{}, names: map[string]bool{}}
}

// SetAlignment sets the data alignment and records it as general.alignment
// (UINT32). A value that is not a power of two makes the write fail.
func (w *Writer) SetAlignment(a uint64) {
	if a == 0 || a&(a-1) != 0 || a > maxAlignment {
		w.setErr(fmt.Errorf("gguf: alignment %d is not a power of two in [1, %d]", a, maxAlignment))
		return
	}
	w.align = a
	w.setErr(w.Set(KeyAlignment, Uint32Value(uint32(a))))
}

func (w *Writer) setErr(err error) {
	if w.err == nil && err != nil {
		w.err = err
	}
}

// Set stores a metadata value. Replacing a key keeps its first position.
// Setting general.alignment also sets the data alignment.
func (w *Writer) Set(key string, v Value) error {
	if err := checkValue(v, 0); err != nil {
		return fmt.Errorf("gguf: key %q: %w", key, err)
	}
	if key == KeyAlignment {
		a, ok := v.AsUint()
		if v.Type() != ValueUint32 || !ok || a == 0 || a&(a-1) != 0 || a > maxAlignment {
			return fmt.Errorf("gguf: %s must be a UINT32 power of two, got %s %s", KeyAlignment, v.Type(), v)
		}
		w.align = a
	}
	if _, ok := w.kv[key]; !ok {
		w.keys = append(w.keys, key)
	}
	w.kv[key] = v
	return nil
}

// checkValue refuses values the reader would refuse (unknown types, arrays
// nested too deep, inconsistent array storage).
func checkValue(v Value, depth int) error {
	if !v.typ.valid() {
		return fmt.Errorf("unknown value type %d", uint32(v.typ))
	}
	if v.typ != ValueArray {
		return nil
	}
	if depth+1 > maxArrayDepth {
		return fmt.Errorf("arrays nest deeper than %d", maxArrayDepth)
	}
	switch {
	case !v.elem.valid():
		return fmt.Errorf("unknown array element type %d", uint32(v.elem))
	case v.elem == ValueString && len(v.strs) != v.n,
		v.elem == ValueArray && len(v.arr) != v.n,
		v.elem.size() > 0 && len(v.raw) != v.n*v.elem.size():
		return fmt.Errorf("inconsistent array of %d %s", v.n, v.elem)
	}
	for _, e := range v.arr {
		if err := checkValue(e, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// SetString and the other typed setters store one value; an invalid key
// value (only possible for general.alignment) makes the write fail.
func (w *Writer) SetString(key, v string)           { w.setErr(w.Set(key, StringValue(v))) }
func (w *Writer) SetUint32(key string, v uint32)    { w.setErr(w.Set(key, Uint32Value(v))) }
func (w *Writer) SetInt32(key string, v int32)      { w.setErr(w.Set(key, Int32Value(v))) }
func (w *Writer) SetUint64(key string, v uint64)    { w.setErr(w.Set(key, Uint64Value(v))) }
func (w *Writer) SetFloat32(key string, v float32)  { w.setErr(w.Set(key, Float32Value(v))) }
func (w *Writer) SetBool(key string, v bool)        { w.setErr(w.Set(key, BoolValue(v))) }
func (w *Writer) SetStrings(key string, v []string) { w.setErr(w.Set(key, StringsValue(v))) }
func (w *Writer) SetFloat32s(key string, v []float32) {
	w.setErr(w.Set(key, Float32sValue(v)))
}
func (w *Writer) SetInt32s(key string, v []int32) { w.setErr(w.Set(key, Int32sValue(v))) }

// AddTensor appends a tensor. dims are in ggml order (dims[0] innermost).
// data must hold exactly the tensor's bytes; it is referenced, not copied,
// until the file is written.
func (w *Writer) AddTensor(name string, t ggml.Type, dims []uint64, data []byte) error {
	if w.names[name] {
		return fmt.Errorf("gguf: duplicate tensor %q", name)
	}
	if !t.Supported() {
		return fmt.Errorf("gguf: tensor %q: %w %s", name, ggml.ErrUnsupportedType, t)
	}
	if len(dims) < 1 || len(dims) > maxDims {
		return fmt.Errorf("gguf: tensor %q has %d dimensions, want 1..%d", name, len(dims), maxDims)
	}
	for i, d := range dims {
		if d == 0 {
			return fmt.Errorf("gguf: tensor %q dimension %d is zero", name, i)
		}
	}
	size, err := tensorBytes(t, dims)
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if uint64(len(data)) != size {
		return fmt.Errorf("gguf: tensor %q (%s %v) needs %d bytes, got %d", name, t, dims, size, len(data))
	}
	w.names[name] = true
	w.tensors = append(w.tensors, &TensorInfo{Name: name, Type: t, Dims: append([]uint64(nil), dims...), Data: data})
	return nil
}

// layout assigns aligned data offsets and returns the data section's size.
func (w *Writer) layout() uint64 {
	var off uint64
	for _, t := range w.tensors {
		off = alignUp(off, w.align)
		t.Offset = off
		off += uint64(len(t.Data))
	}
	return off
}

// WriteTo writes the whole file to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.layout()
	cw := &countWriter{w: bufio.NewWriterSize(out, 1<<16)}
	e := &encoder{w: cw}
	e.u32(magic)
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.keys)))
	for _, k := range w.keys {
		e.str(k)
		v := w.kv[k]
		e.u32(uint32(v.typ))
		e.value(v)
	}
	for _, t := range w.tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(t.Offset)
	}
	if len(w.tensors) > 0 { // like llama.cpp, a metadata-only file ends unpadded
		e.pad(w.align)
	}
	dataStart := cw.n
	for _, t := range w.tensors {
		e.padTo(uint64(dataStart) + t.Offset)
		e.write(t.Data)
	}
	if e.err == nil {
		e.err = cw.w.Flush()
	}
	if e.err != nil {
		return cw.n, fmt.Errorf("gguf: write: %w", e.err)
	}
	return cw.n, nil
}

// Bytes returns the encoded file.
func (w *Writer) Bytes() ([]byte, error) {
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFile writes the file to a temporary file in the same directory and
// renames it over path, so readers never see a partial file. The file gets
// mode 0644 (a model file is data others may read), not the temporary
// file's 0600.
func (w *Writer) WriteFile(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if _, err = w.WriteTo(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

type countWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// encoder writes little-endian GGUF fields, keeping the first error.
type encoder struct {
	w   *countWriter
	err error
	buf [8]byte
}

func (e *encoder) write(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
}

func (e *encoder) u32(x uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], x)
	e.write(e.buf[:4])
}

func (e *encoder) u64(x uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], x)
	e.write(e.buf[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		_, e.err = e.w.w.WriteString(s)
		e.w.n += int64(len(s))
	}
}

var zeros [256]byte

// padTo writes zero bytes up to absolute offset off.
func (e *encoder) padTo(off uint64) {
	for e.err == nil && uint64(e.w.n) < off {
		n := min(off-uint64(e.w.n), uint64(len(zeros)))
		e.write(zeros[:n])
	}
}

func (e *encoder) pad(align uint64) { e.padTo(alignUp(uint64(e.w.n), align)) }

func (e *encoder) value(v Value) {
	switch v.typ {
	case ValueString:
		e.str(v.str)
	case ValueArray:
		e.u32(uint32(v.elem))
		e.u64(uint64(v.n))
		switch v.elem {
		case ValueString:
			for _, s := range v.strs {
				e.str(s)
			}
		case ValueArray:
			for _, a := range v.arr {
				e.value(a)
			}
		default:
			e.write(v.raw)
		}
	default:
		putScalar(e.buf[:], v.typ, v.bits)
		e.write(e.buf[:v.typ.size()])
	}
}
