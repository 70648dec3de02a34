package llama

import (
	"oengine/internal/refdata"
	"os"
	"path/filepath"
	"testing"

	"oengine/ggml"
	"oengine/model/gguf"
	"oengine/model/synth"
)

// sharedModels returns shared/testdata/models (next to the repository root),
// skipping the test when it is absent.
func sharedModels(t testing.TB) string {
	t.Helper()
	return refdata.Dir(t, "models")
}

// openShared loads one of the shared reference models.
func openShared(t testing.TB, name string) (*gguf.File, *Model) {
	t.Helper()
	f, err := gguf.Open(filepath.Join(sharedModels(t), name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(f, Options{Threads: 2})
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); f.Close() })
	return f, m
}

// synthFile builds a small synthetic model in memory.
func synthFile(t testing.TB, arch string, typ ggml.Type, seed uint64) *gguf.File {
	t.Helper()
	return synthBuild(t, synth.Options{Arch: arch, Preset: "tiny", Type: typ, Seed: seed})
}

// synthBuild builds the synthetic model o describes in memory.
func synthBuild(t testing.TB, o synth.Options) *gguf.File {
	t.Helper()
	b, err := synth.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// synthLoad loads the synthetic model o describes with two threads; the
// caller closes it.
func synthLoad(t testing.TB, o synth.Options) *Model {
	t.Helper()
	m, err := Load(synthBuild(t, o), Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// synthLoadServed is synthLoad through a file read with gguf.OpenCopy, as
// the server loads models: the weights may then be rewritten into the
// kernels' layouts (Q4_0's decode layout), which a parsed byte slice
// cannot be. The file is removed when t ends; the model keeps its copy.
func synthLoadServed(t testing.TB, o synth.Options) *Model {
	t.Helper()
	b, err := synth.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "synth.gguf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.OpenCopy(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(f, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// synthModel loads a small synthetic model.
func synthModel(t testing.TB, arch string, typ ggml.Type) *Model {
	t.Helper()
	m := synthLoad(t, synth.Options{Arch: arch, Preset: "tiny", Type: typ, Seed: 7})
	t.Cleanup(m.Close)
	return m
}

// rewrite copies f into a new GGUF buffer, letting edit change metadata and
// drop or replace tensors (return nil data to drop one).
func rewrite(t testing.TB, f *gguf.File, meta map[string]gguf.Value, edit func(ti *gguf.TensorInfo) (ggml.Type, []uint64, []byte)) *gguf.File {
	t.Helper()
	return rewriteAdd(t, f, meta, edit, nil)
}

// extraTensor is a tensor rewriteAdd appends.
type extraTensor struct {
	name string
	typ  ggml.Type
	dims []uint64
	data []byte
}

// rewriteAdd is rewrite that also appends tensors.
func rewriteAdd(t testing.TB, f *gguf.File, meta map[string]gguf.Value, edit func(ti *gguf.TensorInfo) (ggml.Type, []uint64, []byte), extra []extraTensor) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, k := range f.Keys() {
		v, _ := f.Value(k)
		if nv, ok := meta[k]; ok {
			v = nv
		}
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range meta {
		if _, ok := f.Value(k); !ok {
			if err := w.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ti := range f.Tensors {
		typ, dims, data := ti.Type, ti.Dims, ti.Data
		if edit != nil {
			typ, dims, data = edit(ti)
		}
		if data == nil {
			continue
		}
		if err := w.AddTensor(ti.Name, typ, dims, data); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range extra {
		if err := w.AddTensor(e.name, e.typ, e.dims, e.data); err != nil {
			t.Fatal(err)
		}
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	nf, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return nf
}

// seqBatch builds a batch of tokens at positions start.. of one sequence
// with page table table, asking for every token's logits.
func seqBatch(tokens []int32, start int, table []int32) *Batch {
	b := &Batch{Seqs: [][]int32{table}}
	for i, tok := range tokens {
		b.Tokens = append(b.Tokens, tok)
		b.Pos = append(b.Pos, int32(start+i))
		b.Seq = append(b.Seq, 0)
		b.Logits = append(b.Logits, int32(i))
	}
	return b
}

// testTokens returns n deterministic token ids below vocab.
func testTokens(n, vocab int, seed uint32) []int32 {
	t := make([]int32, n)
	x := seed*2654435761 + 1
	for i := range t {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		t[i] = int32(x % uint32(vocab))
	}
	return t
}
