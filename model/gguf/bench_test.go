package gguf

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkOpen maps and validates shared files: a model (vocabulary of
// 32000 strings plus tensor infos) and the largest vocabulary (151669).
func BenchmarkOpen(b *testing.B) {
	td := sharedTestdata(b)
	for _, p := range []string{
		filepath.Join(td, "models", "tiny-llama-f16.gguf"),
		filepath.Join(td, "tokenizer", "ggml-vocab-qwen3.gguf"),
	} {
		b.Run(filepath.Base(p), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f, err := Open(p)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}

// BenchmarkWriterBytes re-encodes a model in memory.
func BenchmarkWriterBytes(b *testing.B) {
	td := sharedTestdata(b)
	data, err := os.ReadFile(filepath.Join(td, "models", "tiny-llama-q4_k_m.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		b.Fatal(err)
	}
	w := rewrite(f)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := w.Bytes(); err != nil {
			b.Fatal(err)
		}
	}
}
