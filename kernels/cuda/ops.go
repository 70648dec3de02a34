package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"oengine/ggml"
)

// Device operations. Each queues kernels on the stream and returns without
// waiting; shapes are in elements, all activations float32 row-major.

func blocks(n, per int) int { return (n + per - 1) / per }

// rowBlock is the block of the kernels that give one block to each row of
// n values (RMSNorm and its fusions, row gathers): about four values per
// thread, a multiple of 32 from 32 to 1024 threads. A decode step has one
// row per token, so a long serial loop on one multiprocessor would be the
// step's critical path (1024 threads for rows of 4096).
func rowBlock(n int) Dim3 { return D1(min(1024, max(32, (n/4+31)/32*32))) }

// UploadWeight allocates and fills a device copy of an encoded matrix
// [rows][cols] of type t (row-major, as cpu.Matrix).
func (s *Stream) UploadWeight(t ggml.Type, rows, cols int, data []byte) (Weight, error) {
	if _, err := checkWeight(t, rows, cols); err != nil {
		return Weight{}, err
	}
	w := Weight{Type: t, Rows: rows, Cols: cols}
	if need := rows * w.RowBytes(); len(data) != need {
		return Weight{}, fmt.Errorf("cuda: %s weight %dx%d needs %d bytes, got %d", t, rows, cols, need, len(data))
	}
	p, err := s.Alloc(uint64(len(data)))
	if err != nil {
		return Weight{}, err
	}
	if err := s.Upload(p, data); err != nil {
		s.Free(p)
		return Weight{}, err
	}
	w.Ptr = p
	return w, nil
}

// RMSNorm: out[r] = x[r] / sqrt(mean(x[r]²) + eps) * w for rows of n values.
// x, out: [rows][n] (may alias); w: [n] or 0 for no weight.
func (s *Stream) RMSNorm(out, x, w DevPtr, rows, n int, eps float32) error {
	return s.launch(kRMSNorm, D1(rows), rowBlock(n), 0, P(out), P(x), P(w), I(n), F(eps))
}

// Add: out[i] = a[i] + b[i] for n values (may alias).
func (s *Stream) Add(out, a, b DevPtr, n int) error {
	return s.launch(kAdd, D1(blocks(n, 256)), D1(256), 0, P(out), P(a), P(b), U64(uint64(n)))
}

// AddBias: x[r][i] += bias[i] for x [rows][n].
func (s *Stream) AddBias(x, bias DevPtr, rows, n int) error {
	return s.launch(kAddBias, D1(blocks(rows*n, 256)), D1(256), 0, P(x), P(bias), I(rows), I(n))
}

// SiLUMul: out[i] = silu(gate[i]) * up[i] for n values (out may alias gate).
func (s *Stream) SiLUMul(out, gate, up DevPtr, n int) error {
	return s.launch(kSiLUMul, D1(blocks(n, 256)), D1(256), 0, P(out), P(gate), P(up), U64(uint64(n)))
}

// SiLUMulSplit: in [rows][2*ffn] holds gate then up per row; out [rows][ffn].
func (s *Stream) SiLUMulSplit(out, in DevPtr, rows, ffn int) error {
	return s.launch(kSiLUMulSplit, D1(blocks(rows*ffn, 256)), D1(256), 0, P(out), P(in), I(rows), I(ffn))
}

// RopeParams describes the rotary embedding of a model.
type RopeParams struct {
	Heads, KVHeads, HeadDim int
	NRot                    int     // rotated values per head (≤ HeadDim, even)
	Base                    float32 // rope_freq_base
	FreqScale               float32 // 1 / linear scaling factor (1 when none)
	Factors                 DevPtr  // [NRot/2] rope_freqs or 0
	NeoX                    bool    // half-split pairs (qwen) instead of adjacent (llama)
}

// thetaScale is base^(-2/nRot) computed as cpu.RopeCache does.
func (p RopeParams) thetaScale() float32 {
	return float32(math.Pow(float64(p.Base), float64(float32(-2)/float32(p.NRot))))
}

func (p RopeParams) check() error {
	if p.Heads <= 0 || p.KVHeads <= 0 || p.HeadDim <= 0 || p.NRot <= 0 || p.NRot > p.HeadDim || p.NRot%2 != 0 {
		return fmt.Errorf("cuda: bad rope shape %+v", p)
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// RopeKVWrite rotates q [T][Heads*HeadDim] and k [T][KVHeads*HeadDim] in
// place at positions pos [T] (int32, device) and writes k and v [T][KVHeads*
// HeadDim] as F16 into rows slot[t] of the cache kc, vc [slots][KVHeads*
// HeadDim] (slot = page*pageSize + pos%pageSize; negative: no write).
func (s *Stream) RopeKVWrite(q, k, v, kc, vc, pos, slot DevPtr, T int, p RopeParams) error {
	if err := p.check(); err != nil {
		return err
	}
	items := (p.Heads+p.KVHeads)*(p.NRot/2) + p.KVHeads*p.HeadDim // K/Q pairs, then V columns
	grid := Dim3{uint32(T), uint32(blocks(items, 128)), 1}
	return s.launch(kRopeKVWrite, grid, D1(128), 0, P(q), P(k), P(v), P(kc), P(vc), P(pos), P(slot),
		I(p.Heads), I(p.KVHeads), I(p.HeadDim), I(p.NRot), F(p.thetaScale()), F(p.FreqScale), P(p.Factors), I(b2i(p.NeoX)))
}

// Rope rotates x [T][heads*HeadDim] in place (heads = p.Heads).
func (s *Stream) Rope(x, pos DevPtr, T int, p RopeParams) error {
	if err := p.check(); err != nil {
		return err
	}
	grid := Dim3{uint32(T), uint32(blocks(p.Heads*(p.NRot/2), 128)), 1}
	return s.launch(kRopeInplace, grid, D1(128), 0, P(x), P(pos), I(p.Heads), I(p.HeadDim), I(p.NRot),
		F(p.thetaScale()), F(p.FreqScale), P(p.Factors), I(b2i(p.NeoX)))
}

// AttnParams describes attention over the paged F16 KV cache of one layer.
type AttnParams struct {
	Heads, KVHeads, HeadDim int
	PageSize                int
	MaxPages                int     // row length of the page-table matrix
	Scale                   float32 // usually 1/sqrt(HeadDim)
}

// Check validates the shape against what the attention kernels support.
func (a AttnParams) Check() error { return a.check() }

func (a AttnParams) check() error {
	if a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 || a.Heads/a.KVHeads > 8 {
		return fmt.Errorf("cuda: attention needs Heads a multiple of KVHeads with at most 8 heads per KV head, got %d/%d", a.Heads, a.KVHeads)
	}
	if a.HeadDim%32 != 0 || a.HeadDim > 256 || a.HeadDim <= 0 {
		return fmt.Errorf("cuda: attention head dim %d: must be a multiple of 32, at most 256", a.HeadDim)
	}
	if a.PageSize <= 0 || a.MaxPages <= 0 {
		return fmt.Errorf("cuda: attention page size %d, max pages %d", a.PageSize, a.MaxPages)
	}
	return nil
}

// DecodeSplit is the number of positions one attention block handles; it
// bounds the split-K work per block for long contexts.
const DecodeSplit = 256

// AttnDecode computes out [T][Heads][HeadDim] = causal attention of q [T]
// [Heads][HeadDim] over the cache, token t seeing positions 0..npos[t]-1 of
// sequence seq[t] through tables [nseq][MaxPages] (int32, device). maxNPos
// bounds npos (it fixes the number of splits; under graph capture pass the
// context length). The split partials live in a stream scratch buffer.
func (s *Stream) AttnDecode(out, q, kc, vc, tables, seq, npos DevPtr, T, maxNPos int, a AttnParams) error {
	if err := a.check(); err != nil {
		return err
	}
	if T <= 0 || maxNPos <= 0 {
		return nil
	}
	nsplit := blocks(maxNPos, DecodeSplit)
	rows := T * a.Heads
	pml, err := s.scratchBuf("attn_ml", uint64(rows*nsplit*2*4))
	if err != nil {
		return err
	}
	pacc, err := s.scratchBuf("attn_acc", uint64(rows*nsplit*a.HeadDim*4))
	if err != nil {
		return err
	}
	if err := s.launch(decodeKernel(a.HeadDim), Dim3{uint32(T * a.KVHeads), uint32(nsplit), 1}, D1(128), 0,
		P(q), P(kc), P(vc), P(tables), I(a.MaxPages), P(seq), P(npos), I(a.Heads), I(a.KVHeads),
		I(a.HeadDim), I(a.PageSize), I(DecodeSplit), F(a.Scale), P(pml), P(pacc)); err != nil {
		return err
	}
	return s.launch(kAttnCombine, D1(rows), D1(128), 0, P(pml), P(pacc), P(out), I(nsplit), I(a.HeadDim))
}

// PrefillTiles splits a batch into attention tiles for AttnPrefill: runs of
// consecutive tokens of one sequence at consecutive positions, at most
// PrefillRows(a)/G tokens each. seq, pos: [T] (host copies).
func PrefillTiles(seq, pos []int32, a AttnParams) (start, length []int32) {
	return prefillTiles(seq, pos, max(1, PrefillRows(a)/(a.Heads/a.KVHeads)))
}

// prefillTiles splits a batch into runs of consecutive tokens of one
// sequence at consecutive positions, at most per tokens each.
func prefillTiles(seq, pos []int32, per int) (start, length []int32) {
	for t := 0; t < len(seq); {
		n := 1
		for t+n < len(seq) && n < per && seq[t+n] == seq[t] && pos[t+n] == pos[t+n-1]+1 {
			n++
		}
		start = append(start, int32(t))
		length = append(length, int32(n))
		t += n
	}
	return start, length
}

// PrefillRows is the number of query rows (tokens × heads per KV head) one
// prefill block holds: 32 for head dims up to 128, 8 above (shared memory).
func PrefillRows(a AttnParams) int {
	if a.HeadDim <= 128 {
		return 32
	}
	return 8
}

// AttnPrefill computes the same result as AttnDecode for batches made of
// runs of consecutive tokens (prompt chunks), reading each key/value chunk
// once per tile. tileStart, tileLen: [ntiles] int32 (device) from
// PrefillTiles.
func (s *Stream) AttnPrefill(out, q, kc, vc, tables, seq, npos, tileStart, tileLen DevPtr, ntiles int, a AttnParams) error {
	if err := a.check(); err != nil {
		return err
	}
	rows := PrefillRows(a)
	shmem := rows*a.HeadDim*4 + 2*32*(a.HeadDim+2)*2
	return s.launch(kAttnPrefill, Dim3{uint32(ntiles), uint32(a.KVHeads), 1}, D1(128), uint32(shmem),
		P(q), P(kc), P(vc), P(tables), I(a.MaxPages), P(seq), P(npos), P(tileStart), P(tileLen),
		I(a.Heads), I(a.KVHeads), I(a.HeadDim), I(a.PageSize), F(a.Scale), P(out))
}

// GemvMaxTokens is the number of tokens one GEMV launch handles.
const GemvMaxTokens = 8

// Gemv computes y [n][w.Rows] = x [n][w.Cols] · Wᵀ with the type's decoding
// kernel (one launch per GemvMaxTokens tokens).
func (s *Stream) Gemv(y DevPtr, w Weight, x DevPtr, n int) error {
	tk, err := checkWeight(w.Type, w.Rows, w.Cols)
	if err != nil {
		return err
	}
	const warps = 8
	for t0 := 0; t0 < n; t0 += GemvMaxTokens {
		nt := min(GemvMaxTokens, n-t0)
		xo := x + DevPtr(t0*w.Cols*4)
		yo := y + DevPtr(t0*w.Rows*4)
		if err := s.launch(tk.gemv, D1(blocks(w.Rows, warps)), D1(32*warps), 0, P(w.Ptr), U64(uint64(w.RowBytes())),
			P(xo), P(yo), I(w.Rows), I(w.Cols), I(nt), I(w.Rows)); err != nil {
			return err
		}
	}
	return nil
}

// GetRows gathers out [n][w.Cols] = W[ids[i]] (embedding lookup) for ids
// [n] int32 on the device. Ids outside [0, Rows) give zero rows.
func (s *Stream) GetRows(out DevPtr, w Weight, ids DevPtr, n int) error {
	tk, err := checkWeight(w.Type, w.Rows, w.Cols)
	if err != nil {
		return err
	}
	return s.launch(tk.getRows, D1(n), D1(256), 0, P(w.Ptr), U64(uint64(w.RowBytes())), P(ids), P(out), I(n), I(w.Rows), I(w.Cols))
}

// ToF16 converts n float32 values at x to F16 at y.
func (s *Stream) ToF16(y, x DevPtr, n int) error {
	return s.launch(kF32ToF16, D1(blocks(n, 256)), D1(256), 0, P(x), P(y), U64(uint64(n)))
}

// HasBLAS reports whether cuBLAS is available for MatMul.
func (s *Stream) HasBLAS() bool { return s.blas != nil }

// GemmF16 computes y [n][rows] (f32) = x16 [n][cols] · w16ᵀ with w16 [rows]
// [cols] and x16 in F16, accumulating in f32 (cublasGemmEx). Row-major y is
// the column-major rows×n matrix C = op(A)·B with A = w16 seen column-major
// as cols×rows (op = T) and B = x16 seen as cols×n.
func (s *Stream) GemmF16(y, w16, x16 DevPtr, rows, cols, n int) error {
	if s.blas == nil {
		return ErrNoCUBLAS
	}
	alpha, beta := float32(1), float32(0)
	r := s.blas.cublasGemmEx(s.blasH, cublasOpT, cublasOpN, int32(rows), int32(n), int32(cols),
		unsafe.Pointer(&alpha), w16, cudaR16F, int32(cols), x16, cudaR16F, int32(cols),
		unsafe.Pointer(&beta), y, cudaR32F, int32(rows), cublasCompute32F, cublasGemmDefault)
	return checkCublas("cublasGemmEx", r)
}

// GemmMinTokens is the batch size from which MatMul uses cuBLAS for F16
// and BF16 weights (quantized weights: MMAMinTokens, ops_mma.go).
const GemmMinTokens = 16

// MatMul computes y [n][w.Rows] = x [n][w.Cols] · Wᵀ on the path
// matmulRoute picks: the GEMV kernels (float32 throughout) for small n;
// for large n, quantized (and, without cuBLAS, F16) weights on the
// tensor-core gemm_mma kernels, F16 and BF16 weights on cuBLAS with the
// activations rounded to the weights' type. The GEMM paths round the
// activations (and quantized weights) to F16, or to BF16 for BF16 weights:
// reduced-precision paths, accumulating in f32. F32 weights always stay on
// the GEMV kernels. Where the GEMV path remains, quantized weights with
// int8-activation kernels take GemvQ8 (x quantized first; ops_q8.go).
func (s *Stream) MatMul(y DevPtr, w Weight, x DevPtr, n int) error {
	if s.UsesQ8(w.Type, n) {
		return s.matMulQ8(y, w, x, n)
	}
	switch matmulRoute(w.Type, n, s.blas != nil, s.info.CC()) {
	case pathMMA:
		return s.GemmMMA(y, w, x, n)
	case pathCublasF16:
		return s.gemmCublas(y, w, x, n, false)
	case pathCublasBF16:
		return s.gemmCublas(y, w, x, n, true)
	}
	return s.Gemv(y, w, x, n)
}

// matmulRoute picks MatMul's path for n tokens of weights of type t, with
// or without cuBLAS, on a device of compute capability cc.
func matmulRoute(t ggml.Type, n int, blas bool, cc int) matmulPath {
	switch {
	case t == ggml.TypeF16 && blas && n >= GemmMinTokens:
		return pathCublasF16
	case t == ggml.TypeBF16 && blas && n >= GemmMinTokens:
		return pathCublasBF16
	}
	if _, ok := mmaKernels[t]; ok && cc >= mmaMinCC && n >= MMAMinTokens {
		return pathMMA
	}
	return pathGemv
}

// GatherRows copies out[i] = in[idx[i]] for n rows of cols float32 values
// (idx [n] int32 on the device).
func (s *Stream) GatherRows(out, in, idx DevPtr, n, cols int) error {
	return s.launch(kGatherRows, D1(n), rowBlock(cols), 0, P(out), P(in), P(idx), I(cols))
}

// Argmax writes out[r] = argmax of logits [rows][vocab] (lowest index on ties).
func (s *Stream) Argmax(out, logits DevPtr, rows, vocab int) error {
	return s.launch(kArgmax, D1(rows), D1(1024), 0, P(logits), I(vocab), P(out))
}

// SampleTopKTopP draws one token per row of logits [rows][vocab]; temp,
// topP, u: [rows] f32 and topK: [rows] i32 on the device. See SampleRef for
// the exact rule. temp must be > 0 (use Argmax for greedy rows).
func (s *Stream) SampleTopKTopP(out, logits, temp, topK, topP, u DevPtr, rows, vocab int) error {
	return s.launch(kSampleTopKTopP, D1(rows), D1(1024), 0, P(logits), I(vocab), P(temp), P(topK), P(topP), P(u), P(out))
}
