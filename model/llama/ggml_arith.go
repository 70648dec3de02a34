package llama

import "oengine/kernels/cpu"

// GGML arithmetic: an opt-in mode (Options.GGMLArithmetic) in which Forward
// computes what llama.cpp's x86 AVX2 CPU backend computes, bit for bit where
// the kernels are emulated, so that oengine can be checked against llama.cpp
// references token for token (oengine verify). It exists because the
// default kernels keep one batch-invariant float32 order of their own, and
// the tiny random-weight reference models turn one-ulp differences into
// flipped greedy tokens at near-ties. What changes in this mode:
//
//   - RoPE angles use glibc's sincosf (cpu.GGMLRopeCache);
//   - matrix products of the types cpu.GGMLSupported names (Q8_0, Q6_K,
//     Q4_K, F16) use cpu.GGMLMat, ggml's summation order
//     (kernels/cpu/ggml_dot.go); for Q4_K (repacked gemm for groups of 4
//     rows) and F16 (tinyBLAS for 2 rows or more) it depends on the number
//     of tokens in the call, as in llama.cpp; Q4_0 keeps MatMul, whose
//     order is already ggml's;
//   - attention takes llama.cpp's choice of flash-attention path by the
//     number of query rows in the Forward call (its ubatch): the one-row F16
//     path (cpu.AttendF16) for fewer than 64 rows, else the tiled float32
//     path (cpu.AttendGGMLTiled), and for a single token whose KV view
//     (padded to 256 cells) reaches 512 cells the split-KV path over 2
//     threads (cpu.GGMLSplitKV). This depends on the batch, which is why
//     the mode is not the default; callers that want llama.cpp's results
//     feed a prompt as llama.cpp does (one batch per ubatch of at most 512
//     tokens) and decode one token per call.
//
// The default mode chooses the attention path by position instead
// (f16AttnPositions), which keeps results batch-invariant.

// ropeCache fills cs with the (cos, sin) pairs of position pos: glibc's
// sincosf in GGML arithmetic mode (cpu.GGMLRopeCache), else cpu.RopeCache.
func (m *Model) ropeCache(cs []float32, pos int32) {
	c := &m.cfg
	if c.Yarn { // its scale included
		cpu.RopeCacheYaRN(cs, pos, c.RopeDims, c.RopeBase, c.RopeFreqScale, m.ropeFreqs, m.yarn)
		return
	}
	if m.ggml != nil {
		cpu.GGMLRopeCache(cs, pos, c.RopeDims, c.RopeBase, c.RopeFreqScale, m.ropeFreqs)
	} else {
		cpu.RopeCache(cs, pos, c.RopeDims, c.RopeBase, c.RopeFreqScale, m.ropeFreqs)
	}
	if c.RopeAttnFactor != 0 && c.RopeAttnFactor != 1 { // LongRoPE's attention factor scales cos and sin (ggml's mscale)
		cpu.Scale(cs[:c.RopeDims], cs[:c.RopeDims], c.RopeAttnFactor)
	}
}

// ropeCacheLocal writes the sliding-window layers' rotation of pos into
// cs: RopeBaseSWA and RopeScaleSWA, with YaRN when the model has it.
func (m *Model) ropeCacheLocal(cs []float32, pos int32) {
	c := &m.cfg
	if c.Yarn {
		cpu.RopeCacheYaRN(cs, pos, c.RopeDims, c.RopeBaseSWA, c.RopeScaleSWA, nil, m.yarnSWA)
		return
	}
	cpu.RopeCache(cs, pos, c.RopeDims, c.RopeBaseSWA, c.RopeScaleSWA, nil)
}

// ggmlTileRows is GGML_FA_TILE_Q: llama.cpp's CPU flash attention uses its
// tiled path for batches of at least this many query rows.
const ggmlTileRows = 64

// ggmlState is the per-model scratch of the mode (nil when off).
type ggmlState struct {
	mat    cpu.GGMLMat
	split  cpu.GGMLSplitKV // llama.cpp decode with >= 512 KV cells
	oneRow cpu.GGMLSplitKV // one chunk: the one-row F16 path (AttendF16's arithmetic)
}

// GGMLArithmetic reports whether the model runs in GGML arithmetic mode.
func (m *Model) GGMLArithmetic() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ggml != nil
}

// SetGGMLArithmetic switches GGML arithmetic mode on or off for the
// following Forward calls (K/V already stored keep their values). Gemma
// models have no GGML mode (Load refuses it): for them it does nothing.
func (m *Model) SetGGMLArithmetic(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.cfg.Gemma:
	case on && m.ggml == nil:
		m.ggml = newGGMLState(false)
	case !on:
		m.ggml = nil
	}
}

// SetGGMLAVX512 selects, in GGML mode, the summation orders of an AVX-512
// build of llama.cpp instead of AVX2 ones where they differ (the F16 q·k
// dot of flash attention, F16 matrix products). The shared reference data was written by such a
// build: with it, tiny-qwen2-q8_0 matches the reference bit for bit.
// It switches GGML mode on (not for Gemma models, as SetGGMLArithmetic).
func (m *Model) SetGGMLAVX512(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.cfg.Gemma {
		m.ggml = newGGMLState(on)
	}
}

func newGGMLState(avx512 bool) *ggmlState {
	return &ggmlState{
		mat:    cpu.GGMLMat{AVX512: avx512},
		split:  cpu.GGMLSplitKV{Threads: 2, AVX512: avx512},
		oneRow: cpu.GGMLSplitKV{Threads: 1, AVX512: avx512},
	}
}

// matMul is pool.MatMul, or its GGML twin in GGML arithmetic mode.
func (m *Model) matMul(dst []float32, w cpu.Matrix, x []float32, n int) {
	if m.ggml == nil {
		m.pool.MatMul(dst, w, x, n)
		return
	}
	m.ggml.mat.MatMul(m.pool, dst, w, x, n)
}

// matMuls is pool.MatMuls, or the same products one by one in GGML mode.
func (m *Model) matMuls(ops []cpu.MatOp, x []float32, n int) {
	if m.ggml == nil {
		m.pool.MatMuls(ops, x, n)
		return
	}
	for _, op := range ops {
		m.ggml.mat.MatMul(m.pool, op.Dst, op.W, x, n)
	}
}

// attendFunc returns the attention kernel of token i of the call in
// progress. Default: cpu.AttendF16 (llama.cpp's one-row arithmetic) for the
// first f16AttnPositions positions, cpu.Attend after. GGML mode: by the
// number of tokens in the call, as llama.cpp chooses by ubatch rows:
// cpu.AttendF16 below ggmlTileRows, else cpu.AttendGGMLTiled; and for a
// single token whose padded KV view reaches 512 cells, llama.cpp's split-KV
// decode path (cpu.GGMLSplitKV, with the reference's 2 threads).
func (f *forward) attendFunc(i int) func(out, q []float32, g int, k, v cpu.KVRows, table []int32, n, off int, scale float32, scratch []float32) {
	if g := f.m.ggml; g != nil {
		switch {
		case f.t == 1 && cpu.GGMLKVView(int(f.b.Pos[i])+1) >= cpu.GGMLSplitKVMin:
			return g.split.Attend
		case f.t < ggmlTileRows && g.oneRow.AVX512:
			return g.oneRow.Attend
		case f.t < ggmlTileRows:
			return cpu.AttendF16
		}
		return cpu.AttendGGMLTiled
	}
	if f.b.Pos[i] < f16AttnPositions {
		return cpu.AttendF16
	}
	return cpu.Attend
}
