// Package gguf reads and writes GGUF files, the container llama.cpp uses for
// model weights and metadata, and describes the GGML tensor types.
//
// Layout of a GGUF v2/v3 file (all integers little-endian):
//
//	magic "GGUF" | version u32 | tensor_count u64 | kv_count u64
//	kv_count × { key string | value_type u32 | value }
//	tensor_count × { name string | n_dims u32 | dims [n_dims]u64 | type u32 | offset u64 }
//	zero padding to the alignment (general.alignment, default 32)
//	data section: each tensor at its offset (a multiple of the alignment)
//
// A string is a u64 byte length followed by the bytes; an array is an
// element type u32, a u64 count and the elements (arrays of arrays repeat
// the array body without a type tag).
//
// Open maps the file read-only and Parse validates everything before
// trusting it: counts and lengths are checked against the bytes that remain
// before anything is allocated, so a hostile file yields an error (matching
// ErrMalformed or ggml.ErrUnsupportedType), never a panic or a huge allocation.
// A model split into several files (split.go) opens through its first file.
// Tensor Data are views into the mapping and stay valid until Close; the
// metadata is copied and outlives it. A File is safe for concurrent reads;
// Close must not race with users of tensor Data.
package gguf
