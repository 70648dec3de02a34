package cudaemu

import "oengine/kernels/cuda"

// attn_decode_v16 computes what attn_decode_f16 computes (same arguments,
// same split partials; only the loads differ on a GPU).
func init() {
	register("attn_decode_v16", func(e *emulator, _ string, grid, _ cuda.Dim3, a []cuda.Arg) error {
		return e.attnDecode(grid, a)
	})
}
