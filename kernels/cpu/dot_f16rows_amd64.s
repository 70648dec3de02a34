// F16 rows × two or three tokens for MatMul: one row at a time, every
// token's two accumulator chains in registers, with the one-token decode
// kernel's software prefetch (gemvF16AVX2). Each (row, token) result is
// bitwise dotF16AVX2's: chain 0 takes elements [16j, 16j+8) and chain 1
// [16j+8, 16j+16) in increasing j, an 8-element tail goes into chain 0,
// then HSUM8(chain0 + chain1). A row is read from memory once for all the
// tokens, so a step of a few decoding sequences, or one sequence verifying
// drafts, streams the weights at about the one-token rate.
//
// At four or more tokens the loads of the activations (one per FMA) make
// these kernels slower than the tiles (dot_f16tile_amd64.s), which share
// each activation load between two or three rows
// (BenchmarkMatMulFewTokens).
//
// Registers: Y(2t), Y(2t+1) the chains of token t; Y12-Y15 converted row
// elements; SI the row; DI, R12, BX tokens 0, 1, 2 (R9 apart); AX the
// outputs (DX apart).

#include "textflag.h"
#include "hsum8_amd64.h"

// One token (at P, chains A and B) against 32, 16 or 8 converted elements.
#define F32(P, A, B) \
	VFMADD231PS (P), Y12, A; \
	VFMADD231PS 32(P), Y13, B; \
	VFMADD231PS 64(P), Y14, A; \
	VFMADD231PS 96(P), Y15, B

#define F16(P, A, B) \
	VFMADD231PS (P), Y12, A; \
	VFMADD231PS 32(P), Y13, B

#define F8(P, A) VFMADD231PS (P), Y12, A

// A token's result (chains A and B, A's low half XA) stored at OUT.
#define FIN(A, B, XA, OUT) \
	VADDPS B, A, A; \
	HSUM8(A, XA, X15); \
	VMOVSS XA, OUT

#define ZERO2 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3
#define ZERO3 ZERO2; VXORPS Y4, Y4, Y4; VXORPS Y5, Y5, Y5
#define STEP32x2 F32(DI, Y0, Y1); F32(R12, Y2, Y3)
#define STEP32x3 STEP32x2; F32(BX, Y4, Y5)
#define STEP16x2 F16(DI, Y0, Y1); F16(R12, Y2, Y3)
#define STEP16x3 STEP16x2; F16(BX, Y4, Y5)
#define STEP8x2 F8(DI, Y0); F8(R12, Y2)
#define STEP8x3 STEP8x2; F8(BX, Y4)
#define FIN2 FIN(Y0, Y1, X0, (AX)); FIN(Y2, Y3, X2, (AX)(DX*1))
#define FIN3 FIN2; FIN(Y4, Y5, X4, (AX)(DX*2))

// ROWS is the whole kernel for the token count's ZERO, STEP32, STEP16,
// STEP8 and FIN. Arguments: rows+0, nr+8, rb+16, x+24, n8+32, xstride+40,
// pf+48, out+56, ostride+64.
#define ROWS(ZERO, STEP32, STEP16, STEP8, FINS) \
	MOVQ rows+0(FP), R8; \
	MOVQ nr+8(FP), R13; \
	MOVQ rb+16(FP), R10; \
	MOVQ xstride+40(FP), R9; \
	MOVQ pf+48(FP), R11; \
	MOVQ out+56(FP), AX; \
	MOVQ ostride+64(FP), DX; \
row: \
	MOVQ R8, SI; \
	MOVQ x+24(FP), DI; \
	LEAQ (DI)(R9*1), R12; \
	LEAQ (DI)(R9*2), BX; \
	MOVQ n8+32(FP), CX; \
	ZERO; \
	CMPQ CX, $32; \
	JLT  step16; \
loop32: \
	PREFETCHT0 (SI)(R11*1); \
	VCVTPH2PS  (SI), Y12; \
	VCVTPH2PS  16(SI), Y13; \
	VCVTPH2PS  32(SI), Y14; \
	VCVTPH2PS  48(SI), Y15; \
	STEP32; \
	ADDQ $64, SI; \
	ADDQ $128, DI; \
	ADDQ $128, R12; \
	ADDQ $128, BX; \
	SUBQ $32, CX; \
	CMPQ CX, $32; \
	JGE  loop32; \
step16: \
	CMPQ      CX, $16; \
	JLT       tail; \
	VCVTPH2PS (SI), Y12; \
	VCVTPH2PS 16(SI), Y13; \
	STEP16; \
	ADDQ      $32, SI; \
	ADDQ      $64, DI; \
	ADDQ      $64, R12; \
	ADDQ      $64, BX; \
	SUBQ      $16, CX; \
tail: \
	CMPQ      CX, $8; \
	JLT       done; \
	VCVTPH2PS (SI), Y12; \
	STEP8; \
done: \
	FINS; \
	ADDQ $4, AX; \
	ADDQ R10, R8; \
	DECQ R13; \
	JNZ  row; \
	VZEROUPPER; \
	RET

// func f16Rows2AVX2(rows *byte, nr, rb int, x *float32, n8, xstride, pf int, out *float32, ostride int)
// out + t·ostride + 4r (bytes) = dotF16AVX2(rows + r·rb, x + t·xstride, n8)
// for rows r < nr (nr ≥ 1) and tokens t < 2; n8 a multiple of 8; the rows
// are read with a prefetch pf bytes ahead.
TEXT ·f16Rows2AVX2(SB), NOSPLIT, $0-72
	ROWS(ZERO2, STEP32x2, STEP16x2, STEP8x2, FIN2)

// func f16Rows3AVX2(rows *byte, nr, rb int, x *float32, n8, xstride, pf int, out *float32, ostride int)
// f16Rows2AVX2 for three tokens.
TEXT ·f16Rows3AVX2(SB), NOSPLIT, $0-72
	ROWS(ZERO3, STEP32x3, STEP16x3, STEP8x3, FIN3)
