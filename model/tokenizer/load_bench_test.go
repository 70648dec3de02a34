package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"oengine/model/gguf"
)

// BenchmarkLoad measures building a tokenizer from an open GGUF file.
func BenchmarkLoad(b *testing.B) {
	for _, name := range []string{"llama3", "qwen3", "llama-spm"} {
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(sharedDir(b), "tokenizer", "ggml-vocab-"+name+".gguf")
			f, err := gguf.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.ResetTimer()
			for range b.N {
				if _, err := FromGGUF(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen measures opening the GGUF file itself (package gguf).
func BenchmarkOpen(b *testing.B) {
	path := filepath.Join(sharedDir(b), "tokenizer", "ggml-vocab-llama3.gguf")
	for range b.N {
		f, err := gguf.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// benchText is about 64 KiB of English prose (the long reference prompt,
// repeated).
func benchText(b testing.TB) string { return benchTextT(b) }

func benchTextT(b testing.TB) string {
	raw, err := os.ReadFile(filepath.Join(sharedDir(b), "models", "prompts.txt"))
	if err != nil {
		b.Fatal(err)
	}
	parts := strings.Split(string(raw), "\n__prompt__\n")
	long := parts[len(parts)-1]
	var sb strings.Builder
	for sb.Len() < 64<<10 {
		sb.WriteString(long)
		sb.WriteString("\n\n")
	}
	return sb.String()
}

// BenchmarkEncode reports Encode throughput (MB/s) on English text.
func BenchmarkEncode(b *testing.B) {
	text := benchText(b)
	for _, name := range []string{"llama3", "llama-spm", "qwen3", "gpt-2"} {
		b.Run(name, func(b *testing.B) {
			tok := loadTokenizer(b, filepath.Join("tokenizer", "ggml-vocab-"+name+".gguf"))
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				tok.Encode(text, EncodeOptions{})
			}
		})
	}
}

// BenchmarkDecode reports Decode throughput on the tokens of English text.
func BenchmarkDecode(b *testing.B) {
	text := benchText(b)
	tok := loadTokenizer(b, filepath.Join("tokenizer", "ggml-vocab-llama3.gguf"))
	ids := tok.Encode(text, EncodeOptions{})
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for range b.N {
		tok.Decode(ids)
	}
}
