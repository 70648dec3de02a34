// AVX2 K-quant dot kernels against Q8_K activations. Twins: dot_kquant_go.go.
// Per super-block the sums are exact int32 lane sums; one float32
// multiply-add per block and lane, lanes summed at the end.

#include "textflag.h"
#include "hsum8_amd64.h"

DATA k0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA k0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA k0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA k0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL k0f<>(SB), RODATA|NOPTR, $32

DATA k03<>+0(SB)/8, $0x0303030303030303
DATA k03<>+8(SB)/8, $0x0303030303030303
DATA k03<>+16(SB)/8, $0x0303030303030303
DATA k03<>+24(SB)/8, $0x0303030303030303
GLOBL k03<>(SB), RODATA|NOPTR, $32

DATA k02<>+0(SB)/8, $0x0202020202020202
DATA k02<>+8(SB)/8, $0x0202020202020202
DATA k02<>+16(SB)/8, $0x0202020202020202
DATA k02<>+24(SB)/8, $0x0202020202020202
GLOBL k02<>(SB), RODATA|NOPTR, $32

// VPSHUFB mask selecting word 0 of each 128-bit lane; adding 0x02 to every
// byte selects the next word.
DATA kwsel<>+0(SB)/8, $0x0100010001000100
DATA kwsel<>+8(SB)/8, $0x0100010001000100
DATA kwsel<>+16(SB)/8, $0x0100010001000100
DATA kwsel<>+24(SB)/8, $0x0100010001000100
GLOBL kwsel<>(SB), RODATA|NOPTR, $32

// VPSHUFB mask: even bytes, then odd bytes.
DATA kdeint<>+0(SB)/8, $0x0e0c0a0806040200
DATA kdeint<>+8(SB)/8, $0x0f0d0b0907050301
GLOBL kdeint<>(SB), RODATA|NOPTR, $16

DATA k20<>+0(SB)/8, $0x2020202020202020
DATA k20<>+8(SB)/8, $0x2020202020202020
GLOBL k20<>(SB), RODATA|NOPTR, $16

DATA k01<>+0(SB)/8, $0x0101010101010101
DATA k01<>+8(SB)/8, $0x0101010101010101
DATA k01<>+16(SB)/8, $0x0101010101010101
DATA k01<>+24(SB)/8, $0x0101010101010101
GLOBL k01<>(SB), RODATA|NOPTR, $32

// ksel<>+32j: VPSHUFB mask broadcasting word j of each 128-bit lane (j =
// 0..7), so that each sub-block's scale selection is one shuffle with a
// memory mask instead of a shuffle and a mask update.
DATA ksel<>+0(SB)/8, $0x0100010001000100
DATA ksel<>+8(SB)/8, $0x0100010001000100
DATA ksel<>+16(SB)/8, $0x0100010001000100
DATA ksel<>+24(SB)/8, $0x0100010001000100
DATA ksel<>+32(SB)/8, $0x0302030203020302
DATA ksel<>+40(SB)/8, $0x0302030203020302
DATA ksel<>+48(SB)/8, $0x0302030203020302
DATA ksel<>+56(SB)/8, $0x0302030203020302
DATA ksel<>+64(SB)/8, $0x0504050405040504
DATA ksel<>+72(SB)/8, $0x0504050405040504
DATA ksel<>+80(SB)/8, $0x0504050405040504
DATA ksel<>+88(SB)/8, $0x0504050405040504
DATA ksel<>+96(SB)/8, $0x0706070607060706
DATA ksel<>+104(SB)/8, $0x0706070607060706
DATA ksel<>+112(SB)/8, $0x0706070607060706
DATA ksel<>+120(SB)/8, $0x0706070607060706
DATA ksel<>+128(SB)/8, $0x0908090809080908
DATA ksel<>+136(SB)/8, $0x0908090809080908
DATA ksel<>+144(SB)/8, $0x0908090809080908
DATA ksel<>+152(SB)/8, $0x0908090809080908
DATA ksel<>+160(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ksel<>+168(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ksel<>+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ksel<>+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ksel<>+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ksel<>+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ksel<>+208(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ksel<>+216(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ksel<>+224(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ksel<>+232(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ksel<>+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ksel<>+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL ksel<>(SB), RODATA|NOPTR, $256

// Q4KPAIR: sub-blocks 2j and 2j+1 (32 bytes of nibbles at qoff(SI), their
// activations at yoff(DI)); scales as words in Y8, selected by the masks
// at ksel<>+sel and ksel<>+sel+32.
#define Q4KPAIR(qoff, yoff, sel) \
	VMOVDQU    qoff(SI), Y1; \
	VPSRLW     $4, Y1, Y2; \
	VPAND      Y15, Y1, Y1; \
	VPAND      Y15, Y2, Y2; \
	VPMADDUBSW yoff(DI), Y1, Y1; \
	VPMADDUBSW yoff+32(DI), Y2, Y2; \
	VPSHUFB    ksel<>+sel(SB), Y8, Y3; \
	VPMADDWD   Y3, Y1, Y1; \
	VPSHUFB    ksel<>+sel+32(SB), Y8, Y3; \
	VPMADDWD   Y3, Y2, Y2; \
	VPADDD     Y1, Y4, Y4; \
	VPADDD     Y2, Y4, Y4

// Q2KGROUP: 2-bit values (Y1 >> shift) & 3 against 32 activations at
// yoff(DI); scales of its two sub-blocks selected from Y12 by Y10.
#define Q2KGROUP(shift, yoff) \
	VPSRLW     $shift, Y1, Y5; \
	VPAND      Y14, Y5, Y5; \
	VPMADDUBSW yoff(DI), Y5, Y5; \
	VPSHUFB    Y10, Y12, Y6; \
	VPADDB     Y11, Y10, Y10; \
	VPMADDWD   Y6, Y5, Y5; \
	VPADDD     Y5, Y4, Y4

// Q3KGROUP: like Q2KGROUP, plus 4 where bit hbit of the hmask bytes (Y3)
// is set: unsigned values 0..7 (the -4 is applied through the bsums).
#define Q3KGROUP(shift, hbit, yoff) \
	VPSRLW     $shift, Y1, Y5; \
	VPAND      Y14, Y5, Y5; \
	VPSRLW     $hbit, Y3, Y7; \
	VPAND      Y13, Y7, Y7; \
	VPSLLW     $2, Y7, Y7; \
	VPOR       Y7, Y5, Y5; \
	VPMADDUBSW yoff(DI), Y5, Y5; \
	VPSHUFB    Y10, Y12, Y6; \
	VPADDB     Y11, Y10, Y10; \
	VPMADDWD   Y6, Y5, Y5; \
	VPADDD     Y5, Y4, Y4

// Q5KPAIR: like Q4KPAIR, with the 5th bits taken from bits 0 (low nibbles)
// and 1 (high nibbles) of Y13, which is then shifted for the next pair.
#define Q5KPAIR(qoff, yoff) \
	VMOVDQU    qoff(SI), Y1; \
	VPSRLW     $4, Y1, Y2; \
	VPAND      Y15, Y1, Y1; \
	VPAND      Y15, Y2, Y2; \
	VPAND      k01<>(SB), Y13, Y3; \
	VPSLLW     $4, Y3, Y3; \
	VPOR       Y3, Y1, Y1; \
	VPAND      Y11, Y13, Y3; \
	VPSLLW     $3, Y3, Y3; \
	VPOR       Y3, Y2, Y2; \
	VPSRLW     $2, Y13, Y13; \
	VPMADDUBSW yoff(DI), Y1, Y1; \
	VPMADDUBSW yoff+32(DI), Y2, Y2; \
	VPSHUFB    Y10, Y8, Y3; \
	VPADDB     Y11, Y10, Y10; \
	VPMADDWD   Y3, Y1, Y1; \
	VPSHUFB    Y10, Y8, Y3; \
	VPADDB     Y11, Y10, Y10; \
	VPMADDWD   Y3, Y2, Y2; \
	VPADDD     Y1, Y4, Y4; \
	VPADDD     Y2, Y4, Y4

// Q6KGROUP: 32 unsigned 6-bit values in Y5 against 32 activations at
// yoff(DI); two sub-blocks whose scales are selected from Y12 by the mask
// at ksel<>+sel.
#define Q6KGROUP(yoff, sel) \
	VPMADDUBSW yoff(DI), Y5, Y5; \
	VPSHUFB    ksel<>+sel(SB), Y12, Y6; \
	VPMADDWD   Y6, Y5, Y5; \
	VPADDD     Y5, Y4, Y4

// Q6KHALF: one 128-element half (ql at qloff, qh at qhoff, activations at
// yoff), its four groups using the masks from ksel<>+sel on.
#define Q6KHALF(qloff, qhoff, yoff, sel) \
	VMOVDQU qloff(SI), Y1; \
	VMOVDQU qloff+32(SI), Y2; \
	VMOVDQU qhoff(SI), Y3; \
	VPAND   Y15, Y1, Y5; \
	VPAND   Y14, Y3, Y6; \
	VPSLLW  $4, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	Q6KGROUP(yoff, sel); \
	VPAND   Y15, Y2, Y5; \
	VPSRLW  $2, Y3, Y6; \
	VPAND   Y14, Y6, Y6; \
	VPSLLW  $4, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	Q6KGROUP(yoff+32, sel+32); \
	VPSRLW  $4, Y1, Y5; \
	VPAND   Y15, Y5, Y5; \
	VPSRLW  $4, Y3, Y6; \
	VPAND   Y14, Y6, Y6; \
	VPSLLW  $4, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	Q6KGROUP(yoff+64, sel+64); \
	VPSRLW  $4, Y2, Y5; \
	VPAND   Y15, Y5, Y5; \
	VPSRLW  $6, Y3, Y6; \
	VPAND   Y14, Y6, Y6; \
	VPSLLW  $4, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	Q6KGROUP(yoff+96, sel+96)

// Q4KBODY: one Q4_K super-block of the row at SI against the Q8_K block
// at DI (d at DX, bsums at R12): Σ d·sumi lanes into Y0, Σ dmin·summs
// lanes into Y7. Needs Y15 (k0f); clobbers AX, BX,
// R8..R11 and the other Y registers. Shared by dotQ4_KAVX2 and
// gemvQ4_KAVX2 so that both run the same instructions.
#define Q4KBODY \
	MOVL 4(SI), AX; \
	MOVL 8(SI), BX; \
	MOVL 12(SI), R8; \
	MOVL R8, R9; \
	SHRL $4, R9; \
	ANDL $0x0f0f0f0f, R9; \
	MOVL BX, R10; \
	SHRL $6, R10; \
	ANDL $0x03030303, R10; \
	SHLL $4, R10; \
	ORL  R10, R9; \
	MOVL BX, R11; \
	ANDL $0x3f3f3f3f, R11; \
	ANDL $0x0f0f0f0f, R8; \
	MOVL AX, R10; \
	SHRL $6, R10; \
	ANDL $0x03030303, R10; \
	SHLL $4, R10; \
	ORL  R10, R8; \
	ANDL $0x3f3f3f3f, AX; \
	VMOVD       AX, X8; \
	VPINSRD     $1, R8, X8, X8; \
	VPMOVZXBW   X8, X8; \
	VINSERTI128 $1, X8, Y8, Y8; \
	VMOVD        R11, X12; \
	VPINSRD      $1, R9, X12, X12; \
	VPMOVZXBW    X12, X12; \
	VMOVDQU      (R12), X13; \
	VMOVDQU      16(R12), X14; \
	VPHADDW      X14, X13, X13; \
	VPMADDWD     X13, X12, X12; \
	VCVTDQ2PS    X12, X12; \
	VPBROADCASTW 2(SI), X5; \
	VCVTPH2PS    X5, X5; \
	VBROADCASTSS (DX), X6; \
	VMULPS       X6, X5, X5; \
	VFMADD231PS  X12, X5, X7; \
	VPXOR   Y4, Y4, Y4; \
	Q4KPAIR(16, 0, 0); \
	Q4KPAIR(48, 64, 64); \
	Q4KPAIR(80, 128, 128); \
	Q4KPAIR(112, 192, 192); \
	VPBROADCASTW (SI), X5; \
	VCVTPH2PS    X5, Y5; \
	VBROADCASTSS (DX), Y6; \
	VMULPS       Y6, Y5, Y5; \
	VCVTDQ2PS    Y4, Y4; \
	VFMADD231PS  Y4, Y5, Y0

// func dotQ4_KAVX2(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $0-44
	MOVQ    row+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), DX
	MOVQ    bsums+24(FP), R12
	MOVQ    nb+32(FP), CX
	VXORPS  Y0, Y0, Y0         // Σ d·sumi lanes
	VXORPS  Y7, Y7, Y7         // Σ dmin·summs lanes (low 4 used)
	VMOVDQU k0f<>(SB), Y15
	TESTQ   CX, CX
	JLE     q4kdone

q4kloop:
	Q4KBODY

	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  q4kloop

q4kdone:
	HSUM8(Y0, X0, X1)
	HSUM8(Y7, X7, X1)
	VSUBSS X7, X0, X0
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// Q6KBODY: one Q6_K super-block of the row at SI against the Q8_K block
// at DI (d at DX, bsums at R12): Σ d·sumi lanes into Y0. Needs Y15, Y14
// (k0f, k03). Shared by dotQ6_KAVX2 and gemvQ6_KAVX2.
#define Q6KBODY \
	VMOVDQU   192(SI), X8; \
	VPSHUFB   kdeint<>(SB), X8, X12; \
	VPMOVSXBW X12, Y12; \
	VPMOVSXBW X8, Y8; \
	VPMADDWD  (R12), Y8, Y8; \
	VPSLLD    $5, Y8, Y8; \
	VPXOR     Y4, Y4, Y4; \
	VPSUBD    Y8, Y4, Y4; \
	Q6KHALF(0, 128, 0, 0); \
	Q6KHALF(64, 160, 128, 128); \
	VPBROADCASTW 208(SI), X5; \
	VCVTPH2PS    X5, Y5; \
	VBROADCASTSS (DX), Y6; \
	VMULPS       Y6, Y5, Y5; \
	VCVTDQ2PS    Y4, Y4; \
	VFMADD231PS  Y4, Y5, Y0

// func dotQ6_KAVX2(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $0-44
	MOVQ    row+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), DX
	MOVQ    bsums+24(FP), R12
	MOVQ    nb+32(FP), CX
	VXORPS  Y0, Y0, Y0
	VMOVDQU k0f<>(SB), Y15
	VMOVDQU k03<>(SB), Y14
	TESTQ   CX, CX
	JLE     q6kdone

q6kloop:
	Q6KBODY

	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  q6kloop

q6kdone:
	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// func dotQ5_KAVX2(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $0-44
	MOVQ    row+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), DX
	MOVQ    bsums+24(FP), R12
	MOVQ    nb+32(FP), CX
	VXORPS  Y0, Y0, Y0
	VXORPS  Y7, Y7, Y7
	VMOVDQU k0f<>(SB), Y15
	VMOVDQU kwsel<>(SB), Y9
	VMOVDQU k02<>(SB), Y11
	TESTQ   CX, CX
	JLE     q5kdone

q5kloop:
	MOVL 4(SI), AX
	MOVL 8(SI), BX
	MOVL 12(SI), R8
	MOVL R8, R9
	SHRL $4, R9
	ANDL $0x0f0f0f0f, R9
	MOVL BX, R10
	SHRL $6, R10
	ANDL $0x03030303, R10
	SHLL $4, R10
	ORL  R10, R9
	MOVL BX, R11
	ANDL $0x3f3f3f3f, R11
	ANDL $0x0f0f0f0f, R8
	MOVL AX, R10
	SHRL $6, R10
	ANDL $0x03030303, R10
	SHLL $4, R10
	ORL  R10, R8
	ANDL $0x3f3f3f3f, AX

	VMOVD       AX, X8
	VPINSRD     $1, R8, X8, X8
	VPMOVZXBW   X8, X8
	VINSERTI128 $1, X8, Y8, Y8

	VMOVD        R11, X12
	VPINSRD      $1, R9, X12, X12
	VPMOVZXBW    X12, X12
	VMOVDQU      (R12), X13
	VMOVDQU      16(R12), X14
	VPHADDW      X14, X13, X13
	VPMADDWD     X13, X12, X12
	VCVTDQ2PS    X12, X12
	VPBROADCASTW 2(SI), X5
	VCVTPH2PS    X5, X5
	VBROADCASTSS (DX), X6
	VMULPS       X6, X5, X5
	VFMADD231PS  X12, X5, X7

	VPXOR   Y4, Y4, Y4
	VMOVDQA Y9, Y10
	VMOVDQU 16(SI), Y13
	Q5KPAIR(48, 0)
	Q5KPAIR(80, 64)
	Q5KPAIR(112, 128)
	Q5KPAIR(144, 192)

	VPBROADCASTW (SI), X5
	VCVTPH2PS    X5, Y5
	VBROADCASTSS (DX), Y6
	VMULPS       Y6, Y5, Y5
	VCVTDQ2PS    Y4, Y4
	VFMADD231PS  Y4, Y5, Y0

	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  q5kloop

q5kdone:
	HSUM8(Y0, X0, X1)
	HSUM8(Y7, X7, X1)
	VSUBSS X7, X0, X0
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// func dotQ2_KAVX2(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ2_KAVX2(SB), NOSPLIT, $0-44
	MOVQ    row+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), DX
	MOVQ    bsums+24(FP), R12
	MOVQ    nb+32(FP), CX
	VXORPS  Y0, Y0, Y0
	VXORPS  Y7, Y7, Y7
	VMOVDQU k0f<>(SB), Y15
	VMOVDQU k03<>(SB), Y14
	VMOVDQU kwsel<>(SB), Y9
	VMOVDQU k02<>(SB), Y11
	TESTQ   CX, CX
	JLE     q2kdone

q2kloop:
	// Y12: 4-bit scales as words (even sub-blocks low lane, odd high);
	// Y8: 4-bit mins in natural order, then Σ m·bsum.
	VMOVDQU      (SI), X8
	VPAND        X15, X8, X12
	VPSHUFB      kdeint<>(SB), X12, X12
	VPMOVZXBW    X12, Y12
	VPSRLW       $4, X8, X8
	VPAND        X15, X8, X8
	VPMOVZXBW    X8, Y8
	VPMADDWD     (R12), Y8, Y8
	VCVTDQ2PS    Y8, Y8
	VPBROADCASTW 82(SI), X5
	VCVTPH2PS    X5, Y5
	VBROADCASTSS (DX), Y6
	VMULPS       Y6, Y5, Y5
	VFMADD231PS  Y8, Y5, Y7

	VPXOR   Y4, Y4, Y4
	VMOVDQA Y9, Y10
	VMOVDQU 16(SI), Y1
	Q2KGROUP(0, 0)
	Q2KGROUP(2, 32)
	Q2KGROUP(4, 64)
	Q2KGROUP(6, 96)
	VMOVDQU 48(SI), Y1
	Q2KGROUP(0, 128)
	Q2KGROUP(2, 160)
	Q2KGROUP(4, 192)
	Q2KGROUP(6, 224)

	VPBROADCASTW 80(SI), X5
	VCVTPH2PS    X5, Y5
	VBROADCASTSS (DX), Y6
	VMULPS       Y6, Y5, Y5
	VCVTDQ2PS    Y4, Y4
	VFMADD231PS  Y4, Y5, Y0

	ADDQ $84, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  q2kloop

q2kdone:
	HSUM8(Y0, X0, X1)
	HSUM8(Y7, X7, X1)
	VSUBSS X7, X0, X0
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// func dotQ3_KAVX2(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotQ3_KAVX2(SB), NOSPLIT, $0-44
	MOVQ    row+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), DX
	MOVQ    bsums+24(FP), R12
	MOVQ    nb+32(FP), CX
	VXORPS  Y0, Y0, Y0
	VMOVDQU k03<>(SB), Y14
	VMOVDQU k01<>(SB), Y13
	VMOVDQU kwsel<>(SB), Y9
	VMOVDQU k02<>(SB), Y11
	TESTQ   CX, CX
	JLE     q3kdone

q3kloop:
	// Decode the 16 6-bit scales (see scaleK3) into X8 as bytes 0..63.
	MOVL 96(SI), AX
	MOVL 100(SI), BX
	MOVL 104(SI), R8
	MOVL AX, R9
	SHRL $4, R9
	ANDL $0x0f0f0f0f, R9
	MOVL R8, R10
	SHRL $4, R10
	ANDL $0x03030303, R10
	SHLL $4, R10
	ORL  R10, R9
	MOVL BX, R11
	SHRL $4, R11
	ANDL $0x0f0f0f0f, R11
	MOVL R8, R10
	SHRL $6, R10
	ANDL $0x03030303, R10
	SHLL $4, R10
	ORL  R10, R11
	ANDL $0x0f0f0f0f, AX
	MOVL R8, R10
	ANDL $0x03030303, R10
	SHLL $4, R10
	ORL  R10, AX
	ANDL $0x0f0f0f0f, BX
	MOVL R8, R10
	SHRL $2, R10
	ANDL $0x03030303, R10
	SHLL $4, R10
	ORL  R10, BX
	VMOVD   AX, X8
	VPINSRD $1, BX, X8, X8
	VPINSRD $2, R9, X8, X8
	VPINSRD $3, R11, X8, X8
	VPSUBB  k20<>(SB), X8, X8 // signed scales -32..31

	VPSHUFB   kdeint<>(SB), X8, X12
	VPMOVSXBW X12, Y12
	VPMOVSXBW X8, Y8
	VPMADDWD  (R12), Y8, Y8
	VPSLLD    $2, Y8, Y8
	VPXOR     Y4, Y4, Y4
	VPSUBD    Y8, Y4, Y4 // the -4 offset of every value
	VMOVDQA   Y9, Y10
	VMOVDQU   (SI), Y3
	VMOVDQU   32(SI), Y1
	Q3KGROUP(0, 0, 0)
	Q3KGROUP(2, 1, 32)
	Q3KGROUP(4, 2, 64)
	Q3KGROUP(6, 3, 96)
	VMOVDQU   64(SI), Y1
	Q3KGROUP(0, 4, 128)
	Q3KGROUP(2, 5, 160)
	Q3KGROUP(4, 6, 192)
	Q3KGROUP(6, 7, 224)

	VPBROADCASTW 108(SI), X5
	VCVTPH2PS    X5, Y5
	VBROADCASTSS (DX), Y6
	VMULPS       Y6, Y5, Y5
	VCVTDQ2PS    Y4, Y4
	VFMADD231PS  Y4, Y5, Y0

	ADDQ $110, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  q3kloop

q3kdone:
	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// Decode kernels: n contiguous rows one after the other (a row's bytes
// are nb super-blocks, the next row follows), each row exactly the
// dotQ4_KAVX2 / dotQ6_KAVX2 sequence (the shared body macro), with a
// software prefetch pf bytes ahead of the super-block being read (the
// hardware prefetchers stop at 4 KiB page boundaries). n, nb ≥ 1.

// func gemvQ4_KAVX2(rows *byte, n int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)
TEXT ·gemvQ4_KAVX2(SB), NOSPLIT, $0-64
	MOVQ    rows+0(FP), SI
	MOVQ    pf+48(FP), R14
	MOVQ    out+56(FP), R13
	VMOVDQU k0f<>(SB), Y15

g4krow:
	MOVQ   qs+16(FP), DI
	MOVQ   d+24(FP), DX
	MOVQ   bsums+32(FP), R12
	MOVQ   nb+40(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y7, Y7, Y7

g4kloop:
	PREFETCHT0 (SI)(R14*1)
	PREFETCHT0 64(SI)(R14*1)
	PREFETCHT0 128(SI)(R14*1)
	Q4KBODY
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  g4kloop

	HSUM8(Y0, X0, X1)
	HSUM8(Y7, X7, X1)
	VSUBSS X7, X0, X0
	VMOVSS X0, (R13)
	ADDQ   $4, R13
	DECQ   n+8(FP)
	JNZ    g4krow
	VZEROUPPER
	RET

// func gemvQ6_KAVX2(rows *byte, n int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)
TEXT ·gemvQ6_KAVX2(SB), NOSPLIT, $0-64
	MOVQ    rows+0(FP), SI
	MOVQ    pf+48(FP), R14
	MOVQ    out+56(FP), R13
	VMOVDQU k0f<>(SB), Y15
	VMOVDQU k03<>(SB), Y14

g6krow:
	MOVQ   qs+16(FP), DI
	MOVQ   d+24(FP), DX
	MOVQ   bsums+32(FP), R12
	MOVQ   nb+40(FP), CX
	VXORPS Y0, Y0, Y0

g6kloop:
	PREFETCHT0 (SI)(R14*1)
	PREFETCHT0 64(SI)(R14*1)
	PREFETCHT0 128(SI)(R14*1)
	PREFETCHT0 192(SI)(R14*1)
	Q6KBODY
	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R12
	DECQ CX
	JNZ  g6kloop

	HSUM8(Y0, X0, X1)
	VMOVSS X0, (R13)
	ADDQ   $4, R13
	DECQ   n+8(FP)
	JNZ    g6krow
	VZEROUPPER
	RET
