package gguf

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"sync"

	"oengine/ggml"
)

// File is a parsed GGUF file. Tensor data are views into the mapped file (or
// the buffer given to Parse): they stay valid until Close.
type File struct {
	Version   uint32
	Alignment uint64
	Tensors   []*TensorInfo // in file order

	keys       []string // metadata keys in file order
	kv         map[string]Value
	byName     map[string]*TensorInfo
	size       int64 // file bytes
	dataOffset int64 // start of the data section in the file

	mu       sync.Mutex   // protects unmap, claimed
	unmap    func() error // releases the mapping; nil for Parse or once closed
	writable bool         // read by OpenCopy: private, writable memory
	claimed  bool         // ClaimWritable handed the tensor bytes out
}

// TensorInfo describes one tensor.
type TensorInfo struct {
	Name string
	// Dims are in ggml order: Dims[0] is the innermost (contiguous)
	// dimension, i.e. the columns of a row-major matrix; a [rows][cols]
	// weight has Dims = [cols, rows].
	Dims   []uint64
	Type   ggml.Type
	Offset uint64 // relative to the start of the data section
	Data   []byte // zero-copy view of exactly the tensor's bytes
}

// Elements returns the product of the dimensions.
func (t *TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Rows returns the number of rows: the product of all dimensions but the
// first.
func (t *TensorInfo) Rows() uint64 {
	n := uint64(1)
	for _, d := range t.Dims[1:] {
		n *= d
	}
	return n
}

// Open maps the file at path read-only and parses it. Tensor data are never
// copied; call Close to unmap. A model split into several files (split.go)
// is opened through its first file.
func Open(path string) (*File, error) {
	return open(path, func(fh *os.File, size int, _ func(done, total int64)) ([]byte, func() error, error) {
		return mapFile(fh, size)
	}, false, nil)
}

// OpenCopy reads the file at path into private memory advised for
// transparent huge pages (Linux) and parses it; call Close to free it. The
// weights no longer share the page cache (a second copy while the page
// cache keeps the file), but the forward pass reads them through 2 MiB
// pages instead of 4 KiB ones, which is faster when every token streams all
// weights (decode). Elsewhere it reads the file as Open does.
func OpenCopy(path string) (*File, error) { return OpenCopyProgress(path, nil) }

// OpenCopyProgress is OpenCopy that calls progress (when not nil) with the
// bytes read so far and the total as the copy advances (over all the files
// of a split model, splitTotal).
func OpenCopyProgress(path string, progress func(done, total int64)) (*File, error) {
	return open(path, copyFile, true, progress)
}

// ClaimWritable hands the tensor bytes of a file read by OpenCopy to one
// caller, which may rewrite them in place (a model converting weights to
// its own layout), and reports whether it did: false for mapped or parsed
// files and after the first claim. Once claimed, the tensor bytes need not
// be the file's bytes any more (Claimed).
func (f *File) ClaimWritable() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.writable || f.claimed || f.unmap == nil {
		return false
	}
	f.claimed = true
	return true
}

// Claimed reports whether ClaimWritable handed the tensor bytes out.
func (f *File) Claimed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claimed
}

// loadFunc brings size bytes of fh into memory (mapped or copied),
// reporting progress, and returns them with the function that releases
// them.
type loadFunc func(fh *os.File, size int, progress func(done, total int64)) ([]byte, func() error, error)

// open loads and parses the file at path and, when it is the first file of
// a split model, the other files too (openSplits).
func open(path string, load loadFunc, writable bool, progress func(done, total int64)) (*File, error) {
	total := splitTotal(path)
	f, err := openOne(path, load, offsetProgress(progress, 0, total))
	if err != nil {
		return nil, err
	}
	f.writable = writable
	if err := f.openSplits(path, load, progress, total); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// openOne loads and parses one file.
func openOne(path string, load loadFunc, progress func(done, total int64)) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s is not a regular file", path)
	}
	if st.Size() == 0 {
		return nil, fmt.Errorf("gguf: %s is empty", path)
	}
	if uint64(st.Size()) > uint64(math.MaxInt) {
		return nil, fmt.Errorf("gguf: %s is too large (%d bytes)", path, st.Size())
	}
	data, unmap, err := load(fh, int(st.Size()), progress)
	if err != nil {
		return nil, fmt.Errorf("gguf: load %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		_ = unmap()
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	f.unmap = unmap
	return f, nil
}

// Close unmaps the file and clears every tensor's Data. It is safe to call
// twice and on a File from Parse (where it only clears Data).
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.Tensors {
		t.Data = nil
	}
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap = nil
	if err != nil {
		return fmt.Errorf("gguf: unmap: %w", err)
	}
	return nil
}

// Parse validates and parses a GGUF v2 or v3 image held in memory. Tensor
// Data are views into data; metadata is copied.
func Parse(data []byte) (*File, error) {
	d := &decoder{b: data}
	f := &File{size: int64(len(data)), Alignment: DefaultAlignment}
	if err := f.header(d); err != nil {
		return nil, err
	}
	tensorCount, err := d.u64("tensor count")
	if err != nil {
		return nil, err
	}
	kvCount, err := d.u64("metadata count")
	if err != nil {
		return nil, err
	}
	rem := uint64(d.remaining())
	if kvCount > rem/minKVBytes || tensorCount > rem/minTensorBytes ||
		kvCount*minKVBytes+tensorCount*minTensorBytes > rem {
		return nil, d.errf(8, "%d tensors and %d metadata entries cannot fit in the %d bytes that remain", tensorCount, kvCount, rem)
	}
	if kvCount > maxKV || tensorCount > maxTensors {
		return nil, d.errf(8, "%d tensors and %d metadata entries exceed the limits (%d, %d)", tensorCount, kvCount, maxTensors, maxKV)
	}
	if err := f.metadata(d, int(kvCount)); err != nil {
		return nil, err
	}
	if err := f.tensorInfos(d, int(tensorCount)); err != nil {
		return nil, err
	}
	if err := f.bindData(d); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) header(d *decoder) error {
	if len(d.b) < 4 {
		return d.errf(0, "file of %d bytes is too short for a GGUF header", len(d.b))
	}
	m, _ := d.u32("magic")
	if m != magic {
		return d.errf(0, "bad magic %q, want \"GGUF\"", d.b[:4])
	}
	v, err := d.u32("version")
	if err != nil {
		return err
	}
	switch {
	case v == 2 || v == 3:
		f.Version = v
		return nil
	case v == 1:
		return d.errf(4, "GGUF version 1 is not supported (re-convert the model)")
	case bits.ReverseBytes32(v) == 2 || bits.ReverseBytes32(v) == 3:
		return d.errf(4, "big-endian GGUF is not supported")
	}
	return d.errf(4, "unsupported GGUF version %d", v)
}

func (f *File) metadata(d *decoder, n int) error {
	f.keys = make([]string, 0, n)
	f.kv = make(map[string]Value, n)
	for i := 0; i < n; i++ {
		start := d.off
		key, err := d.str(fmt.Sprintf("metadata key %d", i))
		if err != nil {
			return err
		}
		if _, dup := f.kv[key]; dup {
			return d.errf(start, "duplicate metadata key %q", key)
		}
		t, err := d.u32("value type of " + key)
		if err != nil {
			return err
		}
		v, err := d.value(ValueType(t), 0)
		if err != nil {
			return fmt.Errorf("%w (key %q)", err, key)
		}
		f.keys = append(f.keys, key)
		f.kv[key] = v
	}
	if v, ok := f.kv[KeyAlignment]; ok {
		a, ok := v.AsUint()
		if v.Type() != ValueUint32 || !ok || a == 0 || a&(a-1) != 0 || a > maxAlignment {
			return d.errf(d.off, "%s = %s (%s) is not a UINT32 power of two in [1, %d]", KeyAlignment, v, v.Type(), maxAlignment)
		}
		f.Alignment = a
	}
	return nil
}

func (f *File) tensorInfos(d *decoder, n int) error {
	f.Tensors = make([]*TensorInfo, 0, n)
	f.byName = make(map[string]*TensorInfo, n)
	for i := 0; i < n; i++ {
		t, err := f.tensorInfo(d, i)
		if err != nil {
			return err
		}
		f.Tensors = append(f.Tensors, t)
		f.byName[t.Name] = t
	}
	return nil
}

func (f *File) tensorInfo(d *decoder, i int) (*TensorInfo, error) {
	start := d.off
	name, err := d.str(fmt.Sprintf("tensor %d name", i))
	if err != nil {
		return nil, err
	}
	if _, dup := f.byName[name]; dup {
		return nil, d.errf(start, "duplicate tensor %q", name)
	}
	nd, err := d.u32("dimension count of " + name)
	if err != nil {
		return nil, err
	}
	if nd < 1 || nd > maxDims {
		return nil, d.errf(d.off-4, "tensor %q has %d dimensions, want 1..%d", name, nd, maxDims)
	}
	t := &TensorInfo{Name: name, Dims: make([]uint64, nd)}
	for j := range t.Dims {
		if t.Dims[j], err = d.u64("dimensions of " + name); err != nil {
			return nil, err
		}
		if t.Dims[j] == 0 {
			return nil, d.errf(d.off-8, "tensor %q dimension %d is zero", name, j)
		}
	}
	typeOff := d.off
	ty, err := d.u32("type of " + name)
	if err != nil {
		return nil, err
	}
	t.Type = ggml.Type(ty)
	if t.Offset, err = d.u64("offset of " + name); err != nil {
		return nil, err
	}
	switch {
	case !t.Type.Known():
		return nil, &FormatError{Offset: int64(typeOff), Msg: fmt.Sprintf("tensor %q has unknown type id %d", name, ty), Err: ggml.ErrUnsupportedType}
	case !t.Type.Supported():
		return nil, &FormatError{Offset: int64(typeOff), Msg: fmt.Sprintf("tensor %q has unsupported type %s (id %d)", name, t.Type, ty), Err: ggml.ErrUnsupportedType}
	}
	if _, err := tensorBytes(t.Type, t.Dims); err != nil {
		return nil, d.errf(start, "tensor %q: %v", name, err)
	}
	if t.Offset%f.Alignment != 0 {
		return nil, d.errf(d.off-8, "tensor %q offset %d is not a multiple of the alignment %d", name, t.Offset, f.Alignment)
	}
	return t, nil
}

// tensorBytes returns the bytes a tensor of type t and dims occupies, with
// overflow checks; dims[0] must be a multiple of the block size.
func tensorBytes(t ggml.Type, dims []uint64) (uint64, error) {
	be := uint64(t.BlockElems())
	if be == 0 {
		return 0, fmt.Errorf("unknown type %s", t)
	}
	if dims[0]%be != 0 {
		return 0, fmt.Errorf("row length %d is not a multiple of the %s block size %d", dims[0], t, be)
	}
	overflow, size := bits.Mul64(dims[0]/be, uint64(t.BlockBytes()))
	elems := dims[0]
	for _, dim := range dims[1:] {
		var hi, hi2 uint64
		hi, size = bits.Mul64(size, dim)
		hi2, elems = bits.Mul64(elems, dim)
		overflow |= hi | hi2
	}
	if overflow != 0 || size > math.MaxInt64 || elems > math.MaxInt64 {
		return 0, fmt.Errorf("dimensions %v overflow", dims)
	}
	return size, nil
}

// bindData locates the data section and points each tensor's Data at its
// bytes.
func (f *File) bindData(d *decoder) error {
	infoEnd := uint64(d.off)
	start := alignUp(infoEnd, f.Alignment)
	f.dataOffset = int64(start)
	if start > uint64(len(d.b)) {
		if len(f.Tensors) == 0 { // metadata-only files may omit the padding
			f.dataOffset = int64(len(d.b))
			return nil
		}
		return d.errf(d.off, "truncated before the data section at offset %d", start)
	}
	section := uint64(len(d.b)) - start
	for _, t := range f.Tensors {
		size, _ := tensorBytes(t.Type, t.Dims) // checked in tensorInfo
		if t.Offset > section || size > section-t.Offset {
			return d.errf(int(infoEnd), "tensor %q (%d bytes at data offset %d) ends past the data section (%d bytes)", t.Name, size, t.Offset, section)
		}
		lo := start + t.Offset
		t.Data = d.b[lo : lo+size : lo+size]
	}
	return f.checkOverlap(int(infoEnd))
}

// checkOverlap refuses tensors whose bytes overlap (writers lay them out one
// after another).
func (f *File) checkOverlap(off int) error {
	byOff := slices.Clone(f.Tensors)
	slices.SortFunc(byOff, func(a, b *TensorInfo) int { return cmp.Compare(a.Offset, b.Offset) })
	for i := 1; i < len(byOff); i++ {
		prev, t := byOff[i-1], byOff[i]
		if t.Offset < prev.Offset+uint64(len(prev.Data)) {
			return &FormatError{Offset: int64(off), Msg: fmt.Sprintf("tensor %q at data offset %d overlaps tensor %q (%d bytes at %d)", t.Name, t.Offset, prev.Name, len(prev.Data), prev.Offset)}
		}
	}
	return nil
}

func alignUp(x, a uint64) uint64 {
	return (x + a - 1) &^ (a - 1)
}

// Size returns the file's size in bytes (a split model's: all its files).
func (f *File) Size() int64 { return f.size }

// DataOffset returns the file offset where the data section starts.
func (f *File) DataOffset() int64 { return f.dataOffset }

// Keys returns the metadata keys in file order (a new slice).
func (f *File) Keys() []string { return append([]string(nil), f.keys...) }

// Value returns the metadata value for key.
func (f *File) Value(key string) (Value, bool) {
	v, ok := f.kv[key]
	return v, ok
}

// String returns a STRING value.
func (f *File) String(key string) (string, bool) { return f.kv[key].AsString() }

// Uint returns any integer value that is not negative.
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.kv[key]
	if !ok {
		return 0, false
	}
	return v.AsUint()
}

// Int returns any integer value that fits an int64.
func (f *File) Int(key string) (int64, bool) {
	v, ok := f.kv[key]
	if !ok {
		return 0, false
	}
	return v.AsInt()
}

// Float returns a FLOAT32 or FLOAT64 value, or an integer converted.
func (f *File) Float(key string) (float64, bool) {
	v, ok := f.kv[key]
	if !ok {
		return 0, false
	}
	return v.AsFloat()
}

// Bool returns a BOOL value.
func (f *File) Bool(key string) (bool, bool) { return f.kv[key].AsBool() }

// Strings returns an ARRAY of STRING. The slice is shared: do not modify it.
func (f *File) Strings(key string) ([]string, bool) { return f.kv[key].AsStrings() }

// Float32s returns an ARRAY of FLOAT32 (or FLOAT64, converted) as a new slice.
func (f *File) Float32s(key string) ([]float32, bool) { return f.kv[key].AsFloat32s() }

// Int32s returns an ARRAY of an integer type whose elements all fit an
// int32, as a new slice.
func (f *File) Int32s(key string) ([]int32, bool) { return f.kv[key].AsInt32s() }

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	t, ok := f.byName[name]
	return t, ok
}
