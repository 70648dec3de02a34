package cpu

import "oengine/ggml"

// Kernel dispatch. Which kernels run is decided here and in
// dispatch_amd64.go, once, at package initialisation: detectISA reads the
// CPU's features (golang.org/x/sys/cpu, so GODEBUG=cpu.avx2=off,
// cpu.avx512f=off, ... take effect) and kernelSetFor builds the kernel set
// of that level. No other file reads CPU features or installs kernels.
// README.md in this directory maps each file to the kernels it holds.

// isa is an instruction-set level of the kernels; each level includes
// the ones below it.
type isa int

const (
	isaGeneric    isa = iota // plain Go: the reference twins, on every architecture
	isaAVX2                  // amd64 AVX2 + FMA + F16C
	isaAVX512                // + AVX-512 F and VL (the VEX-style Y16-Y31 loads of its tail): the F16 prefill tile
	isaAVX512VNNI            // + AVX-512 BW and VNNI (VPDPBUSD, VPDPWSSD): K-quant and 16-row Q4_0/Q8_0 kernels
)

// String is the level's name in Features.
func (l isa) String() string {
	switch l {
	case isaAVX2:
		return "avx2+fma+f16c"
	case isaAVX512:
		return "avx2+fma+f16c+avx512"
	case isaAVX512VNNI:
		return "avx2+fma+f16c+avx512-vnni"
	}
	return "generic"
}

// kernelSet is what one ISA level runs.
type kernelSet struct {
	isa isa
	// matmul is MatMul's kernel per weight type: portable (matmul.go),
	// with the level's kernels substituted.
	matmul map[ggml.Type]kernel
	// rows are the many-row decode kernels per weight type (dot_gemv*).
	rows map[ggml.Type]rowsKernel
	// simd: the AVX2 helpers of the other operations (activation
	// quantization, SwiGLU, attention, ReadSum) run.
	simd bool
	// blk: Q4_0 and Q8_0 use the blocked kernels (dot_blk.go); the
	// activation quantizer then fills their extra layouts.
	blk bool
	// f16Z: F16 prefill uses the AVX-512 4×6 tile (dot_f16tile_avx512*).
	f16Z bool
	// vnni: the AVX-512 VNNI 16-row Q4_0/Q8_0 kernels run: prefill
	// panels (dot_blk16*), the 16-row decode kernel (dot_gemv16_vnni*),
	// the Q4_0 decode layout (q4_0_decode*) and the K-quant ones
	// (k_decode*).
	vnni bool
	// blkZTile is the 16-row prefill panel path (nil without vnni).
	blkZTile func(p *Pool, worker int, op *opPlan, r0, r1, t0, t1 int) int
}

// active is the set this process runs.
var active = kernelSetFor(detectISA())

// The active set as the package variables the kernels read on every call
// (and the tests read to skip what this CPU cannot run).
var (
	kernels      = active.matmul
	hasAVX2      = active.isa >= isaAVX2
	attnAVX2     = active.simd
	readSIMD     = active.simd
	blkActive    = active.blk
	hasAVX512F16 = active.isa >= isaAVX512
	hasAVX512KZ  = active.isa >= isaAVX512VNNI
	hasBlkZ      = active.vnni
)

// Switches between two kernels of the same level: tests and benchmarks
// flip them to compare the two; both give the same bits.
var (
	// blkZTile, where set, computes the whole 16-row groups of a
	// prefill tile (dot_blk16.go); nil: 8-row panels only.
	blkZTile = active.blkZTile
	// gemvZ: Q4_0 decode uses the 16-row kernel for whole groups of 16
	// rows (dot_gemv16_vnni_amd64.s) instead of the 8-row one.
	gemvZ = active.vnni
	// f16TileOn: F16 prefill uses the register tiles (dot_f16tile*)
	// instead of the 2×2 kernel.
	f16TileOn = true
	// f16FewOn: the two to five tokens of an F16 product left after its
	// whole groups of six (all of them in a step of a few decoders or of
	// one sequence verifying drafts) use the rows kernels (two or three,
	// dot_f16rows*), the 3×4 tile (four) or the 2×5 tile (five), instead
	// of the 2×2 tile and the one-token kernel.
	f16FewOn = true
	// kquantFewOn: the last two or three tokens of a K-quant product go
	// through the four-token kernel (matmul_run.go tile) instead of the
	// one-token kernel, one read of the rows instead of two or three.
	kquantFewOn = true
	// q8FewOn: Q8_0 decode of two or three tokens reads each group of 8
	// rows once for all of them (blkDotRowsFew) instead of once a token.
	q8FewOn = true
	// blkZFewMax: Q4_0 and Q8_0 products in the decode layout of fewer
	// tokens than this run the decode kernels, up to eight tokens a call,
	// over each work item's rows (they stay in cache between calls)
	// instead of unpacking every 16-row group into a panel first
	// (BenchmarkMatMulFewTokens, 5632×2048 on two threads, Q4_0: 2.6x at
	// 4 tokens, 1.6x at 8, 1.2x at 32, 1.1x at 128 and 512; whole model,
	// tinyllama-1.1b: pp128 1.09x, pp256 1.03-1.07x, pp512 the same. Q8_0:
	// 2.6x at 4, 1.0-1.2x at 64, level from 128).
	blkZFewMax = blkZFewMaxDefault
	// blkZFewOn: those tokens go through the decode-layout kernels up to
	// eight at a time (blkZLayout.gemvFew), each block read (and
	// unpacked) once for all of them, instead of one token per call.
	blkZFewOn = true
	// q51zPairOn: Q5_1 products in the decode layout run two tokens a
	// kernel call (gemv16Q5_1PT2), each block read and its values built
	// once for both, instead of one token per call.
	q51zPairOn = true
	// kzFewOn: Q5_K and Q6_K products in the decode layout run two to
	// four tokens a kernel call (kzGemvFew), each super-block read and
	// unpacked once for all of them, instead of one token per call.
	kzFewOn = true
	// f16zOn: the F16 tile is the AVX-512 4×6 one.
	f16zOn = active.f16Z
	// f16RowsZOn: with f16FewOn, two to eight tokens of an F16 product
	// (all of a step of a few decoders or of one sequence verifying
	// drafts, except six, or those left after groups of six) use the
	// AVX-512 rows kernels (dot_f16rowsz*) instead of the AVX2 rows
	// kernels and tiles.
	f16RowsZOn = active.f16Z
	// attnZOn: attention over F16 pages with two, four or eight query
	// heads per KV head runs the AVX-512 kernels (attn_z_avx512_amd64.s),
	// 16/g positions a vector and V widened in the output loop, instead
	// of the AVX2 helpers; and the score and V helpers run in AVX-512
	// (attn_chunk_avx512_amd64.s) where the lanes fill whole 16-lane
	// vectors (the prefill tiles of AttendChunk: 1.4-1.5x on
	// BenchmarkAttendChunk for g = 1, 2, 4).
	attnZOn = active.f16Z
)

// blkZFewMaxDefault is blkZFewMax as shipped; TestQ4ZMatMul also runs 4,
// where the panels started before BenchmarkMatMulFewTokens had Q4_0.
const blkZFewMaxDefault = 256

// q4zActive reports whether the Q4_0 decode layout's kernels run here.
func q4zActive() bool { return active.vnni }

// kzActive reports whether the K-quant (Q4_K, Q5_K, Q6_K) decode layouts'
// kernels run here.
func kzActive() bool { return active.vnni }

// Features names the instruction set the MatMul kernels use on this CPU
// ("generic", "avx2+fma+f16c", "avx2+fma+f16c+avx512",
// "avx2+fma+f16c+avx512-vnni"), for logs and benchmark reports.
func Features() string { return active.isa.String() }
