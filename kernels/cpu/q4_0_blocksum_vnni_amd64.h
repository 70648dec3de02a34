// Shared by the AVX-512 VNNI decode kernels of Q4_0-shaped blocks (an F16
// scale, then 16 bytes of nibbles: Q4_0 and IQ4_NL): dot_gemv16_vnni_amd64.s,
// q4_0_decode_vnni_amd64.s, iq4_gemv_amd64.s.

// Q4BLOCKSUM: the exact Q4_0 block sums I_b of 16 rows in Z10 (int32, lane
// r = row r) from the nibble dwords Z0..Z3 (Zk lane r = bytes 4k..4k+3 of
// row r's 16 nibble bytes), the token's activations at DI (32 int8) and
// its s8 = 8·Σq at (BX): Σ u·q by VPDPBUSD of the masked nibbles against
// the broadcast activation dwords (low nibbles: elements 4k..4k+3, high:
// 16+4k..), minus s8. Z29 = 0x0f bytes, Z31 = 0. Clobbers Z0..Z7, Z11.
#define Q4BLOCKSUM \
	VPSUBD.BCST (BX), Z31, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPANDD Z29, Z0, Z4; \
	VPDPBUSD.BCST 0(DI), Z4, Z10; \
	VPSRLD $4, Z0, Z0; \
	VPANDD Z29, Z0, Z0; \
	VPDPBUSD.BCST 16(DI), Z0, Z11; \
	VPANDD Z29, Z1, Z5; \
	VPDPBUSD.BCST 4(DI), Z5, Z10; \
	VPSRLD $4, Z1, Z1; \
	VPANDD Z29, Z1, Z1; \
	VPDPBUSD.BCST 20(DI), Z1, Z11; \
	VPANDD Z29, Z2, Z6; \
	VPDPBUSD.BCST 8(DI), Z6, Z10; \
	VPSRLD $4, Z2, Z2; \
	VPANDD Z29, Z2, Z2; \
	VPDPBUSD.BCST 24(DI), Z2, Z11; \
	VPANDD Z29, Z3, Z7; \
	VPDPBUSD.BCST 12(DI), Z7, Z10; \
	VPSRLD $4, Z3, Z3; \
	VPANDD Z29, Z3, Z3; \
	VPDPBUSD.BCST 28(DI), Z3, Z11; \
	VPADDD Z11, Z10, Z10

// GEMV16Z(BLOCKSUM): the body of gemv16Q4_0Z (dot_gemv16_vnni_amd64.s) with
// BLOCKSUM (Q4BLOCKSUM or iq4_gemv_amd64.s's I4BLOCKSUM) giving a block's
// exact sums I_b of the 16 rows in Z10 from the transposed nibble dwords
// Z0..Z3. Arguments (rows, ngroups, qs, d, s8, nb, pf, out) as
// gemv16Q4_0Z's; Z28 and Z30 are left alone.
#define GEMV16Z(BLOCKSUM) \
	MOVQ rows+0(FP), R15; \
	MOVQ ngroups+8(FP), R10; \
	MOVQ nb+40(FP), R8; \
	MOVQ out+56(FP), AX; \
	LEAQ (R8)(R8*8), R8; \
	ADDQ R8, R8; \
	LEAQ (R8)(R8*2), R9; \
	MOVL $0x0f0f0f0f, DX; \
	VPBROADCASTD DX, Z29; \
	VPXORD Z31, Z31, Z31; \
	MOVL $0x00f0, DX; \
	KMOVW DX, K1; \
	MOVL $0x0f00, DX; \
	KMOVW DX, K2; \
	MOVL $0xf000, DX; \
	KMOVW DX, K3; \
gzgroup: \
	MOVQ R15, SI; \
	LEAQ (R15)(R8*4), R11; \
	LEAQ (R11)(R8*4), R12; \
	LEAQ (R12)(R8*4), R13; \
	MOVQ pf+48(FP), R14; \
	ADDQ R15, R14; \
	MOVQ qs+16(FP), DI; \
	MOVQ d+24(FP), DX; \
	MOVQ s8+32(FP), BX; \
	MOVQ nb+40(FP), CX; \
	VPXORD Z16, Z16, Z16; \
gzloop: \
	VMOVDQU (SI), X12; \
	VBROADCASTI32X4 (R11), K1, Z12; \
	VBROADCASTI32X4 (R12), K2, Z12; \
	VBROADCASTI32X4 (R13), K3, Z12; \
	VMOVDQU (SI)(R8*1), X13; \
	VBROADCASTI32X4 (R11)(R8*1), K1, Z13; \
	VBROADCASTI32X4 (R12)(R8*1), K2, Z13; \
	VBROADCASTI32X4 (R13)(R8*1), K3, Z13; \
	VMOVDQU (SI)(R8*2), X14; \
	VBROADCASTI32X4 (R11)(R8*2), K1, Z14; \
	VBROADCASTI32X4 (R12)(R8*2), K2, Z14; \
	VBROADCASTI32X4 (R13)(R8*2), K3, Z14; \
	VMOVDQU (SI)(R9*1), X15; \
	VBROADCASTI32X4 (R11)(R9*1), K1, Z15; \
	VBROADCASTI32X4 (R12)(R9*1), K2, Z15; \
	VBROADCASTI32X4 (R13)(R9*1), K3, Z15; \
	VPUNPCKLDQ Z13, Z12, Z12; \
	VPUNPCKLDQ Z15, Z14, Z14; \
	VPUNPCKLQDQ Z14, Z12, Z8; \
	VMOVDQU 2(SI), X0; \
	VBROADCASTI32X4 2(R11), K1, Z0; \
	VBROADCASTI32X4 2(R12), K2, Z0; \
	VBROADCASTI32X4 2(R13), K3, Z0; \
	VMOVDQU 2(SI)(R8*1), X1; \
	VBROADCASTI32X4 2(R11)(R8*1), K1, Z1; \
	VBROADCASTI32X4 2(R12)(R8*1), K2, Z1; \
	VBROADCASTI32X4 2(R13)(R8*1), K3, Z1; \
	VMOVDQU 2(SI)(R8*2), X2; \
	VBROADCASTI32X4 2(R11)(R8*2), K1, Z2; \
	VBROADCASTI32X4 2(R12)(R8*2), K2, Z2; \
	VBROADCASTI32X4 2(R13)(R8*2), K3, Z2; \
	VMOVDQU 2(SI)(R9*1), X3; \
	VBROADCASTI32X4 2(R11)(R9*1), K1, Z3; \
	VBROADCASTI32X4 2(R12)(R9*1), K2, Z3; \
	VBROADCASTI32X4 2(R13)(R9*1), K3, Z3; \
	PREFETCHT0 0(R14); \
	PREFETCHT0 64(R14); \
	PREFETCHT0 128(R14); \
	PREFETCHT0 192(R14); \
	PREFETCHT0 256(R14); \
	VPUNPCKLDQ Z1, Z0, Z4; \
	VPUNPCKHDQ Z1, Z0, Z5; \
	VPUNPCKLDQ Z3, Z2, Z6; \
	VPUNPCKHDQ Z3, Z2, Z7; \
	VPUNPCKLQDQ Z6, Z4, Z0; \
	VPUNPCKHQDQ Z6, Z4, Z1; \
	VPUNPCKLQDQ Z7, Z5, Z2; \
	VPUNPCKHQDQ Z7, Z5, Z3; \
	BLOCKSUM; \
	VCVTDQ2PS Z10, Z10; \
	VPMOVDW Z8, Y8; \
	VCVTPH2PS Y8, Z8; \
	VMULPS.BCST (DX), Z8, Z8; \
	VFMADD231PS Z10, Z8, Z16; \
	ADDQ $18, SI; \
	ADDQ $18, R11; \
	ADDQ $18, R12; \
	ADDQ $18, R13; \
	ADDQ $288, R14; \
	ADDQ $32, DI; \
	ADDQ $4, DX; \
	ADDQ $4, BX; \
	DECQ CX; \
	JNZ gzloop; \
	VMOVUPS Z16, (AX); \
	ADDQ $64, AX; \
	LEAQ (R15)(R8*8), R15; \
	LEAQ (R15)(R8*8), R15; \
	DECQ R10; \
	JNZ gzgroup; \
	VZEROUPPER; \
	RET
