package cuda

import "fmt"

// Prefill attention on tensor cores: attn_prefill_mma in
// kernels/fattn.cu (layouts, fragment rules and shared memory are
// described there). AttnPrefillMMARef (fattn_ref.go) is its reference
// twin; AttnPrefill (attn_prefill_f16) stays the fallback for other head
// dims.

const kAttnPrefillMMA kernelName = "attn_prefill_mma"

func init() { registerKernels(kAttnPrefillMMA) }

const (
	// MMARows is the number of query rows (tokens × heads per KV head) one
	// attn_prefill_mma block holds: 4 warps of 16 rows.
	MMARows = 64
	// MMAKeys is the number of key positions per chunk of the kernel's
	// loop (the unit of its online softmax).
	MMAKeys = 64
)

// MMAPrefillSupports reports whether attn_prefill_mma handles the shape:
// head dims 64 and 128 (with the limits of AttnParams.Check).
func MMAPrefillSupports(a AttnParams) bool {
	return a.check() == nil && (a.HeadDim == 64 || a.HeadDim == 128)
}

// MMATileTokens is the number of tokens of one attn_prefill_mma tile:
// MMARows / G with G = Heads/KVHeads query heads per KV head (64 tokens
// for G 1, 32 for G 2, 16 for G 4 as Llama-3-8B, 8 for G 8).
func MMATileTokens(a AttnParams) int { return max(1, MMARows/(a.Heads/a.KVHeads)) }

// PrefillTilesMMA splits a batch into tiles for AttnPrefillMMA: runs of
// consecutive tokens of one sequence at consecutive positions, at most
// MMATileTokens(a) tokens each. seq, pos: [T] (host copies).
func PrefillTilesMMA(seq, pos []int32, a AttnParams) (start, length []int32) {
	return prefillTiles(seq, pos, MMATileTokens(a))
}

// mmaShared is attn_prefill_mma's dynamic shared memory: K and V chunks
// [MMAKeys][HeadDim+8] F16.
func mmaShared(a AttnParams) int { return 2 * MMAKeys * (a.HeadDim + 8) * 2 }

// AttnPrefillMMA computes what AttnPrefill computes, on tensor cores (f32
// accumulation, f32 softmax statistics): out [T][Heads][HeadDim] f32 from
// q [T][Heads][HeadDim] f32 over the paged F16 cache kc, vc [slots]
// [KVHeads*HeadDim]. tileStart, tileLen: [ntiles] int32 (device) from
// PrefillTilesMMA. With split, Q and the softmax weights P are carried as
// hi+lo F16 pairs (two products each: float32 precision, what the decode
// kernel computes within float32 rounding); without, they are rounded to
// F16 (half the tensor-core work, relative error about 2^-11).
func (s *Stream) AttnPrefillMMA(out, q, kc, vc, tables, seq, npos, tileStart, tileLen DevPtr, ntiles int, a AttnParams, split bool) error {
	if !MMAPrefillSupports(a) {
		if err := a.check(); err != nil {
			return err
		}
		return fmt.Errorf("cuda: attn_prefill_mma supports head dims 64 and 128, not %d", a.HeadDim)
	}
	return s.launch(kAttnPrefillMMA, Dim3{uint32(ntiles), uint32(a.KVHeads), 1}, D1(128), uint32(mmaShared(a)),
		P(q), P(kc), P(vc), P(tables), I(a.MaxPages), P(seq), P(npos), P(tileStart), P(tileLen),
		I(a.Heads), I(a.KVHeads), I(a.HeadDim), I(a.PageSize), F(a.Scale), I(b2i(split)), P(out))
}
