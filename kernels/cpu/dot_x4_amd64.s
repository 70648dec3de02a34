// Four-token AVX2 kernels for MatMul with n > 1 (prefill), Q4_1, Q5_1
// and F16: one weight row is decoded once and dotted with four consecutive
// tokens. For each token they perform exactly the floating-point operations
// of the one-token kernel (same lanes, same order, same final reduction), so
// results are bitwise identical to it: batch invariance. Integer sums are
// exact, so their order is free. Token t's activations are at base + t*stride.
// K-quants: dot_kquant_x4_amd64.s.

#include "textflag.h"
#include "hsum8_amd64.h"

DATA x0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA x0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA x0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA x0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL x0f<>(SB), RODATA|NOPTR, $32

DATA xones16<>+0(SB)/8, $0x0001000100010001
DATA xones16<>+8(SB)/8, $0x0001000100010001
DATA xones16<>+16(SB)/8, $0x0001000100010001
DATA xones16<>+24(SB)/8, $0x0001000100010001
GLOBL xones16<>(SB), RODATA|NOPTR, $32

DATA x10<>+0(SB)/8, $0x1010101010101010
DATA x10<>+8(SB)/8, $0x1010101010101010
DATA x10<>+16(SB)/8, $0x1010101010101010
DATA x10<>+24(SB)/8, $0x1010101010101010
GLOBL x10<>(SB), RODATA|NOPTR, $32

DATA xbitshuf<>+0(SB)/8, $0x0000000000000000
DATA xbitshuf<>+8(SB)/8, $0x0101010101010101
DATA xbitshuf<>+16(SB)/8, $0x0202020202020202
DATA xbitshuf<>+24(SB)/8, $0x0303030303030303
GLOBL xbitshuf<>(SB), RODATA|NOPTR, $32

DATA xbitmask<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA xbitmask<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA xbitmask<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA xbitmask<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL xbitmask<>(SB), RODATA|NOPTR, $32

// ---- Q4_1, Q5_1 ---------------------------------------------------
// XBITS32: 0xFF in byte j of Y where bit j of the uint32 at m is set (Y12: ones).
#define XBITS32(m, Y) \
	VPBROADCASTD m, Y; \
	VPSHUFB      xbitshuf<>(SB), Y, Y; \
	VPOR         xbitmask<>(SB), Y, Y; \
	VPCMPEQB     Y12, Y, Y

// XNIB32: 16 bytes at m as 32 nibbles in Y5 (low lane: elements 0..15).
#define XNIB32(m) \
	VMOVDQU     m, X5; \
	VPSRLW      $4, X5, X7; \
	VINSERTI128 $1, X7, Y5, Y5; \
	VPAND       Y15, Y5, Y5

// AFFTOK: one token of Q4_1/Q5_1 (Y6 dx, Y5 unsigned q, X4 m), as the
// one-token kernel: ACC += (dx·dy)·float(Σ q·q8); MACC += m·s.
#define AFFTOK(mq, md, ms, ACC, MACC) \
	VBROADCASTSS md, Y7; \
	VMULPS       Y7, Y6, Y7; \
	VPMADDUBSW   mq, Y5, Y8; \
	VPMADDWD     Y13, Y8, Y8; \
	VCVTDQ2PS    Y8, Y8; \
	VFMADD231PS  Y8, Y7, ACC; \
	VMOVSS       ms, X8; \
	VFMADD231SS  X8, X4, MACC

#define AFFTOK4 \
	AFFTOK((DI), (DX), (R8), Y0, X9); \
	AFFTOK((DI)(R10*1), (DX)(R12*1), (R8)(R12*1), Y1, X10); \
	AFFTOK((DI)(R10*2), (DX)(R12*2), (R8)(R12*2), Y2, X11); \
	AFFTOK((DI)(R11*1), (DX)(R13*1), (R8)(R13*1), Y3, X14)

#define AFFPROLOGUE \
	MOVQ     row+0(FP), SI; \
	MOVQ     qs+8(FP), DI; \
	MOVQ     d+16(FP), DX; \
	MOVQ     s+24(FP), R8; \
	MOVQ     nb+32(FP), CX; \
	MOVQ     qstride+40(FP), R10; \
	MOVQ     dstride+48(FP), R12; \
	LEAQ     (R10)(R10*2), R11; \
	LEAQ     (R12)(R12*2), R13; \
	VXORPS   Y0, Y0, Y0; \
	VXORPS   Y1, Y1, Y1; \
	VXORPS   Y2, Y2, Y2; \
	VXORPS   Y3, Y3, Y3; \
	VXORPS   Y9, Y9, Y9; \
	VXORPS   Y10, Y10, Y10; \
	VXORPS   Y11, Y11, Y11; \
	VXORPS   Y14, Y14, Y14; \
	VMOVDQU  x0f<>(SB), Y15; \
	VMOVDQU  xones16<>(SB), Y13; \
	VPCMPEQB Y12, Y12, Y12

#define AFFSTORE(Y, X, MACC, o) \
	HSUM8(Y, X, X8); \
	VADDSS MACC, X, X; \
	VMOVSS X, o(AX)

// ---- F16 ---------------------------------------------------------------
// func dotF16x4AVX2(row *byte, x *float32, n, xstride int, out *float32)
// Token t uses accumulators Y(2t), Y(2t+1) as dotF16AVX2 uses Y0, Y1.
TEXT ·dotF16x4AVX2(SB), NOSPLIT, $0-40
	MOVQ   row+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	MOVQ   xstride+24(FP), R8
	LEAQ   (R8)(R8*2), R9
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	CMPQ   CX, $16
	JLT    f16x4tail

f16x4loop:
	VCVTPH2PS   (SI), Y8
	VCVTPH2PS   16(SI), Y9
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	VFMADD231PS (DI)(R8*1), Y8, Y2
	VFMADD231PS 32(DI)(R8*1), Y9, Y3
	VFMADD231PS (DI)(R8*2), Y8, Y4
	VFMADD231PS 32(DI)(R8*2), Y9, Y5
	VFMADD231PS (DI)(R9*1), Y8, Y6
	VFMADD231PS 32(DI)(R9*1), Y9, Y7
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	CMPQ        CX, $16
	JGE         f16x4loop

f16x4tail:
	CMPQ        CX, $8
	JLT         f16x4done
	VCVTPH2PS   (SI), Y8
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (DI)(R8*1), Y8, Y2
	VFMADD231PS (DI)(R8*2), Y8, Y4
	VFMADD231PS (DI)(R9*1), Y8, Y6

f16x4done:
	MOVQ   out+32(FP), AX
	VADDPS Y1, Y0, Y0
	HSUM8(Y0, X0, X8)
	VMOVSS X0, (AX)
	VADDPS Y3, Y2, Y2
	HSUM8(Y2, X2, X8)
	VMOVSS X2, 4(AX)
	VADDPS Y5, Y4, Y4
	HSUM8(Y4, X4, X8)
	VMOVSS X4, 8(AX)
	VADDPS Y7, Y6, Y6
	HSUM8(Y6, X6, X8)
	VMOVSS X6, 12(AX)
	VZEROUPPER
	RET

// func dotQ4_1x4AVX2(row *byte, qs *int8, d, s *float32, nb, qstride, dstride int, out *float32)
TEXT ·dotQ4_1x4AVX2(SB), NOSPLIT, $0-64
	AFFPROLOGUE
	TESTQ CX, CX
	JLE   q41x4done

q41x4loop:
	VPBROADCASTW (SI), X6
	VCVTPH2PS    X6, Y6
	VPBROADCASTW 2(SI), X4
	VCVTPH2PS    X4, X4
	XNIB32(4(SI))
	AFFTOK4
	ADDQ         $20, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	ADDQ         $4, R8
	DECQ         CX
	JNZ          q41x4loop

q41x4done:
	MOVQ out+56(FP), AX
	AFFSTORE(Y0, X0, X9, 0)
	AFFSTORE(Y1, X1, X10, 4)
	AFFSTORE(Y2, X2, X11, 8)
	AFFSTORE(Y3, X3, X14, 12)
	VZEROUPPER
	RET

// func dotQ5_1x4AVX2(row *byte, qs *int8, d, s *float32, nb, qstride, dstride int, out *float32)
TEXT ·dotQ5_1x4AVX2(SB), NOSPLIT, $0-64
	AFFPROLOGUE
	TESTQ CX, CX
	JLE   q51x4done

q51x4loop:
	VPBROADCASTW (SI), X6
	VCVTPH2PS    X6, Y6
	VPBROADCASTW 2(SI), X4
	VCVTPH2PS    X4, X4
	XNIB32(8(SI))
	XBITS32(4(SI), Y8)
	VPAND        x10<>(SB), Y8, Y8
	VPOR         Y8, Y5, Y5
	AFFTOK4
	ADDQ         $24, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	ADDQ         $4, R8
	DECQ         CX
	JNZ          q51x4loop

q51x4done:
	MOVQ out+56(FP), AX
	AFFSTORE(Y0, X0, X9, 0)
	AFFSTORE(Y1, X1, X10, 4)
	AFFSTORE(Y2, X2, X11, 8)
	AFFSTORE(Y3, X3, X14, 12)
	VZEROUPPER
	RET
