#include "textflag.h"

// Softmax exponentials of Attend, four float64 lanes at a time, computing
// per lane exactly the operations of Go's math.Exp on amd64 with FMA
// (the archExp sequence, Shibata's method): k = round(x·log2e); r = x −
// k·ln2hi − k·ln2lo (fused); r /= 16; a degree-8 Taylor polynomial by
// Horner (fused); four doublings (e ← e·(e+2), the last fused with +1);
// times 2^k. Lanes below −700 give +0 (math.Exp's result there is below
// 1e-304, which float32 rounds to +0), lanes above 700 give +Inf (float32
// overflows from 88.8 on) and NaN lanes give the input, as math.Exp does.
// Same operations, same rounding: same bits after the float32 rounding.

DATA attnexp<>+0(SB)/8, $1.4426950408889634073599246810018920
DATA attnexp<>+8(SB)/8, $0.69314718055966295651160180568695068359375
DATA attnexp<>+16(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA attnexp<>+24(SB)/8, $0.0625
DATA attnexp<>+32(SB)/8, $2.4801587301587301587e-5
DATA attnexp<>+40(SB)/8, $1.9841269841269841270e-4
DATA attnexp<>+48(SB)/8, $1.3888888888888888889e-3
DATA attnexp<>+56(SB)/8, $8.3333333333333333333e-3
DATA attnexp<>+64(SB)/8, $4.1666666666666666667e-2
DATA attnexp<>+72(SB)/8, $1.6666666666666666667e-1
DATA attnexp<>+80(SB)/8, $0.5
DATA attnexp<>+88(SB)/8, $1.0
DATA attnexp<>+96(SB)/8, $2.0
DATA attnexp<>+104(SB)/8, $-700.0
DATA attnexp<>+112(SB)/8, $700.0
DATA attnexp<>+120(SB)/8, $0x7ff0000000000000
DATA attnexp<>+128(SB)/4, $1023
GLOBL attnexp<>(SB), RODATA|NOPTR, $132

#define CONST(off, Y) VBROADCASTSD attnexp<>+off(SB), Y

// EXP4: Y0 = exp(Y0) per lane as described above; clobbers Y1-Y5.
// Y1 keeps the input for the special lanes.
#define EXP4 \
	VMOVAPD      Y0, Y1; \
	CONST(104, Y2); \
	VMAXPD       Y2, Y0, Y0; \
	CONST(112, Y2); \
	VMINPD       Y2, Y0, Y0; \
	CONST(0, Y3); \
	VMULPD       Y3, Y0, Y3; \
	VCVTPD2DQY   Y3, X4; \
	VCVTDQ2PD    X4, Y3; \
	CONST(8, Y5); \
	VFNMADD231PD Y5, Y3, Y0; \
	CONST(16, Y5); \
	VFNMADD231PD Y5, Y3, Y0; \
	CONST(24, Y5); \
	VMULPD       Y5, Y0, Y0; \
	CONST(32, Y3); \
	CONST(40, Y5); \
	VFMADD213PD  Y5, Y0, Y3; \
	CONST(48, Y5); \
	VFMADD213PD  Y5, Y0, Y3; \
	CONST(56, Y5); \
	VFMADD213PD  Y5, Y0, Y3; \
	CONST(64, Y5); \
	VFMADD213PD  Y5, Y0, Y3; \
	CONST(72, Y5); \
	VFMADD213PD  Y5, Y0, Y3; \
	CONST(80, Y5); \
	VFMADD213PD  Y5, Y0, Y3; \
	CONST(88, Y5); \
	VFMADD213PD  Y5, Y0, Y3; \
	VMULPD       Y3, Y0, Y0; \
	CONST(96, Y5); \
	VADDPD       Y5, Y0, Y3; \
	VMULPD       Y3, Y0, Y0; \
	VADDPD       Y5, Y0, Y3; \
	VMULPD       Y3, Y0, Y0; \
	VADDPD       Y5, Y0, Y3; \
	VMULPD       Y3, Y0, Y0; \
	VADDPD       Y5, Y0, Y3; \
	CONST(88, Y5); \
	VFMADD213PD  Y5, Y3, Y0; \
	VPBROADCASTD attnexp<>+128(SB), X5; \
	VPADDD       X5, X4, X4; \
	VPMOVZXDQ    X4, Y4; \
	VPSLLQ       $52, Y4, Y4; \
	VMULPD       Y4, Y0, Y0; \
	CONST(104, Y2); \
	VCMPPD       $1, Y2, Y1, Y3; \
	VANDNPD      Y0, Y3, Y0; \
	CONST(112, Y2); \
	VCMPPD       $14, Y2, Y1, Y3; \
	CONST(120, Y2); \
	VBLENDVPD    Y3, Y2, Y0, Y0; \
	VCMPPD       $3, Y1, Y1, Y3; \
	VBLENDVPD    Y3, Y1, Y0, Y0

// EXP8: EXP4 on Y0 (lanes of group A) and Y6 (group B) at once,
// interleaved for instruction-level parallelism: the same operations per
// lane. Clobbers Y1, Y3-Y5, Y7-Y10, Y12, Y13. (Generated from EXP4's
// sequence; constants are shared through Y12/Y13.)
#define EXP8 \
	VMOVAPD Y0, Y1; \
	VMOVAPD Y6, Y7; \
	VBROADCASTSD attnexp<>+104(SB), Y12; \
	VMAXPD Y12, Y0, Y0; \
	VMAXPD Y12, Y6, Y6; \
	VBROADCASTSD attnexp<>+112(SB), Y12; \
	VMINPD Y12, Y0, Y0; \
	VMINPD Y12, Y6, Y6; \
	VBROADCASTSD attnexp<>+0(SB), Y12; \
	VMULPD Y12, Y0, Y3; \
	VMULPD Y12, Y6, Y8; \
	VCVTPD2DQY Y3, X4; \
	VCVTPD2DQY Y8, X9; \
	VCVTDQ2PD X4, Y3; \
	VCVTDQ2PD X9, Y8; \
	VBROADCASTSD attnexp<>+8(SB), Y12; \
	VFNMADD231PD Y12, Y3, Y0; \
	VFNMADD231PD Y12, Y8, Y6; \
	VBROADCASTSD attnexp<>+16(SB), Y12; \
	VFNMADD231PD Y12, Y3, Y0; \
	VFNMADD231PD Y12, Y8, Y6; \
	VBROADCASTSD attnexp<>+24(SB), Y12; \
	VMULPD Y12, Y0, Y0; \
	VMULPD Y12, Y6, Y6; \
	VBROADCASTSD attnexp<>+32(SB), Y3; \
	VBROADCASTSD attnexp<>+32(SB), Y8; \
	VBROADCASTSD attnexp<>+40(SB), Y12; \
	VFMADD213PD Y12, Y0, Y3; \
	VFMADD213PD Y12, Y6, Y8; \
	VBROADCASTSD attnexp<>+48(SB), Y12; \
	VFMADD213PD Y12, Y0, Y3; \
	VFMADD213PD Y12, Y6, Y8; \
	VBROADCASTSD attnexp<>+56(SB), Y12; \
	VFMADD213PD Y12, Y0, Y3; \
	VFMADD213PD Y12, Y6, Y8; \
	VBROADCASTSD attnexp<>+64(SB), Y12; \
	VFMADD213PD Y12, Y0, Y3; \
	VFMADD213PD Y12, Y6, Y8; \
	VBROADCASTSD attnexp<>+72(SB), Y12; \
	VFMADD213PD Y12, Y0, Y3; \
	VFMADD213PD Y12, Y6, Y8; \
	VBROADCASTSD attnexp<>+80(SB), Y12; \
	VFMADD213PD Y12, Y0, Y3; \
	VFMADD213PD Y12, Y6, Y8; \
	VBROADCASTSD attnexp<>+88(SB), Y12; \
	VFMADD213PD Y12, Y0, Y3; \
	VFMADD213PD Y12, Y6, Y8; \
	VMULPD Y3, Y0, Y0; \
	VMULPD Y8, Y6, Y6; \
	VBROADCASTSD attnexp<>+96(SB), Y12; \
	VADDPD Y12, Y0, Y3; \
	VADDPD Y12, Y6, Y8; \
	VMULPD Y3, Y0, Y0; \
	VMULPD Y8, Y6, Y6; \
	VADDPD Y12, Y0, Y3; \
	VADDPD Y12, Y6, Y8; \
	VMULPD Y3, Y0, Y0; \
	VMULPD Y8, Y6, Y6; \
	VADDPD Y12, Y0, Y3; \
	VADDPD Y12, Y6, Y8; \
	VMULPD Y3, Y0, Y0; \
	VMULPD Y8, Y6, Y6; \
	VADDPD Y12, Y0, Y3; \
	VADDPD Y12, Y6, Y8; \
	VBROADCASTSD attnexp<>+88(SB), Y13; \
	VFMADD213PD Y13, Y3, Y0; \
	VFMADD213PD Y13, Y8, Y6; \
	VPBROADCASTD attnexp<>+128(SB), X13; \
	VPADDD X13, X4, X4; \
	VPADDD X13, X9, X9; \
	VPMOVZXDQ X4, Y4; \
	VPMOVZXDQ X9, Y9; \
	VPSLLQ $52, Y4, Y4; \
	VPSLLQ $52, Y9, Y9; \
	VMULPD Y4, Y0, Y0; \
	VMULPD Y9, Y6, Y6; \
	VBROADCASTSD attnexp<>+104(SB), Y12; \
	VCMPPD $1, Y12, Y1, Y5; \
	VCMPPD $1, Y12, Y7, Y10; \
	VANDNPD Y0, Y5, Y0; \
	VANDNPD Y6, Y10, Y6; \
	VBROADCASTSD attnexp<>+112(SB), Y12; \
	VCMPPD $14, Y12, Y1, Y5; \
	VCMPPD $14, Y12, Y7, Y10; \
	VBROADCASTSD attnexp<>+120(SB), Y13; \
	VBLENDVPD Y5, Y13, Y0, Y0; \
	VBLENDVPD Y10, Y13, Y6, Y6; \
	VCMPPD $3, Y1, Y1, Y5; \
	VCMPPD $3, Y7, Y7, Y10; \
	VBLENDVPD Y5, Y1, Y0, Y0; \
	VBLENDVPD Y10, Y7, Y6, Y6

// func attnExpAVX2(scores *float32, n, nh int, m *float32, sums *float64)
// For p < n, h < nh (a multiple of 4): e = float32(exp(float64(
// scores[p·nh+h] − m[h]))); scores[p·nh+h] = e; sums[h] += float64(e), in
// order of p.
TEXT ·attnExpAVX2(SB), NOSPLIT, $0-40
	MOVQ scores+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ nh+16(FP), DX
	SHRQ $2, DX

xpos:
	TESTQ CX, CX
	JZ    xdone
	MOVQ  m+24(FP), R8
	MOVQ  sums+32(FP), R9
	MOVQ  DX, BX

xpair:
	CMPQ       BX, $2
	JLT        xgrp
	VMOVUPS    (SI), X0
	VSUBPS     (R8), X0, X0
	VCVTPS2PD  X0, Y0
	VMOVUPS    16(SI), X6
	VSUBPS     16(R8), X6, X6
	VCVTPS2PD  X6, Y6
	EXP8
	VCVTPD2PSY Y0, X0
	VMOVUPS    X0, (SI)
	VCVTPS2PD  X0, Y0
	VADDPD     (R9), Y0, Y0
	VMOVUPD    Y0, (R9)
	VCVTPD2PSY Y6, X6
	VMOVUPS    X6, 16(SI)
	VCVTPS2PD  X6, Y6
	VADDPD     32(R9), Y6, Y6
	VMOVUPD    Y6, 32(R9)
	ADDQ       $32, SI
	ADDQ       $32, R8
	ADDQ       $64, R9
	SUBQ       $2, BX
	JMP        xpair

xgrp:
	TESTQ BX, BX
	JZ    xnext
	VMOVUPS   (SI), X0
	VSUBPS    (R8), X0, X0
	VCVTPS2PD X0, Y0
	EXP4
	VCVTPD2PSY Y0, X0
	VMOVUPS   X0, (SI)
	VCVTPS2PD X0, Y0
	VADDPD    (R9), Y0, Y0
	VMOVUPD   Y0, (R9)
	ADDQ      $16, SI
	ADDQ      $16, R8
	ADDQ      $32, R9
	DECQ      BX

xnext:
	DECQ      CX
	JMP       xpos

xdone:
	VZEROUPPER
	RET
