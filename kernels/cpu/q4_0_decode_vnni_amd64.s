// Q4_0 decode kernel on the decode layout (q4_0_decode.go): groups of 16 rows, lane
// r of a zmm = row r. Per block (288 contiguous bytes): one VCVTPH2PS of
// the 16 F16 scales, four 64-byte loads of the nibble dwords; VPDPBUSD of
// the masked nibbles (unsigned) with the broadcast activation dword gives
// the exact Σ u·q, and subtracting s8 = 8·Σq leaves the block sum I_b.
// Then the canonical float arithmetic of the blocked kernels (dot_blk.go):
// acc = fma(dw·dx, float32(I_b), acc) in block order, bitwise
// gemv1Q4_0AVX2 / blkDot1 on the row-major rows (TestQ4ZGemv).
//
// Groups are contiguous (16·rb = 288·nb bytes), so the kernel streams one
// region; each block prefetches the 288 bytes pf bytes ahead.

#include "textflag.h"
#include "q4_0_blocksum_vnni_amd64.h"

// func gemv16Q4_0P(grp *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)
// ngroups ≥ 1, nb ≥ 1; out[16g+r] is row r of group g.
TEXT ·gemv16Q4_0P(SB), NOSPLIT, $0-64
	MOVQ grp+0(FP), SI
	MOVQ ngroups+8(FP), R10
	MOVQ pf+48(FP), R14
	ADDQ SI, R14
	MOVQ out+56(FP), AX
	MOVL $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z29
	VPXORD Z31, Z31, Z31

gpgroup:
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ s8+32(FP), BX
	MOVQ nb+40(FP), CX
	VPXORD Z16, Z16, Z16

gploop:
	VCVTPH2PS (SI), Z8
	VMOVDQU32 32(SI), Z0
	VMOVDQU32 96(SI), Z1
	VMOVDQU32 160(SI), Z2
	VMOVDQU32 224(SI), Z3
	PREFETCHT0 0(R14)
	PREFETCHT0 64(R14)
	PREFETCHT0 128(R14)
	PREFETCHT0 192(R14)
	PREFETCHT0 256(R14)
	Q4BLOCKSUM
	VCVTDQ2PS Z10, Z10
	VMULPS.BCST (DX), Z8, Z8
	VFMADD231PS Z10, Z8, Z16
	ADDQ $288, SI
	ADDQ $288, R14
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, BX
	DECQ CX
	JNZ gploop

	VMOVUPS Z16, (AX)
	ADDQ $64, AX
	DECQ R10
	JNZ gpgroup
	VZEROUPPER
	RET
