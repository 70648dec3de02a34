package gguf

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"oengine/ggml"
)

const splitDir = "testdata/split"

// TestOpenSplit: the first file of a model split by llama.cpp's gguf-split
// (testdata/split/README.md) opens as the whole model, mapped and copied:
// the unsplit file's metadata and tensors, each with the same type, shape
// and bytes; Size is the files' total; Close clears every tensor's data.
func TestOpenSplit(t *testing.T) {
	whole, err := Open(filepath.Join(splitDir, "tiny.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	for _, set := range []struct {
		first string
		files int
	}{{"tiny-00001-of-00003.gguf", 3}, {"notensor-00001-of-00004.gguf", 4}} {
		for _, open := range []struct {
			name string
			fn   func(string) (*File, error)
		}{{"Open", Open}, {"OpenCopy", OpenCopy}} {
			t.Run(set.first+"/"+open.name, func(t *testing.T) {
				f, err := open.fn(filepath.Join(splitDir, set.first))
				if err != nil {
					t.Fatal(err)
				}
				var size int64
				for no := 0; no < set.files; no++ {
					p, ok := splitPath(filepath.Join(splitDir, set.first), no, set.files)
					if !ok {
						t.Fatalf("no path for file %d", no)
					}
					st, err := os.Stat(p)
					if err != nil {
						t.Fatal(err)
					}
					size += st.Size()
				}
				if f.Size() != size {
					t.Errorf("Size %d, want the files' %d", f.Size(), size)
				}
				for _, k := range whole.Keys() {
					want, _ := whole.Value(k)
					got, ok := f.Value(k)
					if !ok || got.String() != want.String() {
						t.Errorf("metadata %s = %v, want %v", k, got, want)
					}
				}
				if len(f.Tensors) != len(whole.Tensors) {
					t.Fatalf("%d tensors, want %d", len(f.Tensors), len(whole.Tensors))
				}
				for _, w := range whole.Tensors {
					g, ok := f.Tensor(w.Name)
					if !ok {
						t.Fatalf("tensor %s missing", w.Name)
					}
					if g.Type != w.Type || len(g.Dims) != len(w.Dims) || !bytes.Equal(g.Data, w.Data) {
						t.Fatalf("tensor %s: %s %v (%d bytes), want %s %v (%d bytes, same bytes)", w.Name, g.Type, g.Dims, len(g.Data), w.Type, w.Dims, len(w.Data))
					}
				}
				if open.name == "OpenCopy" && !f.ClaimWritable() {
					t.Error("copied split model not writable")
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				for _, tt := range f.Tensors {
					if tt.Data != nil {
						t.Fatalf("tensor %s keeps its data after Close", tt.Name)
					}
				}
			})
		}
	}
}

// TestOpenSplitProgress: OpenCopyProgress over a split model counts up to
// the total of all its files, never backwards.
func TestOpenSplitProgress(t *testing.T) {
	first := filepath.Join(splitDir, "tiny-00001-of-00003.gguf")
	var last, total int64
	f, err := OpenCopyProgress(first, func(done, tot int64) {
		if done < last || tot < total {
			t.Errorf("progress went back: %d/%d after %d/%d", done, tot, last, total)
		}
		last, total = done, tot
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if last != f.Size() || total != f.Size() {
		t.Errorf("progress ended at %d/%d, want %d/%d", last, total, f.Size(), f.Size())
	}
}

// copySplit copies the files named prefix-* of testdata/split into a new
// directory, renamed by rename (nil: as they are), and returns it.
func copySplit(t *testing.T, prefix string, rename func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	ents, err := os.ReadDir(splitDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix+"-") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(splitDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		name := e.Name()
		if rename != nil {
			name = rename(name)
		}
		if name != "" {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// writeSplitFile writes a GGUF file with the split keys and one tensor per
// name (a 32-value F32 row).
func writeSplitFile(t *testing.T, path string, no, count uint16, tensors int32, names ...string) {
	t.Helper()
	w := NewWriter()
	if no == 0 {
		w.SetString("general.architecture", "llama")
	}
	w.setErr(w.Set(KeySplitNo, Uint16Value(no)))
	w.setErr(w.Set(KeySplitCount, Uint16Value(count)))
	w.SetInt32(KeySplitTensors, tensors)
	for _, n := range names {
		if err := w.AddTensor(n, ggml.TypeF32, []uint64{32}, make([]byte, 128)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// TestOpenSplitErrors: every way the files of a split model can fail to
// belong together is refused with ErrSplit and a message naming the
// problem, for both open paths; nothing stays mapped (the files can be
// removed and the test's directory cleaned).
func TestOpenSplitErrors(t *testing.T) {
	cases := []struct {
		name string
		dir  func(t *testing.T) string // returns the path to open
		want string
		is   error
	}{
		{"second file", func(t *testing.T) string {
			return filepath.Join(copySplit(t, "tiny", nil), "tiny-00002-of-00003.gguf")
		}, "is file 2 of 3; open the first, ", nil},
		{"missing file", func(t *testing.T) string {
			dir := copySplit(t, "tiny", func(n string) string {
				if n == "tiny-00003-of-00003.gguf" {
					return ""
				}
				return n
			})
			return filepath.Join(dir, "tiny-00001-of-00003.gguf")
		}, "file 3 of 3", fs.ErrNotExist},
		{"renamed first", func(t *testing.T) string {
			dir := copySplit(t, "tiny", func(n string) string { return strings.Replace(n, "tiny-00001-of-00003", "model", 1) })
			return filepath.Join(dir, "model.gguf")
		}, "not named PREFIX-00001-of-00003.gguf", nil},
		{"files swapped", func(t *testing.T) string {
			dir := copySplit(t, "tiny", func(n string) string {
				switch n {
				case "tiny-00002-of-00003.gguf":
					return "tiny-00003-of-00003.gguf"
				case "tiny-00003-of-00003.gguf":
					return "tiny-00002-of-00003.gguf"
				}
				return n
			})
			return filepath.Join(dir, "tiny-00001-of-00003.gguf")
		}, "split.no = 2, want 1", nil},
		{"another model's file", func(t *testing.T) string {
			dir := copySplit(t, "tiny", nil)
			b, err := os.ReadFile(filepath.Join(splitDir, "notensor-00002-of-00004.gguf"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "tiny-00002-of-00003.gguf"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "tiny-00001-of-00003.gguf")
		}, "split.count = 4, want 3", nil},
		{"duplicate tensor", func(t *testing.T) string {
			dir := t.TempDir()
			writeSplitFile(t, filepath.Join(dir, "m-00001-of-00002.gguf"), 0, 2, 2, "a")
			writeSplitFile(t, filepath.Join(dir, "m-00002-of-00002.gguf"), 1, 2, 2, "a")
			return filepath.Join(dir, "m-00001-of-00002.gguf")
		}, `tensor "a" is in`, nil},
		{"tensor count", func(t *testing.T) string {
			dir := t.TempDir()
			writeSplitFile(t, filepath.Join(dir, "m-00001-of-00002.gguf"), 0, 2, 3, "a")
			writeSplitFile(t, filepath.Join(dir, "m-00002-of-00002.gguf"), 1, 2, 3, "b")
			return filepath.Join(dir, "m-00001-of-00002.gguf")
		}, "split.tensors.count = 3 but the 2 files hold 2 tensors", nil},
	}
	for _, c := range cases {
		for _, open := range []struct {
			name string
			fn   func(string) (*File, error)
		}{{"Open", Open}, {"OpenCopy", OpenCopy}} {
			t.Run(c.name+"/"+open.name, func(t *testing.T) {
				path := c.dir(t)
				f, err := open.fn(path)
				if err == nil {
					f.Close()
					t.Fatal("opened")
				}
				if !errors.Is(err, ErrSplit) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %q, want ErrSplit containing %q", err, c.want)
				}
				if c.name == "second file" && !strings.HasSuffix(err.Error(), string(filepath.Separator)+"tiny-00001-of-00003.gguf") {
					t.Fatalf("error %q does not name the first file", err)
				}
				if c.is != nil && !errors.Is(err, c.is) {
					t.Fatalf("error %q does not match %v", err, c.is)
				}
			})
		}
	}
}
