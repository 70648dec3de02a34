// Package ggml is the table of GGML tensor types: their ids (llama.cpp's
// enum ggml_type numbering), names and block layouts (elements and bytes
// per block), and which of them oengine computes with.
//
// It is a leaf: it imports nothing of oengine, so that the file format
// (model/gguf), the kernels (kernels/cpu, kernels/cuda) and the model all
// name a tensor type the same way without the kernels depending on the
// model packages.
package ggml
