package gguf

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"oengine/ggml"
)

// sampleWriter builds a small file with every value type and a few tensors.
func sampleWriter(t testing.TB) *Writer {
	t.Helper()
	w := NewWriter()
	w.SetString("general.architecture", "llama")
	w.SetUint32("llama.block_count", 2)
	w.SetInt32("neg", -7)
	w.SetUint64("big", math.MaxUint64)
	w.SetFloat32("eps", 1e-5)
	w.SetBool("flag", true)
	w.SetStrings("tokenizer.ggml.tokens", []string{"<s>", "", "héllo", "\x00"})
	w.SetFloat32s("scores", []float32{0, -1.5, float32(math.Inf(1))})
	w.SetInt32s("types", []int32{1, 2, -3})
	must(t, w.Set("u8", Uint8Value(200)))
	must(t, w.Set("i8", Int8Value(-100)))
	must(t, w.Set("u16", Uint16Value(60000)))
	must(t, w.Set("i16", Int16Value(-30000)))
	must(t, w.Set("i64", Int64Value(math.MinInt64)))
	must(t, w.Set("f64", Float64Value(math.Pi)))
	inner1, err := ArrayValue(ValueUint8, []Value{Uint8Value(1), Uint8Value(2)})
	must(t, err)
	inner2, err := ArrayValue(ValueUint8, nil)
	must(t, err)
	nested, err := ArrayValue(ValueArray, []Value{inner1, inner2})
	must(t, err)
	must(t, w.Set("nested", nested))
	bools, err := ArrayValue(ValueBool, []Value{BoolValue(true), BoolValue(false)})
	must(t, err)
	must(t, w.Set("bools", bools))
	w.SetUint32("llama.block_count", 3) // replaces, keeps position

	f32 := make([]byte, 4*8*3)
	for i := range f32 {
		f32[i] = byte(i)
	}
	must(t, w.AddTensor("a", ggml.TypeF32, []uint64{8, 3}, f32))
	must(t, w.AddTensor("b", ggml.TypeQ8_0, []uint64{32}, bytes.Repeat([]byte{7}, 34)))
	must(t, w.AddTensor("c", ggml.TypeQ4_K, []uint64{256, 1, 1, 2}, bytes.Repeat([]byte{9}, 288)))
	return w
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWriterRoundTrip(t *testing.T) {
	w := sampleWriter(t)
	b, err := w.Bytes()
	must(t, err)
	f, err := Parse(b)
	must(t, err)
	wantKeys := []string{"general.architecture", "llama.block_count", "neg", "big", "eps", "flag",
		"tokenizer.ggml.tokens", "scores", "types", "u8", "i8", "u16", "i16", "i64", "f64", "nested", "bools"}
	if !slices.Equal(f.Keys(), wantKeys) {
		t.Errorf("keys %v\nwant %v", f.Keys(), wantKeys)
	}
	for _, k := range wantKeys {
		got, _ := f.Value(k)
		if want := w.kv[k]; got.String() != want.String() || got.Type() != want.Type() {
			t.Errorf("%s: got %s %s, want %s %s", k, got.Type(), got, want.Type(), want)
		}
	}
	if n, _ := f.Uint("llama.block_count"); n != 3 {
		t.Errorf("block_count %d", n)
	}
	if n, ok := f.Int("neg"); !ok || n != -7 {
		t.Errorf("neg = %d %v", n, ok)
	}
	if _, ok := f.Uint("neg"); ok {
		t.Error("Uint accepted a negative value")
	}
	if _, ok := f.Int("big"); ok {
		t.Error("Int accepted MaxUint64")
	}
	if x, ok := f.Float("eps"); !ok || float32(x) != 1e-5 {
		t.Errorf("eps = %v", x)
	}
	if x, ok := f.Float("neg"); !ok || x != -7 {
		t.Errorf("Float(neg) = %v", x)
	}
	if s, _ := f.Strings("tokenizer.ggml.tokens"); !slices.Equal(s, []string{"<s>", "", "héllo", "\x00"}) {
		t.Errorf("tokens %q", s)
	}
	if s, _ := f.Float32s("scores"); !slices.Equal(s, []float32{0, -1.5, float32(math.Inf(1))}) {
		t.Errorf("scores %v", s)
	}
	if s, _ := f.Int32s("types"); !slices.Equal(s, []int32{1, 2, -3}) {
		t.Errorf("types %v", s)
	}
	if s, ok := f.Int32s("scores"); ok {
		t.Errorf("Int32s of floats = %v", s)
	}
	if b, ok := f.Bool("flag"); !ok || !b {
		t.Error("flag")
	}
	nv, _ := f.Value("nested")
	if nv.Len() != 2 || nv.ElemType() != ValueArray {
		t.Errorf("nested = %s", nv)
	}
	if in, _ := nv.Index(0); in.String() != "[1, 2]" {
		t.Errorf("nested[0] = %s", in)
	}
	if len(f.Tensors) != 3 {
		t.Fatalf("%d tensors", len(f.Tensors))
	}
	for i, ti := range f.Tensors {
		want := w.tensors[i]
		if ti.Name != want.Name || ti.Type != want.Type || !slices.Equal(ti.Dims, want.Dims) ||
			!bytes.Equal(ti.Data, want.Data) || ti.Offset%f.Alignment != 0 {
			t.Errorf("tensor %d: %+v, want %+v", i, ti, want)
		}
	}
	// Writing what was read gives the same bytes.
	b2, err := rewrite(f).Bytes()
	must(t, err)
	if !bytes.Equal(b, b2) {
		t.Error("rewrite differs")
	}
}

// rewrite copies f's metadata and tensors into a new Writer.
func rewrite(f *File) *Writer {
	w := NewWriter()
	for _, k := range f.Keys() {
		v, _ := f.Value(k)
		if err := w.Set(k, v); err != nil {
			panic(err)
		}
	}
	for _, t := range f.Tensors {
		if err := w.AddTensor(t.Name, t.Type, t.Dims, t.Data); err != nil {
			panic(err)
		}
	}
	return w
}

func TestWriterAlignment(t *testing.T) {
	for _, a := range []uint64{1, 8, 64, 4096} {
		w := NewWriter()
		w.SetAlignment(a)
		must(t, w.AddTensor("x", ggml.TypeF32, []uint64{3}, make([]byte, 12)))
		must(t, w.AddTensor("y", ggml.TypeF16, []uint64{5}, make([]byte, 10)))
		b, err := w.Bytes()
		must(t, err)
		f, err := Parse(b)
		must(t, err)
		if f.Alignment != a || f.DataOffset()%int64(a) != 0 {
			t.Errorf("align %d: got %d, data at %d", a, f.Alignment, f.DataOffset())
		}
		if y, _ := f.Tensor("y"); y.Offset != alignUp(12, a) {
			t.Errorf("align %d: y at %d", a, y.Offset)
		}
	}
	w := NewWriter()
	w.SetAlignment(48)
	if _, err := w.Bytes(); err == nil {
		t.Error("alignment 48 accepted")
	}
	if err := NewWriter().Set(KeyAlignment, Uint64Value(64)); err == nil {
		t.Error("UINT64 general.alignment accepted")
	}
}

func TestWriterErrors(t *testing.T) {
	cases := []struct {
		name string
		add  func(w *Writer) error
	}{
		{"duplicate", func(w *Writer) error {
			must(t, w.AddTensor("x", ggml.TypeF32, []uint64{1}, make([]byte, 4)))
			return w.AddTensor("x", ggml.TypeF32, []uint64{1}, make([]byte, 4))
		}},
		{"short data", func(w *Writer) error { return w.AddTensor("x", ggml.TypeF32, []uint64{2}, make([]byte, 4)) }},
		{"long data", func(w *Writer) error { return w.AddTensor("x", ggml.TypeQ8_0, []uint64{32}, make([]byte, 35)) }},
		{"partial block", func(w *Writer) error { return w.AddTensor("x", ggml.TypeQ4_K, []uint64{128}, make([]byte, 72)) }},
		{"unsupported", func(w *Writer) error { return w.AddTensor("x", ggml.TypeIQ2_XS, []uint64{256}, make([]byte, 74)) }},
		{"no dims", func(w *Writer) error { return w.AddTensor("x", ggml.TypeF32, nil, nil) }},
		{"five dims", func(w *Writer) error { return w.AddTensor("x", ggml.TypeF32, []uint64{1, 1, 1, 1, 1}, make([]byte, 4)) }},
		{"zero dim", func(w *Writer) error { return w.AddTensor("x", ggml.TypeF32, []uint64{4, 0}, nil) }},
		{"overflow", func(w *Writer) error {
			return w.AddTensor("x", ggml.TypeF32, []uint64{1 << 40, 1 << 40}, nil)
		}},
		{"bad value type", func(w *Writer) error { return w.Set("k", Value{typ: 13}) }},
		{"mixed array", func(w *Writer) error {
			_, err := ArrayValue(ValueUint8, []Value{Uint8Value(1), Int8Value(1)})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.add(NewWriter()); err == nil {
				t.Error("accepted")
			}
		})
	}
	if err := NewWriter().AddTensor("x", ggml.TypeIQ2_XS, []uint64{256}, make([]byte, 74)); !errors.Is(err, ggml.ErrUnsupportedType) {
		t.Errorf("unsupported type error %v does not wrap ggml.ErrUnsupportedType", err)
	}
}

func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	w := sampleWriter(t)
	must(t, w.WriteFile(path))
	f := openT(t, path)
	want, _ := w.Bytes()
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, want) || f.Size() != int64(len(want)) {
		t.Error("file differs from Bytes")
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("written file mode %v (err %v), want 0644", st.Mode().Perm(), err)
	}
	if err := w.WriteFile(filepath.Join(t.TempDir(), "no", "such", "dir", "m.gguf")); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

// TestRewriteShared re-encodes shared files (metadata and tensors) and
// expects llama.cpp's layout byte for byte.
func TestRewriteShared(t *testing.T) {
	td := sharedTestdata(t)
	paths := []string{
		filepath.Join(td, "models", "tiny-llama-q4_k_m.gguf"),
		filepath.Join(td, "quants", "q5_1.gguf"),
		filepath.Join(td, "tokenizer", "ggml-vocab-phi-3.gguf"),
	}
	if !testing.Short() {
		paths = nil
		for _, sub := range []string{"models", "quants", "tokenizer"} {
			m, _ := filepath.Glob(filepath.Join(td, sub, "*.gguf"))
			paths = append(paths, m...)
		}
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f := openT(t, p)
			b, err := rewrite(f).Bytes()
			must(t, err)
			orig, err := os.ReadFile(p)
			must(t, err)
			g, err := Parse(b)
			must(t, err)
			if !slices.Equal(g.Keys(), f.Keys()) || len(g.Tensors) != len(f.Tensors) {
				t.Fatal("keys or tensors differ")
			}
			for i, ti := range g.Tensors {
				if !bytes.Equal(ti.Data, f.Tensors[i].Data) || ti.Offset != f.Tensors[i].Offset {
					t.Errorf("tensor %s differs", ti.Name)
				}
			}
			if len(f.Tensors) == 0 && len(orig) > len(b) && len(orig) < len(b)+int(f.Alignment) &&
				!bytes.ContainsFunc(orig[len(b):], func(r rune) bool { return r != 0 }) {
				orig = orig[:len(b)] // gguf-py pads metadata-only files, llama.cpp does not
			}
			if f.Version == 3 && !bytes.Equal(b, orig) {
				t.Errorf("rewrite of %d bytes differs from the %d-byte original", len(b), len(orig))
			}
		})
	}
}

// TestBytesValue: an ARRAY of UINT8 written by BytesValue reads back as
// the same bytes (AsBytes), and AsBytes refuses arrays of other types.
func TestBytesValue(t *testing.T) {
	w := NewWriter()
	blob := []byte{0, 255, 7, 128}
	must(t, w.Set("blob", BytesValue(blob)))
	w.SetInt32s("types", []int32{1, 2})
	b, err := w.Bytes()
	must(t, err)
	f, err := Parse(b)
	must(t, err)
	v, _ := f.Value("blob")
	if got, ok := v.AsBytes(); !ok || !bytes.Equal(got, blob) || v.ElemType() != ValueUint8 {
		t.Fatalf("blob %v (%v)", got, ok)
	}
	if v, _ := f.Value("types"); func() bool { _, ok := v.AsBytes(); return ok }() {
		t.Fatal("AsBytes of an INT32 array")
	}
}
