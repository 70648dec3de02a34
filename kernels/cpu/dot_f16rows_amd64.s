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
// (BenchmarkMatMulF16FewTokens).
//
// Registers: Y(2t), Y(2t+1) the chains of token t; Y12-Y15 converted row
// elements; DI the tokens (R9 apart); SI the row; AX the outputs (DX
// apart).

#include "textflag.h"

#define HSUM8(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X; \
	VMOVHLPS     X, X, T; \
	VADDPS       T, X, X; \
	VPSHUFD      $1, X, T; \
	VADDSS       T, X, X

// Token 0: 32, 16 and 8 elements; the result.
#define F32T0 \
	VFMADD231PS (DI), Y12, Y0; \
	VFMADD231PS 32(DI), Y13, Y1; \
	VFMADD231PS 64(DI), Y14, Y0; \
	VFMADD231PS 96(DI), Y15, Y1
#define F16T0 \
	VFMADD231PS (DI), Y12, Y0; \
	VFMADD231PS 32(DI), Y13, Y1
#define F8T0 VFMADD231PS (DI), Y12, Y0
#define FINT0 \
	VADDPS Y1, Y0, Y0; \
	HSUM8(Y0, X0, X15); \
	VMOVSS X0, (AX)
#define ZT0 VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1

// Token 1: 32, 16 and 8 elements; the result.
#define F32T1 \
	VFMADD231PS (DI)(R9*1), Y12, Y2; \
	VFMADD231PS 32(DI)(R9*1), Y13, Y3; \
	VFMADD231PS 64(DI)(R9*1), Y14, Y2; \
	VFMADD231PS 96(DI)(R9*1), Y15, Y3
#define F16T1 \
	VFMADD231PS (DI)(R9*1), Y12, Y2; \
	VFMADD231PS 32(DI)(R9*1), Y13, Y3
#define F8T1 VFMADD231PS (DI)(R9*1), Y12, Y2
#define FINT1 \
	VADDPS Y3, Y2, Y2; \
	HSUM8(Y2, X2, X15); \
	VMOVSS X2, (AX)(DX*1)
#define ZT1 VXORPS Y2, Y2, Y2; VXORPS Y3, Y3, Y3

// Token 2: 32, 16 and 8 elements; the result.
#define F32T2 \
	VFMADD231PS (DI)(R9*2), Y12, Y4; \
	VFMADD231PS 32(DI)(R9*2), Y13, Y5; \
	VFMADD231PS 64(DI)(R9*2), Y14, Y4; \
	VFMADD231PS 96(DI)(R9*2), Y15, Y5
#define F16T2 \
	VFMADD231PS (DI)(R9*2), Y12, Y4; \
	VFMADD231PS 32(DI)(R9*2), Y13, Y5
#define F8T2 VFMADD231PS (DI)(R9*2), Y12, Y4
#define FINT2 \
	VADDPS Y5, Y4, Y4; \
	HSUM8(Y4, X4, X15); \
	VMOVSS X4, (AX)(DX*2)
#define ZT2 VXORPS Y4, Y4, Y4; VXORPS Y5, Y5, Y5

// func f16Rows2AVX2(rows *byte, nr, rb int, x *float32, n8, xstride, pf int, out *float32, ostride int)
// out + t·ostride + 4r (bytes) = dotF16AVX2(rows + r·rb, x + t·xstride, n8)
// for rows r < nr (nr ≥ 1) and tokens t < 2; n8 a multiple of 8.
TEXT ·f16Rows2AVX2(SB), NOSPLIT, $0-72
	MOVQ rows+0(FP), R8
	MOVQ nr+8(FP), R13
	MOVQ rb+16(FP), R10
	MOVQ xstride+40(FP), R9
	MOVQ pf+48(FP), R11
	MOVQ out+56(FP), AX
	MOVQ ostride+64(FP), DX

row:
	MOVQ R8, SI
	MOVQ x+24(FP), DI
	MOVQ n8+32(FP), CX
	ZT0
	ZT1
	CMPQ CX, $32
	JLT  step16

loop32:
	PREFETCHT0 (SI)(R11*1)
	VCVTPH2PS  (SI), Y12
	VCVTPH2PS  16(SI), Y13
	VCVTPH2PS  32(SI), Y14
	VCVTPH2PS  48(SI), Y15
	F32T0
	F32T1
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $32, CX
	CMPQ CX, $32
	JGE  loop32

step16:
	CMPQ      CX, $16
	JLT       tail
	VCVTPH2PS (SI), Y12
	VCVTPH2PS 16(SI), Y13
	F16T0
	F16T1
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $16, CX

tail:
	CMPQ      CX, $8
	JLT       done
	VCVTPH2PS (SI), Y12
	F8T0
	F8T1

done:
	FINT0
	FINT1
	ADDQ $4, AX
	ADDQ R10, R8
	DECQ R13
	JNZ  row
	VZEROUPPER
	RET

// func f16Rows3AVX2(rows *byte, nr, rb int, x *float32, n8, xstride, pf int, out *float32, ostride int)
// out + t·ostride + 4r (bytes) = dotF16AVX2(rows + r·rb, x + t·xstride, n8)
// for rows r < nr (nr ≥ 1) and tokens t < 3; n8 a multiple of 8.
TEXT ·f16Rows3AVX2(SB), NOSPLIT, $0-72
	MOVQ rows+0(FP), R8
	MOVQ nr+8(FP), R13
	MOVQ rb+16(FP), R10
	MOVQ xstride+40(FP), R9
	MOVQ pf+48(FP), R11
	MOVQ out+56(FP), AX
	MOVQ ostride+64(FP), DX

row:
	MOVQ R8, SI
	MOVQ x+24(FP), DI
	MOVQ n8+32(FP), CX
	ZT0
	ZT1
	ZT2
	CMPQ CX, $32
	JLT  step16

loop32:
	PREFETCHT0 (SI)(R11*1)
	VCVTPH2PS  (SI), Y12
	VCVTPH2PS  16(SI), Y13
	VCVTPH2PS  32(SI), Y14
	VCVTPH2PS  48(SI), Y15
	F32T0
	F32T1
	F32T2
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $32, CX
	CMPQ CX, $32
	JGE  loop32

step16:
	CMPQ      CX, $16
	JLT       tail
	VCVTPH2PS (SI), Y12
	VCVTPH2PS 16(SI), Y13
	F16T0
	F16T1
	F16T2
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $16, CX

tail:
	CMPQ      CX, $8
	JLT       done
	VCVTPH2PS (SI), Y12
	F8T0
	F8T1
	F8T2

done:
	FINT0
	FINT1
	FINT2
	ADDQ $4, AX
	ADDQ R10, R8
	DECQ R13
	JNZ  row
	VZEROUPPER
	RET
