package cuda

import (
	"fmt"

	"oengine/ggml"
)

// Quantized decode GEMV with int8 activations (kernels/mmvq.cu): the
// activations of a step are quantized once to q8_1 blocks (QuantizeQ8 or
// the fused RMSNormQ8), then GemvQ8 multiplies every weight block with
// integer dot products, reading each weight byte once for all the step's
// tokens (up to GemvQ8MaxTokens per launch).
//
// Activations come in the format kernels/cpu pairs with each weight type
// (the CPU engine matches llama.cpp with them):
//   - q8_1 (Q4_0, Q8_0 weights) [n][Q8RowBytes(cols)]: row t holds qs int8
//     [cols], then cols/32 words (d f16 = amax/127 | s f16 = d·Σqs << 16),
//     then zero padding to 16 bytes; qs = round-half-even(x·(127/amax)),
//     kernels/cpu's Q8_0 activations.
//   - q8_K (Q4_K, Q6_K weights) [n][Q8KRowBytes(cols)]: qs int8 [cols],
//     then cols/256 f32 scales d = 1/iscale with iscale = -127/vmax (vmax
//     the first value of largest |x| of the 256-block), qs =
//     clamp(round-half-even(iscale·x), ±127): kernels/cpu's Q8_K bytes.
//
// Accuracy against the float dot Σ w·x with unquantized activations:
// |err| ≤ Σ_i |w_i| · 0.57·amax(i)/127 + 2^-20·Σ_i |w_i·x_i|·(units per
// lane + 8): amax(i) is the largest |x| of element i's activation block
// (32 or 256 values); the first term is the activation rounding (|x - d·q|
// ≤ d'/2 with d' = amax/127, plus for q8_1 the f16 rounding of d, |d -
// d'|·127 ≤ 2^-11·amax), the second the float32 scaling and summation (a
// few roundings per unit in a lane, then a 32-lane tree). Weights are used
// exactly as cpu.Dequantize decodes them.

// GemvQ8MaxTokens is the number of tokens one GemvQ8 launch handles.
const GemvQ8MaxTokens = 64

// q8Warps is the number of warps per block of the GEMV kernels.
const q8Warps = 4

// q8Bucket is one compiled token bucket: kernels for up to nt tokens, run
// in groups of tg, each warp owning rpw rows and loading unr units per lane
// at a time (mmvq.cu's GEMV_Q8 lines carry the same numbers).
type q8Bucket struct{ nt, tg, rpw, unr int }

var q8Buckets = []q8Bucket{{1, 1, 1, 4}, {2, 2, 1, 4}, {4, 4, 2, 2}, {8, 8, 2, 1}, {16, 16, 2, 1}, {32, 16, 2, 1}, {64, 16, 2, 1}}

// Q8Bucket returns the token bucket (kernel NT) and rows per warp the GEMV
// uses for n tokens (1 ≤ n ≤ GemvQ8MaxTokens).
func Q8Bucket(n int) (nt, rowsPerWarp int) {
	for _, b := range q8Buckets {
		if n <= b.nt {
			return b.nt, b.rpw
		}
	}
	b := q8Buckets[len(q8Buckets)-1]
	return b.nt, b.rpw
}

// Q8Warps is the number of warps in a block of the GEMV kernels.
const Q8Warps = q8Warps

// q8Types are the weight types with an int8-activation GEMV, by kernel
// suffix.
var q8Types = map[ggml.Type]string{ggml.TypeQ4_0: "q4_0", ggml.TypeQ8_0: "q8_0", ggml.TypeQ4_K: "q4_k", ggml.TypeQ6_K: "q6_k"}

// Q8Kind is an int8 activation format.
type Q8Kind uint8

const (
	Q8None Q8Kind = iota // no int8 path: float32 activations
	Q8_1                 // 32-blocks, f16 scale and sum (Q4_0, Q8_0 weights)
	Q8K                  // 256-blocks, f32 scale (K-quant weights)
)

// Q8KindOf returns the activation format GemvQ8 expects for weights of
// type t (Q8None: no int8 GEMV).
func Q8KindOf(t ggml.Type) Q8Kind {
	switch t {
	case ggml.TypeQ4_0, ggml.TypeQ8_0:
		return Q8_1
	case ggml.TypeQ4_K, ggml.TypeQ6_K:
		return Q8K
	}
	return Q8None
}

// q8Kernels[t][i] is the GEMV of type t for bucket q8Buckets[i].
var q8Kernels = map[ggml.Type][]kernelName{}

const (
	kQuantizeQ8  kernelName = "quantize_q8_1"
	kRMSNormQ8   kernelName = "rms_norm_q8_1"
	kQuantizeQ8K kernelName = "quantize_q8_k"
	kRMSNormQ8K  kernelName = "rms_norm_q8_k"
)

func init() {
	registerKernels(kQuantizeQ8, kRMSNormQ8, kQuantizeQ8K, kRMSNormQ8K)
	for t, suf := range q8Types {
		for _, b := range q8Buckets {
			k := kernelName(fmt.Sprintf("gemv_q8_%s_t%d", suf, b.nt))
			q8Kernels[t] = append(q8Kernels[t], k)
			registerKernels(k)
		}
	}
}

// SupportsQ8 reports whether GemvQ8 handles weights of type t.
func SupportsQ8(t ggml.Type) bool { _, ok := q8Types[t]; return ok }

// Q8RowBytes is the size of one token's q8_1 activations of cols values.
func Q8RowBytes(cols int) int { return (cols + cols/8 + 15) &^ 15 }

// Q8Bytes is the size of n tokens' q8_1 activations of cols values.
func Q8Bytes(n, cols int) int { return n * Q8RowBytes(cols) }

// Q8KRowBytes is the size of one token's q8_K activations of cols values.
func Q8KRowBytes(cols int) int { return (cols + cols/64 + 15) &^ 15 }

// Q8ActRowBytes is the row size of activations of kind k.
func Q8ActRowBytes(k Q8Kind, cols int) int {
	if k == Q8K {
		return Q8KRowBytes(cols)
	}
	return Q8RowBytes(cols)
}

func checkQ8Cols(k Q8Kind, cols int) error {
	block := 32
	if k == Q8K {
		block = 256
	}
	if cols <= 0 || cols%block != 0 {
		return fmt.Errorf("cuda: int8 activations need a positive multiple of %d values per row, got %d", block, cols)
	}
	return nil
}

// QuantizeQ8 writes xq [rows] q8_1 rows = q8_1(x [rows][cols] f32).
func (s *Stream) QuantizeQ8(xq, x DevPtr, rows, cols int) error {
	return s.QuantizeAct(Q8_1, xq, x, rows, cols)
}

// QuantizeAct writes xq [rows] rows of kind k from x [rows][cols] f32.
func (s *Stream) QuantizeAct(k Q8Kind, xq, x DevPtr, rows, cols int) error {
	if err := checkQ8Cols(k, cols); err != nil {
		return err
	}
	if rows <= 0 {
		return nil
	}
	const threads = 128
	if k == Q8K { // a warp per 256-block
		return s.launch(kQuantizeQ8K, Dim3{uint32(blocks(cols/256, threads/32)), uint32(rows), 1}, D1(threads), 0,
			P(x), P(xq), I(rows), I(cols))
	}
	return s.launch(kQuantizeQ8, Dim3{uint32(blocks(cols/4, threads)), uint32(rows), 1}, D1(threads), 0,
		P(x), P(xq), I(rows), I(cols))
}

// RMSNormQ8 is RMSNorm(out, x, w, rows, n, eps) fused with QuantizeQ8(xq,
// out, rows, n): the normalized rows go to xq as q8_1 and, unless out is
// 0, to out [rows][n] f32 as well. w may be 0 (no weight).
func (s *Stream) RMSNormQ8(xq, out, x, w DevPtr, rows, n int, eps float32) error {
	return s.RMSNormAct(Q8_1, xq, out, x, w, rows, n, eps)
}

// RMSNormAct is RMSNormQ8 writing activations of kind k.
func (s *Stream) RMSNormAct(k Q8Kind, xq, out, x, w DevPtr, rows, n int, eps float32) error {
	if err := checkQ8Cols(k, n); err != nil {
		return err
	}
	if rows <= 0 {
		return nil
	}
	kn := kRMSNormQ8
	if k == Q8K {
		kn = kRMSNormQ8K
	}
	return s.launch(kn, D1(rows), rowBlock(n), 0, P(xq), P(out), P(x), P(w), I(n), F(eps))
}

// GemvQ8 computes y [n][w.Rows] = x [n][w.Cols] · Wᵀ from the activations
// xq of x in the format Q8KindOf(w.Type) (QuantizeAct / RMSNormAct with
// the same n and w.Cols), one launch per GemvQ8MaxTokens tokens.
func (s *Stream) GemvQ8(y DevPtr, w Weight, xq DevPtr, n int) error {
	ks, ok := q8Kernels[w.Type]
	if !ok {
		return fmt.Errorf("cuda: weight type %s has no int8-activation GEMV", w.Type)
	}
	if _, err := checkWeight(w.Type, w.Rows, w.Cols); err != nil {
		return err
	}
	kind := Q8KindOf(w.Type)
	if err := checkQ8Cols(kind, w.Cols); err != nil {
		return err
	}
	// Q4_K units are read with 16-byte loads (rows are 144·k bytes), the
	// other types with 2-byte loads.
	align := DevPtr(2)
	if w.Type == ggml.TypeQ4_K {
		align = 16
	}
	if w.Ptr%align != 0 {
		return fmt.Errorf("cuda: %s weight at %#x is not %d-byte aligned for the int8 GEMV", w.Type, uint64(w.Ptr), align)
	}
	xs := Q8ActRowBytes(kind, w.Cols)
	for t0 := 0; t0 < n; t0 += GemvQ8MaxTokens {
		nt := min(GemvQ8MaxTokens, n-t0)
		bi := 0
		for nt > q8Buckets[bi].nt {
			bi++
		}
		rpw := q8Buckets[bi].rpw
		grid := blocks(w.Rows, q8Warps*rpw)
		if err := s.launch(ks[bi], D1(grid), D1(32*q8Warps), 0, P(w.Ptr), U64(uint64(w.RowBytes())),
			P(xq+DevPtr(t0*xs)), P(y+DevPtr(t0*w.Rows*4)), I(w.Rows), I(w.Cols), I(nt), I(w.Rows)); err != nil {
			return err
		}
	}
	return nil
}

// UseQ8 reports whether GemvQ8 can take n tokens of weights of type t:
// quantized weights of a supported type in steps of at most
// GemvQ8MaxTokens tokens (decode and short chunks).
func UseQ8(t ggml.Type, n int) bool { return SupportsQ8(t) && n > 0 && n <= GemvQ8MaxTokens }

// UsesQ8 reports whether MatMul takes the int8-activation GEMV for n tokens
// of weights of type t on this stream: where UseQ8 holds and MatMul would
// otherwise run the float32 GEMV (from MMAMinTokens tokens the tensor-core
// GEMM takes quantized weights on sm_80+).
func (s *Stream) UsesQ8(t ggml.Type, n int) bool {
	return UseQ8(t, n) && matmulRoute(t, n, s.blas != nil, s.info.CC()) == pathGemv
}

// Q8Scratch returns the stream's activation buffer of kind k, at least n
// rows of cols values (grown outside graph capture; size it for the
// largest step first, as Decoder steps do).
func (s *Stream) Q8Scratch(k Q8Kind, n, cols int) (DevPtr, error) {
	name := "q8_act"
	if k == Q8K {
		name = "q8k_act"
	}
	return s.scratchBuf(name, uint64(n*Q8ActRowBytes(k, cols)))
}

// matMulQ8 is MatMul's int8-activation path: x is quantized into the
// scratch of its kind, then GemvQ8.
func (s *Stream) matMulQ8(y DevPtr, w Weight, x DevPtr, n int) error {
	k := Q8KindOf(w.Type)
	xq, err := s.Q8Scratch(k, n, w.Cols)
	if err != nil {
		return err
	}
	if err := s.QuantizeAct(k, xq, x, n, w.Cols); err != nil {
		return err
	}
	return s.GemvQ8(y, w, xq, n)
}
