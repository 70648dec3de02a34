package gguf

import (
	"oengine/internal/refdata"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"oengine/ggml"
)

// sharedTestdata returns ../shared/testdata relative to the repository root
// (found by walking up to go.mod), skipping the test when it is missing.
func sharedTestdata(t testing.TB) string {
	t.Helper()
	return refdata.Dir(t)
}

func openT(t *testing.T, path string) *File {
	t.Helper()
	f, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestOpenEverySharedFile(t *testing.T) {
	td := sharedTestdata(t)
	var paths []string
	for _, sub := range []string{"models", "quants", "tokenizer"} {
		m, _ := filepath.Glob(filepath.Join(td, sub, "*.gguf"))
		paths = append(paths, m...)
	}
	if len(paths) < 20 {
		t.Fatalf("found only %d shared gguf files", len(paths))
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f := openT(t, p)
			st, _ := os.Stat(p)
			if f.Size() != st.Size() {
				t.Errorf("Size = %d, want %d", f.Size(), st.Size())
			}
			if f.Version != 2 && f.Version != 3 {
				t.Errorf("Version = %d", f.Version)
			}
			if len(f.Keys()) == 0 {
				t.Error("no metadata")
			}
			for _, ti := range f.Tensors {
				size, err := tensorBytes(ti.Type, ti.Dims)
				if err != nil || uint64(len(ti.Data)) != size {
					t.Errorf("tensor %s: len(Data)=%d, size %d err %v", ti.Name, len(ti.Data), size, err)
				}
				if got, ok := f.Tensor(ti.Name); !ok || got != ti {
					t.Errorf("Tensor(%q) lookup failed", ti.Name)
				}
				if int64(ti.Offset)+f.DataOffset() < 0 || (int64(ti.Offset)+f.DataOffset())%int64(f.Alignment) != 0 {
					t.Errorf("tensor %s misaligned", ti.Name)
				}
			}
		})
	}
}

func TestSharedModels(t *testing.T) {
	td := sharedTestdata(t)
	cases := []struct {
		file      string
		arch      string
		vocab     int
		embdType  ggml.Type
		embdDims  []uint64
		hasOutput bool
	}{
		{"tiny-llama-f16.gguf", "llama", 32000, ggml.TypeF16, []uint64{256, 32000}, false},
		{"tiny-llama-q8_0.gguf", "llama", 32000, ggml.TypeQ8_0, []uint64{256, 32000}, false},
		{"tiny-llama-q4_0.gguf", "llama", 32000, ggml.TypeQ6_K, []uint64{256, 32000}, false},
		{"tiny-llama-q4_k_m.gguf", "llama", 32000, 0, []uint64{256, 32000}, true},
		{"tiny-qwen2-q8_0.gguf", "qwen2", 50257, ggml.TypeQ8_0, []uint64{256, 50257}, false},
		{"tiny-qwen3-q4_k_m.gguf", "qwen3", 50257, 0, []uint64{256, 50257}, false},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			f := openT(t, filepath.Join(td, "models", c.file))
			if arch, _ := f.String("general.architecture"); arch != c.arch {
				t.Errorf("general.architecture = %q, want %q", arch, c.arch)
			}
			toks, ok := f.Strings("tokenizer.ggml.tokens")
			if !ok || len(toks) != c.vocab {
				t.Errorf("tokenizer.ggml.tokens: %d tokens (ok %v), want %d", len(toks), ok, c.vocab)
			}
			if n, ok := f.Uint(c.arch + ".embedding_length"); !ok || n != 256 {
				t.Errorf("%s.embedding_length = %d, %v", c.arch, n, ok)
			}
			if n, ok := f.Int(c.arch + ".block_count"); !ok || n < 3 || n > 4 {
				t.Errorf("%s.block_count = %d, %v", c.arch, n, ok)
			}
			if eps, ok := f.Float(c.arch + ".attention.layer_norm_rms_epsilon"); !ok || eps <= 0 || eps > 1e-3 {
				t.Errorf("rms epsilon = %v, %v", eps, ok)
			}
			if types, ok := f.Int32s("tokenizer.ggml.token_type"); !ok || len(types) != c.vocab {
				t.Errorf("token_type: %d, %v", len(types), ok)
			}
			emb, ok := f.Tensor("token_embd.weight")
			if !ok {
				t.Fatal("token_embd.weight missing")
			}
			if !slices.Equal(emb.Dims, c.embdDims) {
				t.Errorf("token_embd.weight dims %v, want %v", emb.Dims, c.embdDims)
			}
			if c.embdType != 0 && emb.Type != c.embdType {
				t.Errorf("token_embd.weight type %s, want %s", emb.Type, c.embdType)
			}
			if emb.Elements() != c.embdDims[0]*c.embdDims[1] || emb.Rows() != c.embdDims[1] {
				t.Errorf("Elements %d Rows %d", emb.Elements(), emb.Rows())
			}
			if _, ok := f.Tensor("output.weight"); ok != c.hasOutput {
				t.Errorf("output.weight present = %v, want %v", ok, c.hasOutput)
			}
			norm, ok := f.Tensor("blk.0.attn_norm.weight")
			if !ok || norm.Type != ggml.TypeF32 || !slices.Equal(norm.Dims, []uint64{256}) {
				t.Errorf("blk.0.attn_norm.weight = %+v", norm)
			}
		})
	}
}

func TestSharedTokenizerVocabs(t *testing.T) {
	td := sharedTestdata(t)
	cases := []struct {
		name  string
		model string
		n     int
	}{
		{"llama-spm", "llama", 32000},
		{"llama3", "gpt2", 128256},
		{"qwen3", "gpt2", 151669},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := openT(t, filepath.Join(td, "tokenizer", "ggml-vocab-"+c.name+".gguf"))
			if m, _ := f.String("tokenizer.ggml.model"); m != c.model {
				t.Errorf("tokenizer.ggml.model = %q, want %q", m, c.model)
			}
			toks, _ := f.Strings("tokenizer.ggml.tokens")
			if len(toks) != c.n {
				t.Errorf("%d tokens, want %d", len(toks), c.n)
			}
			if len(f.Tensors) != 0 {
				t.Errorf("%d tensors in a vocab-only file", len(f.Tensors))
			}
		})
	}
}

func TestSharedQuants(t *testing.T) {
	td := sharedTestdata(t)
	paths, _ := filepath.Glob(filepath.Join(td, "quants", "*.gguf"))
	for _, p := range paths {
		name := filepath.Base(p)
		t.Run(name, func(t *testing.T) {
			want, err := ggml.ParseType(name[:len(name)-len(".gguf")])
			if err != nil {
				t.Fatal(err)
			}
			f := openT(t, p)
			ti, ok := f.Tensor("t")
			if !ok {
				t.Fatal("tensor t missing")
			}
			if ti.Type != want || len(ti.Dims) != 2 || ti.Dims[1] != 16 {
				t.Errorf("tensor t: type %s dims %v, want %s [*, 16]", ti.Type, ti.Dims, want)
			}
			rb, err := ti.Type.RowBytes(int(ti.Dims[0]))
			if err != nil || len(ti.Data) != rb*16 {
				t.Errorf("len(Data) = %d, RowBytes = %d (%v)", len(ti.Data), rb, err)
			}
			// The .f32 golden holds one float32 per element.
			st, err := os.Stat(p[:len(p)-len(".gguf")] + ".f32")
			if err == nil && uint64(st.Size()) != 4*ti.Elements() {
				t.Errorf("golden has %d bytes, want %d", st.Size(), 4*ti.Elements())
			}
		})
	}
}

func TestCloseTwice(t *testing.T) {
	td := sharedTestdata(t)
	f, err := Open(filepath.Join(td, "quants", "q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := f.Tensor("t")
	if len(ti.Data) == 0 {
		t.Fatal("no data")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if ti.Data != nil {
		t.Error("Data kept after Close")
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	for _, p := range []string{filepath.Join(dir, "missing.gguf"), empty, dir} {
		if f, err := Open(p); err == nil {
			f.Close()
			t.Errorf("Open(%s) succeeded", p)
		}
	}
}

func TestConcurrentReads(t *testing.T) {
	td := sharedTestdata(t)
	f := openT(t, filepath.Join(td, "models", "tiny-qwen3-q4_k_m.gguf"))
	done := make(chan int, 4)
	for g := 0; g < 4; g++ {
		go func() {
			sum := 0
			for _, k := range f.Keys() {
				v, _ := f.Value(k)
				sum += len(v.String())
			}
			for _, ti := range f.Tensors {
				got, _ := f.Tensor(ti.Name)
				sum += len(got.Data) % 7
			}
			toks, _ := f.Strings("tokenizer.ggml.tokens")
			done <- sum + len(toks)
		}()
	}
	first := <-done
	for g := 1; g < 4; g++ {
		if got := <-done; got != first {
			t.Errorf("reader %d saw %d, first saw %d", g, got, first)
		}
	}
}
