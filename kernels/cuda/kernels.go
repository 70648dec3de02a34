package cuda

import (
	"fmt"

	"oengine/ggml"
)

// kernelName is the extern "C" name of a kernel in the embedded source.
// Every launch names its kernel through one of these constants (or the
// per-type names below); kernels_test.go checks that each exists in the
// embedded source.
type kernelName string

const (
	kRMSNorm        kernelName = "rms_norm"
	kAdd            kernelName = "add_f32"
	kAddBias        kernelName = "add_bias"
	kSiLUMul        kernelName = "silu_mul"
	kSiLUMulSplit   kernelName = "silu_mul_split"
	kRopeKVWrite    kernelName = "rope_kv_write"
	kRopeInplace    kernelName = "rope_inplace"
	kAttnDecode     kernelName = "attn_decode_f16"
	kAttnCombine    kernelName = "attn_combine"
	kAttnPrefill    kernelName = "attn_prefill_f16"
	kArgmax         kernelName = "argmax_f32"
	kSampleTopKTopP kernelName = "sample_topk_topp"
	kF32ToF16       kernelName = "f32_to_f16"
	kGatherRows     kernelName = "gather_rows_f32"
)

// typeKernels are the per-weight-type kernels: GEMV and row gather.
type typeKernels struct {
	gemv, getRows kernelName
	unit          int // elements per decoding unit (cols must be a multiple)
}

func typeK(suffix string, unit int) typeKernels {
	return typeKernels{
		gemv:    kernelName("gemv_" + suffix),
		getRows: kernelName("get_rows_" + suffix),
		unit:    unit,
	}
}

// weightKernels lists the weight types the device kernels decode.
var weightKernels = map[ggml.Type]typeKernels{
	ggml.TypeF32:  typeK("f32", 8),
	ggml.TypeF16:  typeK("f16", 8),
	ggml.TypeBF16: typeK("bf16", 8),
	ggml.TypeQ8_0: typeK("q8_0", 32),
	ggml.TypeQ4_0: typeK("q4_0", 32),
	ggml.TypeQ4_K: typeK("q4_k", 32),
	ggml.TypeQ6_K: typeK("q6_k", 16),
}

// Supports reports whether the device kernels can use weights of type t.
func Supports(t ggml.Type) bool {
	_, ok := weightKernels[t]
	return ok
}

// moreKernels are the kernel names that the ops files other than ops.go
// launch; each such file registers its names from an init function with
// registerKernels, so adding a family of kernels touches no shared list.
var moreKernels []kernelName

func registerKernels(names ...kernelName) { moreKernels = append(moreKernels, names...) }

// allKernels returns every kernel name the Go code can launch.
func allKernels() []kernelName {
	out := []kernelName{kRMSNorm, kAdd, kAddBias, kSiLUMul, kSiLUMulSplit, kRopeKVWrite,
		kRopeInplace, kAttnDecode, kAttnCombine, kAttnPrefill, kArgmax, kSampleTopKTopP, kF32ToF16, kGatherRows}
	out = append(out, moreKernels...)
	for _, tk := range weightKernels {
		out = append(out, tk.gemv, tk.getRows)
	}
	return out
}

// Weight is a matrix W [Rows][Cols] in device memory, stored row-major in
// GGML type Type: row r starts RowBytes()*r bytes after Ptr (rows are
// output features, as cpu.Matrix).
type Weight struct {
	Type       ggml.Type
	Rows, Cols int
	Ptr        DevPtr
}

// RowBytes returns the encoded size of one row.
func (w Weight) RowBytes() int { return w.Cols / w.Type.BlockElems() * w.Type.BlockBytes() }

// checkWeight validates that w's type and shape suit the device kernels.
func checkWeight(t ggml.Type, rows, cols int) (typeKernels, error) {
	tk, ok := weightKernels[t]
	if !ok {
		return tk, fmt.Errorf("cuda: weight type %s has no device kernel", t)
	}
	if rows <= 0 || cols <= 0 || cols%tk.unit != 0 || cols%t.BlockElems() != 0 {
		return tk, fmt.Errorf("cuda: %s weight %dx%d: columns must be a multiple of %d", t, rows, cols, max(tk.unit, t.BlockElems()))
	}
	return tk, nil
}
