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
	MOVQ rows+0(FP), R15
	MOVQ ngroups+8(FP), R10
	MOVQ nb+40(FP), R8
	MOVQ out+56(FP), AX
	LEAQ (R8)(R8*8), R8 // rb = 18·nb
	ADDQ R8, R8
	LEAQ (R8)(R8*2), R9 // 3·rb
	MOVL $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z29
	VPXORD Z31, Z31, Z31
	MOVL $0x00f0, DX
	KMOVW DX, K1
	MOVL $0x0f00, DX
	KMOVW DX, K2
	MOVL $0xf000, DX
	KMOVW DX, K3

gzgroup:
	MOVQ R15, SI
	LEAQ (R15)(R8*4), R11
	LEAQ (R11)(R8*4), R12
	LEAQ (R12)(R8*4), R13
	MOVQ pf+48(FP), R14
	ADDQ R15, R14
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ s8+32(FP), BX
	MOVQ nb+40(FP), CX
	VPXORD Z16, Z16, Z16

gzloop:
	VMOVDQU (SI), X12
	VBROADCASTI32X4 (R11), K1, Z12
	VBROADCASTI32X4 (R12), K2, Z12
	VBROADCASTI32X4 (R13), K3, Z12
	VMOVDQU (SI)(R8*1), X13
	VBROADCASTI32X4 (R11)(R8*1), K1, Z13
	VBROADCASTI32X4 (R12)(R8*1), K2, Z13
	VBROADCASTI32X4 (R13)(R8*1), K3, Z13
	VMOVDQU (SI)(R8*2), X14
	VBROADCASTI32X4 (R11)(R8*2), K1, Z14
	VBROADCASTI32X4 (R12)(R8*2), K2, Z14
	VBROADCASTI32X4 (R13)(R8*2), K3, Z14
	VMOVDQU (SI)(R9*1), X15
	VBROADCASTI32X4 (R11)(R9*1), K1, Z15
	VBROADCASTI32X4 (R12)(R9*1), K2, Z15
	VBROADCASTI32X4 (R13)(R9*1), K3, Z15
	VPUNPCKLDQ Z13, Z12, Z12
	VPUNPCKLDQ Z15, Z14, Z14
	VPUNPCKLQDQ Z14, Z12, Z8
	VMOVDQU 2(SI), X0
	VBROADCASTI32X4 2(R11), K1, Z0
	VBROADCASTI32X4 2(R12), K2, Z0
	VBROADCASTI32X4 2(R13), K3, Z0
	VMOVDQU 2(SI)(R8*1), X1
	VBROADCASTI32X4 2(R11)(R8*1), K1, Z1
	VBROADCASTI32X4 2(R12)(R8*1), K2, Z1
	VBROADCASTI32X4 2(R13)(R8*1), K3, Z1
	VMOVDQU 2(SI)(R8*2), X2
	VBROADCASTI32X4 2(R11)(R8*2), K1, Z2
	VBROADCASTI32X4 2(R12)(R8*2), K2, Z2
	VBROADCASTI32X4 2(R13)(R8*2), K3, Z2
	VMOVDQU 2(SI)(R9*1), X3
	VBROADCASTI32X4 2(R11)(R9*1), K1, Z3
	VBROADCASTI32X4 2(R12)(R9*1), K2, Z3
	VBROADCASTI32X4 2(R13)(R9*1), K3, Z3
	PREFETCHT0 0(R14)
	PREFETCHT0 64(R14)
	PREFETCHT0 128(R14)
	PREFETCHT0 192(R14)
	PREFETCHT0 256(R14)
	VPUNPCKLDQ Z1, Z0, Z4
	VPUNPCKHDQ Z1, Z0, Z5
	VPUNPCKLDQ Z3, Z2, Z6
	VPUNPCKHDQ Z3, Z2, Z7
	VPUNPCKLQDQ Z6, Z4, Z0
	VPUNPCKHQDQ Z6, Z4, Z1
	VPUNPCKLQDQ Z7, Z5, Z2
	VPUNPCKHQDQ Z7, Z5, Z3
	Q4BLOCKSUM
	VCVTDQ2PS Z10, Z10
	VPMOVDW Z8, Y8
	VCVTPH2PS Y8, Z8
	VMULPS.BCST (DX), Z8, Z8
	VFMADD231PS Z10, Z8, Z16
	ADDQ $18, SI
	ADDQ $18, R11
	ADDQ $18, R12
	ADDQ $18, R13
	ADDQ $288, R14
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, BX
	DECQ CX
	JNZ gzloop

	VMOVUPS Z16, (AX)
	ADDQ $64, AX
	LEAQ (R15)(R8*8), R15
	LEAQ (R15)(R8*8), R15
	DECQ R10
	JNZ gzgroup
	VZEROUPPER
	RET
