// AVX-512 VNNI decode kernel for Q4_0 weights: groups of 16 contiguous rows
// against one token, lane r of a zmm = row r. Per block the 16 rows' 16
// bytes of nibbles are loaded four rows per zmm and transposed by dwords
// (the 4x4 transposes of packQ4_0z in dot_blk16_vnni_amd64.s), so that dword k of
// every row sits in lane r; VPDPBUSD of the masked nibbles (unsigned) with
// the broadcast activation dword gives the exact integer sum Σ u·q, and
// subtracting s8 = 8·Σq leaves the block sum I_b. The F16 scales come from
// the rows' first 16 bytes of the block, loaded and transposed the same way
// (dword 0 only; a VPGATHERDD was 1.5x slower). Lanes 1-3 of a zmm are
// filled by merge-masked VBROADCASTI32X4 loads (as fast as VINSERTI32X4).
// Then the canonical float
// arithmetic of the blocked kernels (dot_blk.go): acc = fma(dw·dx,
// float32(I_b), acc) in block order, so every row gets exactly the bits of
// gemv1Q4_0AVX2 / blkDot1 (TestGemv8, TestGemvZ).
//
// Prefetch: as gemv8Q4_0AVX2, each block step prefetches the next 288 bytes
// (16·18) of the region pf bytes ahead of the group.

#include "textflag.h"
#include "q4_0_blocksum_vnni_amd64.h"

// func gemv16Q4_0Z(rows *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)
// Groups of 16 contiguous Q4_0 rows (18·nb bytes each); out[16g+r] is row
// r of group g. ngroups ≥ 1, nb ≥ 1.
TEXT ·gemv16Q4_0Z(SB), NOSPLIT, $0-64
	GEMV16Z(Q4BLOCKSUM)
