package cuda

// kAttnDecodeV16 is attn_decode_f16 with 16-byte K/V loads
// (kernels/attn_v16.cu): same arguments, same partial results.
const kAttnDecodeV16 kernelName = "attn_decode_v16"

func init() { registerKernels(kAttnDecodeV16) }

// decodeKernel returns the decode attention kernel for head dim D: the
// 16-byte-load kernel where D/8 lanes per key divide a warp (D 32, 64,
// 128, 256), else the one-lane-per-dim kernel.
func decodeKernel(D int) kernelName {
	if D%8 == 0 && D >= 32 && D <= 256 && 32%(D/8) == 0 {
		return kAttnDecodeV16
	}
	return kAttnDecode
}
