// Four-token AVX2 K-quant kernels (see dot_x4_amd64.s for the contract:
// per token, bit for bit the one-token kernel of dot_kquant_amd64.s).
//
// Float accumulators live in the frame: token t's main accumulator at
// 64t(SP), its min accumulator at 64t+32(SP) (Q4_K/Q5_K: low 4 lanes, Q2_K:
// 8 lanes, Q3_K/Q6_K: unused zeros). Token t: q8 at DI + t*R8 (R9 = 3*R8),
// d at DX + t*R10 (R11 = 2*R10, R13 = 3*R10), bsums at R12 + 8*t*R10 (the
// bsums stride is 8 × the d stride).

#include "textflag.h"
#include "hsum8_amd64.h"

DATA x0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA x0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA x0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA x0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL x0f<>(SB), RODATA|NOPTR, $32

DATA x03<>+0(SB)/8, $0x0303030303030303
DATA x03<>+8(SB)/8, $0x0303030303030303
DATA x03<>+16(SB)/8, $0x0303030303030303
DATA x03<>+24(SB)/8, $0x0303030303030303
GLOBL x03<>(SB), RODATA|NOPTR, $32

DATA x02<>+0(SB)/8, $0x0202020202020202
DATA x02<>+8(SB)/8, $0x0202020202020202
DATA x02<>+16(SB)/8, $0x0202020202020202
DATA x02<>+24(SB)/8, $0x0202020202020202
GLOBL x02<>(SB), RODATA|NOPTR, $32

DATA xwsel<>+0(SB)/8, $0x0100010001000100
DATA xwsel<>+8(SB)/8, $0x0100010001000100
DATA xwsel<>+16(SB)/8, $0x0100010001000100
DATA xwsel<>+24(SB)/8, $0x0100010001000100
GLOBL xwsel<>(SB), RODATA|NOPTR, $32

DATA xdeint<>+0(SB)/8, $0x0e0c0a0806040200
DATA xdeint<>+8(SB)/8, $0x0f0d0b0907050301
GLOBL xdeint<>(SB), RODATA|NOPTR, $16

DATA x01<>+0(SB)/8, $0x0101010101010101
DATA x01<>+8(SB)/8, $0x0101010101010101
DATA x01<>+16(SB)/8, $0x0101010101010101
DATA x01<>+24(SB)/8, $0x0101010101010101
GLOBL x01<>(SB), RODATA|NOPTR, $32

DATA x20<>+0(SB)/8, $0x2020202020202020
DATA x20<>+8(SB)/8, $0x2020202020202020
GLOBL x20<>(SB), RODATA|NOPTR, $16

#define KPROLOGUE \
	MOVQ    row+0(FP), SI; \
	MOVQ    qs+8(FP), DI; \
	MOVQ    d+16(FP), DX; \
	MOVQ    bsums+24(FP), R12; \
	MOVQ    nb+32(FP), CX; \
	MOVQ    qstride+40(FP), R8; \
	MOVQ    dstride+48(FP), R10; \
	LEAQ    (R8)(R8*2), R9; \
	LEAQ    (R10)(R10*1), R11; \
	LEAQ    (R10)(R10*2), R13; \
	VXORPS  Y0, Y0, Y0; \
	VMOVUPS Y0, 0(SP); \
	VMOVUPS Y0, 32(SP); \
	VMOVUPS Y0, 64(SP); \
	VMOVUPS Y0, 96(SP); \
	VMOVUPS Y0, 128(SP); \
	VMOVUPS Y0, 160(SP); \
	VMOVUPS Y0, 192(SP); \
	VMOVUPS Y0, 224(SP)

// KACC: acc(off) += (dx in Y5) * dy(md) * float(S), as the one-token kernel.
#define KACC(md, S, off) \
	VBROADCASTSS md, Y6; \
	VMULPS       Y6, Y5, Y6; \
	VCVTDQ2PS    S, S; \
	VMOVUPS      off(SP), Y1; \
	VFMADD231PS  S, Y6, Y1; \
	VMOVUPS      Y1, off(SP)

#define KACC4 \
	KACC((DX), Y0, 0); \
	KACC((DX)(R10*1), Y4, 64); \
	KACC((DX)(R10*2), Y7, 128); \
	KACC((DX)(R13*1), Y13, 192)

// KSTORE: out[t] = hsum(acc) - hsum(accm), as the one-token kernel.
#define KSTORE(off, o) \
	VMOVUPS off(SP), Y0; \
	HSUM8(Y0, X0, X1); \
	VMOVUPS off+32(SP), Y7; \
	HSUM8(Y7, X7, X1); \
	VSUBSS  X7, X0, X0; \
	VMOVSS  X0, o(AX)

// Q4_K: mins for one token: X12 holds the 8 mins as words, X5 dmin (4 lanes).
#define Q4KMIN(mb, mb16, md, off) \
	VMOVDQU      mb, X13; \
	VMOVDQU      mb16, X14; \
	VPHADDW      X14, X13, X13; \
	VPMADDWD     X13, X12, X13; \
	VCVTDQ2PS    X13, X13; \
	VBROADCASTSS md, X6; \
	VMULPS       X6, X5, X6; \
	VMOVUPS      off(SP), X3; \
	VFMADD231PS  X13, X6, X3; \
	VMOVUPS      X3, off(SP)

#define Q4KTOK(m1, m2, S) \
	VPMADDUBSW m1, Y1, Y6; \
	VPMADDWD   Y3, Y6, Y6; \
	VPADDD     Y6, S, S; \
	VPMADDUBSW m2, Y2, Y6; \
	VPMADDWD   Y5, Y6, Y6; \
	VPADDD     Y6, S, S

#define Q4KPAIR4(qoff, yoff) \
	VMOVDQU qoff(SI), Y1; \
	VPSRLW  $4, Y1, Y2; \
	VPAND   Y15, Y1, Y1; \
	VPAND   Y15, Y2, Y2; \
	VPSHUFB Y10, Y8, Y3; \
	VPADDB  Y11, Y10, Y10; \
	VPSHUFB Y10, Y8, Y5; \
	VPADDB  Y11, Y10, Y10; \
	Q4KTOK(yoff(DI), yoff+32(DI), Y0); \
	Q4KTOK(yoff(DI)(R8*1), yoff+32(DI)(R8*1), Y4); \
	Q4KTOK(yoff(DI)(R8*2), yoff+32(DI)(R8*2), Y7); \
	Q4KTOK(yoff(DI)(R9*1), yoff+32(DI)(R9*1), Y13)

// Q5KPAIR4: Q4KPAIR4 with the 5th bits from Y14 (qh), shifted for the next pair.
#define Q5KPAIR4(qoff, yoff) \
	VMOVDQU qoff(SI), Y1; \
	VPSRLW  $4, Y1, Y2; \
	VPAND   Y15, Y1, Y1; \
	VPAND   Y15, Y2, Y2; \
	VPAND   x01<>(SB), Y14, Y3; \
	VPSLLW  $4, Y3, Y3; \
	VPOR    Y3, Y1, Y1; \
	VPAND   Y11, Y14, Y3; \
	VPSLLW  $3, Y3, Y3; \
	VPOR    Y3, Y2, Y2; \
	VPSRLW  $2, Y14, Y14; \
	VPSHUFB Y10, Y8, Y3; \
	VPADDB  Y11, Y10, Y10; \
	VPSHUFB Y10, Y8, Y5; \
	VPADDB  Y11, Y10, Y10; \
	Q4KTOK(yoff(DI), yoff+32(DI), Y0); \
	Q4KTOK(yoff(DI)(R8*1), yoff+32(DI)(R8*1), Y4); \
	Q4KTOK(yoff(DI)(R8*2), yoff+32(DI)(R8*2), Y7); \
	Q4KTOK(yoff(DI)(R9*1), yoff+32(DI)(R9*1), Y13)

// K4SCALES decodes the 6-bit scales (X8 -> Y8 words, both lanes) and mins
// (X12 words) of a Q4_K/Q5_K block at SI.
#define K4SCALES \
	MOVL        4(SI), AX; \
	ANDL        $0x3f3f3f3f, AX; \
	VMOVD       AX, X8; \
	MOVL        4(SI), AX; \
	SHRL        $6, AX; \
	ANDL        $0x03030303, AX; \
	SHLL        $4, AX; \
	MOVL        12(SI), BX; \
	ANDL        $0x0f0f0f0f, BX; \
	ORL         BX, AX; \
	VPINSRD     $1, AX, X8, X8; \
	MOVL        8(SI), AX; \
	ANDL        $0x3f3f3f3f, AX; \
	VMOVD       AX, X12; \
	MOVL        8(SI), AX; \
	SHRL        $6, AX; \
	ANDL        $0x03030303, AX; \
	SHLL        $4, AX; \
	MOVL        12(SI), BX; \
	SHRL        $4, BX; \
	ANDL        $0x0f0f0f0f, BX; \
	ORL         BX, AX; \
	VPINSRD     $1, AX, X12, X12; \
	VPMOVZXBW   X8, X8; \
	VINSERTI128 $1, X8, Y8, Y8; \
	VPMOVZXBW   X12, X12

// ---- Q6_K --------------------------------------------------------------
#define Q6KTOK(m, S) \
	VPMADDUBSW m, Y5, Y8; \
	VPMADDWD   Y6, Y8, Y8; \
	VPADDD     Y8, S, S

#define Q6KGROUP4(yoff) \
	VPSHUFB Y10, Y12, Y6; \
	VPADDB  Y11, Y10, Y10; \
	Q6KTOK(yoff(DI), Y0); \
	Q6KTOK(yoff(DI)(R8*1), Y4); \
	Q6KTOK(yoff(DI)(R8*2), Y7); \
	Q6KTOK(yoff(DI)(R9*1), Y13)

#define Q6KHALF4(qloff, qhoff, yoff) \
	VMOVDQU qloff(SI), Y1; \
	VMOVDQU qloff+32(SI), Y2; \
	VMOVDQU qhoff(SI), Y3; \
	VPAND   Y15, Y1, Y5; \
	VPAND   Y14, Y3, Y6; \
	VPSLLW  $4, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	Q6KGROUP4(yoff); \
	VPAND   Y15, Y2, Y5; \
	VPSRLW  $2, Y3, Y6; \
	VPAND   Y14, Y6, Y6; \
	VPSLLW  $4, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	Q6KGROUP4(yoff+32); \
	VPSRLW  $4, Y1, Y5; \
	VPAND   Y15, Y5, Y5; \
	VPSRLW  $4, Y3, Y6; \
	VPAND   Y14, Y6, Y6; \
	VPSLLW  $4, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	Q6KGROUP4(yoff+64); \
	VPSRLW  $4, Y2, Y5; \
	VPAND   Y15, Y5, Y5; \
	VPSRLW  $6, Y3, Y6; \
	VPAND   Y14, Y6, Y6; \
	VPSLLW  $4, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	Q6KGROUP4(yoff+96)

// Q6KCORR: S = -32 · Σ sc·bsum for one token (Y8: scales in natural order).
#define Q6KCORR(mb, S) \
	VPMADDWD mb, Y8, Y6; \
	VPSLLD   $5, Y6, Y6; \
	VPXOR    S, S, S; \
	VPSUBD   Y6, S, S

// ---- Q2_K, Q3_K ----------------------------------------------------------
#define Q2KGROUP4(shift, yoff) \
	VPSRLW  $shift, Y1, Y5; \
	VPAND   Y14, Y5, Y5; \
	VPSHUFB Y10, Y12, Y6; \
	VPADDB  Y11, Y10, Y10; \
	Q6KTOK(yoff(DI), Y0); \
	Q6KTOK(yoff(DI)(R8*1), Y4); \
	Q6KTOK(yoff(DI)(R8*2), Y7); \
	Q6KTOK(yoff(DI)(R9*1), Y13)

// Q2KMIN: accm(off) += dmin·dy · float(Σ m·bsum) (Y8 mins, Y5 dmin).
#define Q2KMIN(mb, md, off) \
	VPMADDWD     mb, Y8, Y3; \
	VCVTDQ2PS    Y3, Y3; \
	VBROADCASTSS md, Y6; \
	VMULPS       Y6, Y5, Y6; \
	VMOVUPS      off(SP), Y1; \
	VFMADD231PS  Y3, Y6, Y1; \
	VMOVUPS      Y1, off(SP)

#define Q3KGROUP4(shift, hbit, yoff) \
	VPSRLW  $shift, Y1, Y5; \
	VPAND   Y14, Y5, Y5; \
	VPSRLW  $hbit, Y3, Y2; \
	VPAND   x01<>(SB), Y2, Y2; \
	VPSLLW  $2, Y2, Y2; \
	VPOR    Y2, Y5, Y5; \
	VPSHUFB Y10, Y12, Y6; \
	VPADDB  Y11, Y10, Y10; \
	Q6KTOK(yoff(DI), Y0); \
	Q6KTOK(yoff(DI)(R8*1), Y4); \
	Q6KTOK(yoff(DI)(R8*2), Y7); \
	Q6KTOK(yoff(DI)(R9*1), Y13)

#define Q3KCORR(mb, S) \
	VPMADDWD mb, Y8, Y6; \
	VPSLLD   $2, Y6, Y6; \
	VPXOR    S, S, S; \
	VPSUBD   Y6, S, S

// func dotQ4_Kx4AVX2(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)
TEXT ·dotQ4_Kx4AVX2(SB), NOSPLIT, $256-64
	KPROLOGUE
	VMOVDQU x0f<>(SB), Y15
	VMOVDQU xwsel<>(SB), Y9
	VMOVDQU x02<>(SB), Y11
	TESTQ   CX, CX
	JLE     q4kx4done

q4kx4loop:
	// scales 0..3, 4..7 -> X8; mins 0..3, 4..7 -> X12 (see scaleMinK4).
	MOVL        4(SI), AX
	ANDL        $0x3f3f3f3f, AX
	VMOVD       AX, X8
	MOVL        4(SI), AX
	SHRL        $6, AX
	ANDL        $0x03030303, AX
	SHLL        $4, AX
	MOVL        12(SI), BX
	ANDL        $0x0f0f0f0f, BX
	ORL         BX, AX
	VPINSRD     $1, AX, X8, X8
	MOVL        8(SI), AX
	ANDL        $0x3f3f3f3f, AX
	VMOVD       AX, X12
	MOVL        8(SI), AX
	SHRL        $6, AX
	ANDL        $0x03030303, AX
	SHLL        $4, AX
	MOVL        12(SI), BX
	SHRL        $4, BX
	ANDL        $0x0f0f0f0f, BX
	ORL         BX, AX
	VPINSRD     $1, AX, X12, X12
	VPMOVZXBW   X8, X8
	VINSERTI128 $1, X8, Y8, Y8
	VPMOVZXBW   X12, X12

	VPBROADCASTW 2(SI), X5
	VCVTPH2PS    X5, X5
	Q4KMIN((R12), 16(R12), (DX), 32)
	Q4KMIN((R12)(R10*8), 16(R12)(R10*8), (DX)(R10*1), 96)
	Q4KMIN((R12)(R11*8), 16(R12)(R11*8), (DX)(R10*2), 160)
	Q4KMIN((R12)(R13*8), 16(R12)(R13*8), (DX)(R13*1), 224)

	VPXOR   Y0, Y0, Y0
	VPXOR   Y4, Y4, Y4
	VPXOR   Y7, Y7, Y7
	VPXOR   Y13, Y13, Y13
	VMOVDQA Y9, Y10
	Q4KPAIR4(16, 0)
	Q4KPAIR4(48, 64)
	Q4KPAIR4(80, 128)
	Q4KPAIR4(112, 192)

	VPBROADCASTW (SI), X5
	VCVTPH2PS    X5, Y5
	KACC4

	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  q4kx4loop

q4kx4done:
	MOVQ out+56(FP), AX
	KSTORE(0, 0)
	KSTORE(64, 4)
	KSTORE(128, 8)
	KSTORE(192, 12)
	VZEROUPPER
	RET

// func dotQ6_Kx4AVX2(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)
TEXT ·dotQ6_Kx4AVX2(SB), NOSPLIT, $256-64
	KPROLOGUE
	VMOVDQU x0f<>(SB), Y15
	VMOVDQU x03<>(SB), Y14
	VMOVDQU xwsel<>(SB), Y9
	VMOVDQU x02<>(SB), Y11
	TESTQ   CX, CX
	JLE     q6kx4done

q6kx4loop:
	VMOVDQU   192(SI), X8
	VPSHUFB   xdeint<>(SB), X8, X12
	VPMOVSXBW X12, Y12
	VPMOVSXBW X8, Y8
	Q6KCORR((R12), Y0)
	Q6KCORR((R12)(R10*8), Y4)
	Q6KCORR((R12)(R11*8), Y7)
	Q6KCORR((R12)(R13*8), Y13)
	VMOVDQA   Y9, Y10
	Q6KHALF4(0, 128, 0)
	Q6KHALF4(64, 160, 128)

	VPBROADCASTW 208(SI), X5
	VCVTPH2PS    X5, Y5
	KACC4

	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  q6kx4loop

q6kx4done:
	MOVQ out+56(FP), AX
	KSTORE(0, 0)
	KSTORE(64, 4)
	KSTORE(128, 8)
	KSTORE(192, 12)
	VZEROUPPER
	RET

// func dotQ5_Kx4AVX2(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)
TEXT ·dotQ5_Kx4AVX2(SB), NOSPLIT, $256-64
	KPROLOGUE
	VMOVDQU x0f<>(SB), Y15
	VMOVDQU xwsel<>(SB), Y9
	VMOVDQU x02<>(SB), Y11
	TESTQ   CX, CX
	JLE     q5kx4done

q5kx4loop:
	K4SCALES
	VPBROADCASTW 2(SI), X5
	VCVTPH2PS    X5, X5
	Q4KMIN((R12), 16(R12), (DX), 32)
	Q4KMIN((R12)(R10*8), 16(R12)(R10*8), (DX)(R10*1), 96)
	Q4KMIN((R12)(R11*8), 16(R12)(R11*8), (DX)(R10*2), 160)
	Q4KMIN((R12)(R13*8), 16(R12)(R13*8), (DX)(R13*1), 224)

	VPXOR   Y0, Y0, Y0
	VPXOR   Y4, Y4, Y4
	VPXOR   Y7, Y7, Y7
	VPXOR   Y13, Y13, Y13
	VMOVDQA Y9, Y10
	VMOVDQU 16(SI), Y14
	Q5KPAIR4(48, 0)
	Q5KPAIR4(80, 64)
	Q5KPAIR4(112, 128)
	Q5KPAIR4(144, 192)

	VPBROADCASTW (SI), X5
	VCVTPH2PS    X5, Y5
	KACC4

	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  q5kx4loop

q5kx4done:
	MOVQ out+56(FP), AX
	KSTORE(0, 0)
	KSTORE(64, 4)
	KSTORE(128, 8)
	KSTORE(192, 12)
	VZEROUPPER
	RET

// func dotQ2_Kx4AVX2(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)
TEXT ·dotQ2_Kx4AVX2(SB), NOSPLIT, $256-64
	KPROLOGUE
	VMOVDQU x0f<>(SB), Y15
	VMOVDQU x03<>(SB), Y14
	VMOVDQU xwsel<>(SB), Y9
	VMOVDQU x02<>(SB), Y11
	TESTQ   CX, CX
	JLE     q2kx4done

q2kx4loop:
	VMOVDQU      (SI), X8
	VPAND        X15, X8, X12
	VPSHUFB      xdeint<>(SB), X12, X12
	VPMOVZXBW    X12, Y12
	VPSRLW       $4, X8, X8
	VPAND        X15, X8, X8
	VPMOVZXBW    X8, Y8
	VPBROADCASTW 82(SI), X5
	VCVTPH2PS    X5, Y5
	Q2KMIN((R12), (DX), 32)
	Q2KMIN((R12)(R10*8), (DX)(R10*1), 96)
	Q2KMIN((R12)(R11*8), (DX)(R10*2), 160)
	Q2KMIN((R12)(R13*8), (DX)(R13*1), 224)

	VPXOR   Y0, Y0, Y0
	VPXOR   Y4, Y4, Y4
	VPXOR   Y7, Y7, Y7
	VPXOR   Y13, Y13, Y13
	VMOVDQA Y9, Y10
	VMOVDQU 16(SI), Y1
	Q2KGROUP4(0, 0)
	Q2KGROUP4(2, 32)
	Q2KGROUP4(4, 64)
	Q2KGROUP4(6, 96)
	VMOVDQU 48(SI), Y1
	Q2KGROUP4(0, 128)
	Q2KGROUP4(2, 160)
	Q2KGROUP4(4, 192)
	Q2KGROUP4(6, 224)

	VPBROADCASTW 80(SI), X5
	VCVTPH2PS    X5, Y5
	KACC4

	ADDQ $84, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  q2kx4loop

q2kx4done:
	MOVQ out+56(FP), AX
	KSTORE(0, 0)
	KSTORE(64, 4)
	KSTORE(128, 8)
	KSTORE(192, 12)
	VZEROUPPER
	RET

// func dotQ3_Kx4AVX2(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)
TEXT ·dotQ3_Kx4AVX2(SB), NOSPLIT, $256-64
	KPROLOGUE
	VMOVDQU x03<>(SB), Y14
	VMOVDQU xwsel<>(SB), Y9
	VMOVDQU x02<>(SB), Y11
	TESTQ   CX, CX
	JLE     q3kx4done

q3kx4loop:
	// 16 6-bit scales into X8 (see scaleK3), using AX and BX only.
	MOVL    96(SI), AX
	ANDL    $0x0f0f0f0f, AX
	MOVL    104(SI), BX
	ANDL    $0x03030303, BX
	SHLL    $4, BX
	ORL     BX, AX
	VMOVD   AX, X8
	MOVL    100(SI), AX
	ANDL    $0x0f0f0f0f, AX
	MOVL    104(SI), BX
	SHRL    $2, BX
	ANDL    $0x03030303, BX
	SHLL    $4, BX
	ORL     BX, AX
	VPINSRD $1, AX, X8, X8
	MOVL    96(SI), AX
	SHRL    $4, AX
	ANDL    $0x0f0f0f0f, AX
	MOVL    104(SI), BX
	SHRL    $4, BX
	ANDL    $0x03030303, BX
	SHLL    $4, BX
	ORL     BX, AX
	VPINSRD $2, AX, X8, X8
	MOVL    100(SI), AX
	SHRL    $4, AX
	ANDL    $0x0f0f0f0f, AX
	MOVL    104(SI), BX
	SHRL    $6, BX
	ANDL    $0x03030303, BX
	SHLL    $4, BX
	ORL     BX, AX
	VPINSRD $3, AX, X8, X8
	VPSUBB  x20<>(SB), X8, X8

	VPSHUFB   xdeint<>(SB), X8, X12
	VPMOVSXBW X12, Y12
	VPMOVSXBW X8, Y8
	Q3KCORR((R12), Y0)
	Q3KCORR((R12)(R10*8), Y4)
	Q3KCORR((R12)(R11*8), Y7)
	Q3KCORR((R12)(R13*8), Y13)
	VMOVDQA   Y9, Y10
	VMOVDQU   (SI), Y3
	VMOVDQU   32(SI), Y1
	Q3KGROUP4(0, 0, 0)
	Q3KGROUP4(2, 1, 32)
	Q3KGROUP4(4, 2, 64)
	Q3KGROUP4(6, 3, 96)
	VMOVDQU   64(SI), Y1
	Q3KGROUP4(0, 4, 128)
	Q3KGROUP4(2, 5, 160)
	Q3KGROUP4(4, 6, 192)
	Q3KGROUP4(6, 7, 224)

	VPBROADCASTW 108(SI), X5
	VCVTPH2PS    X5, Y5
	KACC4

	ADDQ $110, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  q3kx4loop

q3kx4done:
	MOVQ out+56(FP), AX
	KSTORE(0, 0)
	KSTORE(64, 4)
	KSTORE(128, 8)
	KSTORE(192, 12)
	VZEROUPPER
	RET
