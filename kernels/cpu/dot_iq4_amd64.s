// AVX2 + FMA + F16C kernels for IQ4_XS against Q8_K activations: one row
// against one token, and one row against four tokens. Twin: dotIQ4_XSGo
// (quant_iq4.go). (IQ4_NL runs the blocked Q8_0 kernels on rows converted
// by iq4_nl_amd64.s.)
//
// A nibble becomes its level with one VPSHUFB from the 16-byte table
// iq4Values (kept in both 128-bit lanes). The products then go as in
// dotQ4_0AVX2: |w| times q8·sign(w) with VPMADDUBSW (|w| ≤ 127, so pair
// sums fit in int16), pairs to int32 lanes by VPMADDWD, which multiplies
// them by the sub-block's signed scale l-32; the eight sub-blocks add up
// exactly in int32 lanes (|Σ| < 2^27), which are converted and
// multiply-added with d·dy once per super-block.
// The lanes are summed by HSUM8. The four-token kernels perform, per
// token, exactly the one-token kernel's float operations (bitwise the
// same results: batch invariance); token t's activations are at
// qs + t·qstride and d + t·dstride.

#include "textflag.h"
#include "iq4_levels_amd64.h"
#include "hsum8_amd64.h"

DATA iq4m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iq4m0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iq4m0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iq4m0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL iq4m0f<>(SB), RODATA|NOPTR, $32

// IQ4VALS: the 16 bytes of nibbles at m as 32 signed levels in W (low
// lane: elements 0..15, high lane: 16..31) and their magnitudes in A.
// Y15: 0x0f bytes, Y12: the table; T is clobbered.
#define IQ4VALS(m, W, XW, A, T, XT) \
	VMOVDQU     m, XW; \
	VPSRLW      $4, XW, XT; \
	VINSERTI128 $1, XT, W, W; \
	VPAND       Y15, W, W; \
	VPSHUFB     W, Y12, W; \
	VPSIGNB     W, W, A

// IQ4PAIRS: the int32 lane sums of levels × 32 activations at mq, each
// pair weighted by the int16 words of S (the sub-block scale), into D. W: levels, A: their magnitudes.
#define IQ4PAIRS(mq, W, A, S, D) \
	VMOVDQU    mq, D; \
	VPSIGNB    W, D, D; \
	VPMADDUBSW D, A, D; \
	VPMADDWD   S, D, D

#define IQ4CONSTS \
	VMOVDQU        iq4m0f<>(SB), Y15; \
	VBROADCASTI128 iq4lev<>(SB), Y12

#define X4PROLOGUE \
	MOVQ   row+0(FP), SI; \
	MOVQ   qs+8(FP), DI; \
	MOVQ   d+16(FP), DX; \
	MOVQ   nb+24(FP), CX; \
	MOVQ   qstride+32(FP), R8; \
	MOVQ   dstride+40(FP), R10; \
	LEAQ   (R8)(R8*2), R9; \
	LEAQ   (R10)(R10*2), R11; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	IQ4CONSTS

// X4STORE: the four tokens' sums (accumulators Y0, Y1, Y8, Y9) to out.
#define X4STORE \
	MOVQ   out+48(FP), AX; \
	HSUM8(Y0, X0, X3); \
	VMOVSS X0, (AX); \
	HSUM8(Y1, X1, X3); \
	VMOVSS X1, 4(AX); \
	HSUM8(Y8, X8, X3); \
	VMOVSS X8, 8(AX); \
	HSUM8(Y9, X9, X3); \
	VMOVSS X9, 12(AX); \
	VZEROUPPER

// XSSCALE: the next sub-block's signed scale l-32 as int16 words in Y14,
// from R12 (scales_h, shifted 2 bits per sub-block) and R13 (scales_l,
// shifted 4 bits per sub-block). AX and BX are clobbered.
#define XSSCALE \
	MOVL         R13, AX; \
	ANDL         $15, AX; \
	MOVL         R12, BX; \
	ANDL         $3, BX; \
	SHLL         $4, BX; \
	ORL          BX, AX; \
	SUBL         $32, AX; \
	VMOVD        AX, X14; \
	VPBROADCASTW X14, Y14; \
	SHRL         $4, R13; \
	SHRL         $2, R12

// XS1SUB: one sub-block of dotIQ4_XSAVX2, its nibbles at off(SI).
#define XS1SUB(off) \
	XSSCALE; \
	IQ4VALS(off(SI), Y2, X2, Y4, Y3, X3); \
	IQ4PAIRS((DI), Y2, Y4, Y14, Y5); \
	VPADDD Y5, Y6, Y6; \
	ADDQ   $32, DI

// XSTOK: one token's sub-block step of dotIQ4_XSx4AVX2 into int32 lanes I.
#define XSTOK(mq, I) \
	IQ4PAIRS(mq, Y2, Y4, Y14, Y5); \
	VPADDD Y5, I, I

// XSEND: one token's super-block end: ACC += float(I)·(d·dy) (Y6: d).
#define XSEND(md, I, ACC) \
	VBROADCASTSS md, Y7; \
	VMULPS       Y7, Y6, Y7; \
	VCVTDQ2PS    I, I; \
	VFMADD231PS  I, Y7, ACC

// XS4SUB: one sub-block of dotIQ4_XSx4AVX2, its nibbles at off(SI).
#define XS4SUB(off) \
	XSSCALE; \
	IQ4VALS(off(SI), Y2, X2, Y4, Y7, X7); \
	XSTOK((DI), Y10); \
	XSTOK((DI)(R8*1), Y11); \
	XSTOK((DI)(R8*2), Y3); \
	XSTOK((DI)(R9*1), Y13); \
	ADDQ $32, DI

// func dotIQ4_XSAVX2(row *byte, qs *int8, d *float32, nb int) float32
TEXT ·dotIQ4_XSAVX2(SB), NOSPLIT, $0-36
	MOVQ row+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ nb+24(FP), CX
	VXORPS Y0, Y0, Y0
	IQ4CONSTS
	TESTQ  CX, CX
	JLE    xs1done

xs1loop:
	MOVWLZX 2(SI), R12
	MOVL    4(SI), R13
	VPXOR   Y6, Y6, Y6 // int32 lanes of the super-block
	XS1SUB(8)
	XS1SUB(24)
	XS1SUB(40)
	XS1SUB(56)
	XS1SUB(72)
	XS1SUB(88)
	XS1SUB(104)
	XS1SUB(120)

	VPBROADCASTW (SI), X1
	VCVTPH2PS    X1, Y1
	VBROADCASTSS (DX), Y3
	VMULPS       Y3, Y1, Y1 // d·dy
	VCVTDQ2PS    Y6, Y6
	VFMADD231PS  Y6, Y1, Y0
	ADDQ         $136, SI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          xs1loop

xs1done:
	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// func dotIQ4_XSx4AVX2(row *byte, qs *int8, d *float32, nb, qstride, dstride int, out *float32)
TEXT ·dotIQ4_XSx4AVX2(SB), NOSPLIT, $0-56
	X4PROLOGUE
	TESTQ CX, CX
	JLE   xs4done

xs4loop:
	MOVWLZX 2(SI), R12
	MOVL    4(SI), R13
	VPXOR   Y10, Y10, Y10
	VPXOR   Y11, Y11, Y11
	VPXOR   Y3, Y3, Y3
	VPXOR   Y13, Y13, Y13
	XS4SUB(8)
	XS4SUB(24)
	XS4SUB(40)
	XS4SUB(56)
	XS4SUB(72)
	XS4SUB(88)
	XS4SUB(104)
	XS4SUB(120)

	VPBROADCASTW (SI), X6
	VCVTPH2PS    X6, Y6
	XSEND((DX), Y10, Y0)
	XSEND((DX)(R10*1), Y11, Y1)
	XSEND((DX)(R10*2), Y3, Y8)
	XSEND((DX)(R11*1), Y13, Y9)
	ADDQ         $136, SI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          xs4loop

xs4done:
	X4STORE
	RET
