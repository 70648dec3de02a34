package cudaemu

import (
	"oengine/kernels/cuda"
)

// The twin of attn_prefill_mma (kernels/cuda/kernels/fattn.cu):
// cuda.AttnPrefillMMARef over the launch's buffers, so the emulated device
// rounds Q and the softmax weights to F16 (or hi+lo F16 pairs with split)
// and runs the online softmax per chunk of cuda.MMAKeys positions exactly
// as the kernel does.

const kAttnPrefillMMA = "attn_prefill_mma"

func init() { register(kAttnPrefillMMA, attnPrefillMMA) }

// attnPrefillMMA: arguments (q, kc, vc, tables, maxPages, seq, npos,
// tileStart, tileLen, Hq, Hk, D, pageSize, scale, split, out); grid
// (ntiles, Hk).
func attnPrefillMMA(e *emulator, _ string, grid, _ cuda.Dim3, a []cuda.Arg) error {
	ntiles := int(grid.X)
	p := cuda.AttnParams{Heads: a[9].Int(), KVHeads: a[10].Int(), HeadDim: a[11].Int(), PageSize: a[12].Int(),
		MaxPages: a[4].Int(), Scale: a[13].Float()}
	tstart, tlen := view[int32](e, a[7].Ptr())[:ntiles], view[int32](e, a[8].Ptr())[:ntiles]
	return cuda.AttnPrefillMMARef(view[float32](e, a[15].Ptr()), view[float32](e, a[0].Ptr()),
		view[uint16](e, a[1].Ptr()), view[uint16](e, a[2].Ptr()), view[int32](e, a[3].Ptr()),
		view[int32](e, a[5].Ptr()), view[int32](e, a[6].Ptr()), tstart, tlen, p, a[14].Int() != 0)
}
