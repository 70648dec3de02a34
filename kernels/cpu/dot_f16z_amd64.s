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
// (chain 1 untouched). f16FinStoreAVX512 adds the halves and reduces with
// the HSUM8 of dot_amd64.s, so every pair is bitwise dotF16AVX2.
//
// Per 16 elements and 24 FMAs: 4 conversions + 6 activation loads; all 32
// zmm registers are used (Z0-Z23 accumulators, Z24-Z27 rows, Z28-Z31
// tokens). As in dot_f16tile_amd64.s the block loop (32 steps, 512
// elements: 12 KiB of activations that stay in L1) is outside the group
// loop and the accumulators live in acc between blocks; the step loop is
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

// func f16Tile4x6AVX512(rows *byte, rb, ng int, x *float32, n, xstride int, acc *byte)
// ng ≥ 1 groups of four rows (group g at rows + 4g·rb, rows rb bytes
// apart) × six tokens (x + t·xstride bytes), elements [0, n) of each, n a
// multiple of 8; accumulates into acc[g] (1536 bytes each, zeroed by the
// caller before the first call).
// Arguments: rows+0, rb+8, ng+16, x+24, n+32, xstride+40, acc+48;
// rows+0(FP) is reused as the current block's start in the rows.
TEXT ·f16Tile4x6AVX512(SB), NOSPLIT, $0-56
	MOVQ rb+8(FP), R8
	MOVQ x+24(FP), DI
	MOVQ n+32(FP), BX
	MOVQ xstride+40(FP), R9
	SHRQ $4, BX

zblk:
	TESTQ BX, BX
	JZ    ztail
	MOVQ  BX, DX
	CMPQ  DX, $32
	JLE   zgo
	MOVQ  $32, DX

zgo:
	SUBQ DX, BX
	MOVQ rows+0(FP), SI
	MOVQ acc+48(FP), AX
	MOVQ ng+16(FP), CX

zgrp:
	LOADACCZ
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
	JZ    zstore
	STEPZ(0, 0)

zstore:
	STOREACCZ
	ADDQ $1536, AX
	LEAQ (SI)(R8*4), SI
	DECQ CX
	JNZ  zgrp
	MOVQ DX, R13
	SHLQ $5, R13
	ADDQ R13, rows+0(FP)
	SHLQ $1, R13
	ADDQ R13, DI
	JMP  zblk

ztail:
	MOVQ  n+32(FP), R13
	TESTQ $8, R13
	JZ    zdone
	MOVQ  $0xff, R13
	KMOVW R13, K1
	MOVQ  rows+0(FP), SI
	MOVQ  acc+48(FP), AX
	MOVQ  ng+16(FP), CX

ztgrp:
	LOADACCZ
	PTRSZ
	TAILZ
	STOREACCZ
	ADDQ $1536, AX
	LEAQ (SI)(R8*4), SI
	DECQ CX
	JNZ  ztgrp

zdone:
	VZEROUPPER
	RET

// func f16FinStoreAVX512(acc *byte, np int, dst *float32, dstride, nt int)
// For pairs p < np (np a multiple of nt; row group g, row r and token t
// are p = nt·(rows·g + r) + t, i.e. rows are consecutive across groups):
// out = HSUM8(lanes 0-7 + lanes 8-15 of acc[p]), stored at dst +
// t·dstride + (p/nt)·4 bytes; acc is zeroed for the next token group. The
// reduction is that of dotF16AVX2 (VADDPS chain1, chain0; HSUM8).
TEXT ·f16FinStoreAVX512(SB), NOSPLIT, $0-40
	MOVQ   acc+0(FP), AX
	MOVQ   np+8(FP), CX
	MOVQ   dst+16(FP), DI
	MOVQ   dstride+24(FP), R9
	VXORPS Y2, Y2, Y2

zfsrow:
	MOVQ nt+32(FP), R11
	MOVQ DI, R12

zfstok:
	VMOVUPS      (AX), Y0
	VADDPS       32(AX), Y0, Y0
	VMOVUPS      Y2, (AX)
	VMOVUPS      Y2, 32(AX)
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VPSHUFD      $1, X0, X1
	VADDSS       X1, X0, X0
	VMOVSS       X0, (R12)
	ADDQ         $64, AX
	ADDQ         R9, R12
	DECQ         R11
	SUBQ         $1, CX
	JZ           zfsdone
	TESTQ        R11, R11
	JNZ          zfstok
	ADDQ         $4, DI
	JMP          zfsrow

zfsdone:
	VZEROUPPER
	RET

// func f16FinStore4x6AVX512(acc *byte, ng int, dst *float32, dstride int)
// f16FinStoreAVX512 for ng ≥ 1 whole groups of four rows × six tokens,
// four pairs (the rows of one token) at a time: the same additions on the
// same operands in the same order as HSUM8(chain0 + chain1), run on
// 128-bit lanes, one per row:
//	s = chain0 + chain1           (lanes 0-7)
//	t[i] = s[i] + s[i+4]          (i < 4)
//	u[i] = t[i] + t[i+2]          (i < 2)
//	out = u[0] + u[1]
// then lanes 0, 4, 8, 12 (rows 0-3) are stored as one 16-byte vector at
// dst + t·dstride + 16·g bytes; acc is zeroed for the next token group.
TEXT ·f16FinStore4x6AVX512(SB), NOSPLIT, $0-32
	MOVQ    acc+0(FP), AX
	MOVQ    ng+8(FP), CX
	MOVQ    dst+16(FP), DI
	MOVQ    dstride+24(FP), R9
	VPXORD  Z31, Z31, Z31
	MOVQ    $0x1111, R13
	KMOVW   R13, K2

zf4group:
	MOVQ AX, SI
	MOVQ DI, R12
	MOVQ $6, R11

zf4tok:
	VMOVUPS     0(SI), Z0      // row 0: chain 0 | chain 1
	VMOVUPS     384(SI), Z1    // row 1
	VMOVUPS     768(SI), Z2    // row 2
	VMOVUPS     1152(SI), Z3   // row 3
	VMOVUPS     Z31, 0(SI)
	VMOVUPS     Z31, 384(SI)
	VMOVUPS     Z31, 768(SI)
	VMOVUPS     Z31, 1152(SI)
	VSHUFF32X4  $0x44, Z1, Z0, Z4  // chain 0 of rows 0, 1
	VSHUFF32X4  $0xEE, Z1, Z0, Z5  // chain 1 of rows 0, 1
	VADDPS      Z5, Z4, Z4         // s of rows 0, 1
	VSHUFF32X4  $0x44, Z3, Z2, Z6
	VSHUFF32X4  $0xEE, Z3, Z2, Z7
	VADDPS      Z7, Z6, Z6         // s of rows 2, 3
	VSHUFF32X4  $0x88, Z6, Z4, Z8  // s[0:4] of rows 0-3
	VSHUFF32X4  $0xDD, Z6, Z4, Z9  // s[4:8] of rows 0-3
	VADDPS      Z9, Z8, Z8         // t
	VPERMILPS   $0xEE, Z8, Z9      // t[2:4]
	VADDPS      Z9, Z8, Z8         // u
	VPERMILPS   $0x01, Z8, Z9      // u[1]
	VADDPS      Z9, Z8, Z8         // out in lanes 0, 4, 8, 12
	VCOMPRESSPS Z8, K2, Z10
	VMOVUPS     X10, (R12)
	ADDQ        $64, SI
	ADDQ        R9, R12
	DECQ        R11
	JNZ         zf4tok
	ADDQ        $1536, AX
	ADDQ        $16, DI
	DECQ        CX
	JNZ         zf4group
	VZEROUPPER
	RET
