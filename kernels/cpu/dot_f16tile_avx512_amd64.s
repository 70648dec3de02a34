// AVX-512 F16 prefill tile: four rows × six tokens = 24 (row, token)
// pairs per register tile, several row groups per call.
//
// The canonical F16 dot (dotF16AVX2) keeps two 8-lane accumulator chains
// per pair: chain 0 takes elements [16j, 16j+8), chain 1 elements
// [16j+8, 16j+16), one FMA per chain and step j in increasing j; a final
// 8-element tail (n%16 == 8) goes into chain 0; the result is
// HSUM8(chain0 + chain1). Here one zmm accumulator holds both chains of a
// pair: lanes 0-7 chain 0, lanes 8-15 chain 1. VCVTPH2PS of 16 halves and
// a 16-float activation load put elements [16j, 16j+8) in lanes 0-7 and
// [16j+8, 16j+16) in lanes 8-15, so one 512-bit FMA is exactly the two
// 256-bit FMAs of step j; the tail is an FMA merge-masked to lanes 0-7
// (chain 1 untouched). After the last block FIN4 adds the halves and
// reduces with the additions of HSUM8 (dot_amd64.s) straight from the
// registers, so every pair is bitwise dotF16AVX2.
//
// Per 16 elements and 24 FMAs: 4 conversions + 6 activation loads; all 32
// zmm registers are used (Z0-Z23 accumulators, Z24-Z27 rows, Z28-Z31
// tokens). As in dot_f16tile_amd64.s the block loop (64 steps, 1024
// elements: 24 KiB of activations that stay in L1) is outside the group
// loop and the accumulators live in acc between blocks (the first block
// starts from zero, the last one stores the results); the step loop is
// unrolled twice.

#include "textflag.h"

// acc layout per row group ([24][16]float32, 1536 bytes): pair p = 6·row +
// token at acc + 64·p.

#define LOADACCZ \
	VMOVUPS 0(AX), Z0; \
	VMOVUPS 64(AX), Z1; \
	VMOVUPS 128(AX), Z2; \
	VMOVUPS 192(AX), Z3; \
	VMOVUPS 256(AX), Z4; \
	VMOVUPS 320(AX), Z5; \
	VMOVUPS 384(AX), Z6; \
	VMOVUPS 448(AX), Z7; \
	VMOVUPS 512(AX), Z8; \
	VMOVUPS 576(AX), Z9; \
	VMOVUPS 640(AX), Z10; \
	VMOVUPS 704(AX), Z11; \
	VMOVUPS 768(AX), Z12; \
	VMOVUPS 832(AX), Z13; \
	VMOVUPS 896(AX), Z14; \
	VMOVUPS 960(AX), Z15; \
	VMOVUPS 1024(AX), Z16; \
	VMOVUPS 1088(AX), Z17; \
	VMOVUPS 1152(AX), Z18; \
	VMOVUPS 1216(AX), Z19; \
	VMOVUPS 1280(AX), Z20; \
	VMOVUPS 1344(AX), Z21; \
	VMOVUPS 1408(AX), Z22; \
	VMOVUPS 1472(AX), Z23

#define STOREACCZ \
	VMOVUPS Z0, 0(AX); \
	VMOVUPS Z1, 64(AX); \
	VMOVUPS Z2, 128(AX); \
	VMOVUPS Z3, 192(AX); \
	VMOVUPS Z4, 256(AX); \
	VMOVUPS Z5, 320(AX); \
	VMOVUPS Z6, 384(AX); \
	VMOVUPS Z7, 448(AX); \
	VMOVUPS Z8, 512(AX); \
	VMOVUPS Z9, 576(AX); \
	VMOVUPS Z10, 640(AX); \
	VMOVUPS Z11, 704(AX); \
	VMOVUPS Z12, 768(AX); \
	VMOVUPS Z13, 832(AX); \
	VMOVUPS Z14, 896(AX); \
	VMOVUPS Z15, 960(AX); \
	VMOVUPS Z16, 1024(AX); \
	VMOVUPS Z17, 1088(AX); \
	VMOVUPS Z18, 1152(AX); \
	VMOVUPS Z19, 1216(AX); \
	VMOVUPS Z20, 1280(AX); \
	VMOVUPS Z21, 1344(AX); \
	VMOVUPS Z22, 1408(AX); \
	VMOVUPS Z23, 1472(AX)

// FMA4(x, a) multiplies token register x by the four rows into the
// accumulators of rows 0-3 for one token (a = Z(token), Z(6+token), ...).
#define FMA4(x, a0, a1, a2, a3) \
	VFMADD231PS x, Z24, a0; \
	VFMADD231PS x, Z25, a1; \
	VFMADD231PS x, Z26, a2; \
	VFMADD231PS x, Z27, a3

// STEPZ: 16 elements at byte offsets wo (rows 0-2 from R10, R8 apart; row
// 3 at R14) and xo (tokens 0-2 from R11, R9 apart; 3-5 from R12).
#define STEPZ(wo, xo) \
	VCVTPH2PS wo(R10), Z24; \
	VCVTPH2PS wo(R10)(R8*1), Z25; \
	VCVTPH2PS wo(R10)(R8*2), Z26; \
	VCVTPH2PS wo(R14), Z27; \
	VMOVUPS   xo(R11), Z28; \
	VMOVUPS   xo(R11)(R9*1), Z29; \
	FMA4(Z28, Z0, Z6, Z12, Z18); \
	VMOVUPS   xo(R11)(R9*2), Z30; \
	FMA4(Z29, Z1, Z7, Z13, Z19); \
	VMOVUPS   xo(R12), Z31; \
	FMA4(Z30, Z2, Z8, Z14, Z20); \
	VMOVUPS   xo(R12)(R9*1), Z28; \
	FMA4(Z31, Z3, Z9, Z15, Z21); \
	VMOVUPS   xo(R12)(R9*2), Z29; \
	FMA4(Z28, Z4, Z10, Z16, Z22); \
	FMA4(Z29, Z5, Z11, Z17, Z23)

// FMA4K: FMA4 merge-masked by K1 (lanes 0-7: chain 0 only).
#define FMA4K(x, a0, a1, a2, a3) \
	VFMADD231PS x, Z24, K1, a0; \
	VFMADD231PS x, Z25, K1, a1; \
	VFMADD231PS x, Z26, K1, a2; \
	VFMADD231PS x, Z27, K1, a3

// TAILZ: the last 8 elements (n%16 == 8) into chain 0. The VEX loads zero
// lanes 8-15 of the sources; the mask keeps chain 1 as it is.
#define TAILZ \
	VCVTPH2PS (R10), Y24; \
	VCVTPH2PS (R10)(R8*1), Y25; \
	VCVTPH2PS (R10)(R8*2), Y26; \
	VCVTPH2PS (R14), Y27; \
	VMOVUPS   (R11), Y28; \
	VMOVUPS   (R11)(R9*1), Y29; \
	VMOVUPS   (R11)(R9*2), Y30; \
	VMOVUPS   (R12), Y31; \
	FMA4K(Z28, Z0, Z6, Z12, Z18); \
	FMA4K(Z29, Z1, Z7, Z13, Z19); \
	FMA4K(Z30, Z2, Z8, Z14, Z20); \
	FMA4K(Z31, Z3, Z9, Z15, Z21); \
	VMOVUPS   (R12)(R9*1), Y28; \
	VMOVUPS   (R12)(R9*2), Y29; \
	FMA4K(Z28, Z4, Z10, Z16, Z22); \
	FMA4K(Z29, Z5, Z11, Z17, Z23)

// Pass pointers: R10 rows of the group (SI), R14 its fourth row, R11
// tokens (DI), R12 the fourth to sixth tokens: DI + 3·R9.
#define PTRSZ \
	MOVQ SI, R10; \
	LEAQ (SI)(R8*2), R14; \
	ADDQ R8, R14; \
	MOVQ DI, R11; \
	LEAQ (DI)(R9*2), R12; \
	ADDQ R9, R12

// FIN4(a0, a1, a2, a3): the results of one token for rows 0-3 (their
// accumulators a0-a3) stored as one 16-byte vector at (R12). Each row gets
// the same additions on the same operands in the same order as
// HSUM8(chain0 + chain1) in dotF16AVX2, run on its own 128-bit lane:
//	s = chain0 + chain1           (lanes 0-7 + lanes 8-15)
//	t[i] = s[i] + s[i+4]          (i < 4)
//	u[i] = t[i] + t[i+2]          (i < 2)
//	out = u[0] + u[1]
// and lanes 0, 4, 8, 12 (rows 0-3) are compressed by K2 into one vector.
#define FIN4(a0, a1, a2, a3) \
	VSHUFF32X4  $0x44, a1, a0, Z24; \
	VSHUFF32X4  $0xEE, a1, a0, Z25; \
	VADDPS      Z25, Z24, Z24; \
	VSHUFF32X4  $0x44, a3, a2, Z26; \
	VSHUFF32X4  $0xEE, a3, a2, Z27; \
	VADDPS      Z27, Z26, Z26; \
	VSHUFF32X4  $0x88, Z26, Z24, Z28; \
	VSHUFF32X4  $0xDD, Z26, Z24, Z29; \
	VADDPS      Z29, Z28, Z28; \
	VPERMILPS   $0xEE, Z28, Z29; \
	VADDPS      Z29, Z28, Z28; \
	VPERMILPS   $0x01, Z28, Z29; \
	VADDPS      Z29, Z28, Z28; \
	VCOMPRESSPS Z28, K2, Z30; \
	VMOVUPS     X30, (R12); \
	ADDQ        R11, R12

#define ZEROACCZ \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23

// func f16Tile4x6AVX512(rows *byte, rb, ng int, x *float32, n, xstride int, acc *byte, dst *float32, dstride int)
// ng ≥ 1 groups of four rows (group g at rows + 4g·rb, rows rb bytes
// apart) × six tokens (x + t·xstride bytes), elements [0, n) of each, n a
// multiple of 8 (n ≥ 8): the result of row r of group g and token t,
// bitwise dotF16AVX2, is stored at dst + t·dstride + 4·(4g + r) bytes.
// acc (1536 bytes per group, pair p = 6·row + token at acc + 64·p) holds
// the accumulators between blocks of 1024 elements; it needs no zeroing.
// Arguments: rows+0, rb+8, ng+16, x+24, n+32, xstride+40, acc+48, dst+56,
// dstride+64; rows+0(FP) is reused as the current block's start in the
// rows and dst+56(FP) as the current group's results.
TEXT ·f16Tile4x6AVX512(SB), NOSPLIT, $0-72
	MOVQ  rb+8(FP), R8
	MOVQ  x+24(FP), DI
	MOVQ  n+32(FP), BX
	MOVQ  xstride+40(FP), R9
	MOVQ  $0xff, R13
	KMOVW R13, K1
	MOVQ  $0x1111, R13
	KMOVW R13, K2
	SHRQ  $4, BX

zblk:
	MOVQ BX, DX
	CMPQ DX, $64
	JLE  zgo
	MOVQ $64, DX

zgo:
	SUBQ DX, BX // BX == 0: last pass (with the tail)
	MOVQ rows+0(FP), SI
	MOVQ acc+48(FP), AX
	MOVQ ng+16(FP), CX

zgrp:
	CMPQ DI, x+24(FP)
	JNE  zload
	ZEROACCZ
	JMP  zptrs

zload:
	LOADACCZ

zptrs:
	PTRSZ
	MOVQ DX, R13
	SHRQ $1, R13
	JZ   zone

zloop:
	STEPZ(0, 0)
	STEPZ(32, 64)
	ADDQ $64, R10
	ADDQ $64, R14
	ADDQ $128, R11
	ADDQ $128, R12
	DECQ R13
	JNZ  zloop

zone:
	TESTQ $1, DX
	JZ    zend
	STEPZ(0, 0)
	ADDQ  $32, R10
	ADDQ  $32, R14
	ADDQ  $64, R11
	ADDQ  $64, R12

zend:
	TESTQ BX, BX
	JNZ   zstore
	MOVQ  n+32(FP), R13
	TESTQ $8, R13
	JZ    zfin
	TAILZ

zfin:
	MOVQ dst+56(FP), R12
	MOVQ dstride+64(FP), R11
	FIN4(Z0, Z6, Z12, Z18)
	FIN4(Z1, Z7, Z13, Z19)
	FIN4(Z2, Z8, Z14, Z20)
	FIN4(Z3, Z9, Z15, Z21)
	FIN4(Z4, Z10, Z16, Z22)
	FIN4(Z5, Z11, Z17, Z23)
	ADDQ $16, dst+56(FP)
	JMP  znext

zstore:
	STOREACCZ

znext:
	ADDQ $1536, AX
	LEAQ (SI)(R8*4), SI
	DECQ CX
	JNZ  zgrp
	TESTQ BX, BX
	JZ   zdone
	MOVQ DX, R13
	SHLQ $5, R13
	ADDQ R13, rows+0(FP)
	SHLQ $1, R13
	ADDQ R13, DI
	JMP  zblk

zdone:
	VZEROUPPER
	RET
