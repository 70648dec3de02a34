#include "textflag.h"

// Exponentials of sampling in float64, four lanes at a time, with
// expNeg's operations in its order (exp.go: range reduction by ln 2 in two
// parts, the degree-11 Taylor polynomial by Estrin's scheme, 2^k from the
// rounding constant's low bits), each product and sum rounded on its own
// (no fused operations), so every lane is expNeg's bits. Lanes with
// x < −708 (−Inf included) give 0. Used by sumExpNegAVX2 and
// expNegScaledAVX2 (sumexp_amd64.go).

DATA sumexpc<>+0(SB)/8, $0xc086200000000000
DATA sumexpc<>+8(SB)/8, $0xc086200000000000
DATA sumexpc<>+16(SB)/8, $0xc086200000000000
DATA sumexpc<>+24(SB)/8, $0xc086200000000000
DATA sumexpc<>+32(SB)/8, $0x3ff71547652b82fe
DATA sumexpc<>+40(SB)/8, $0x3ff71547652b82fe
DATA sumexpc<>+48(SB)/8, $0x3ff71547652b82fe
DATA sumexpc<>+56(SB)/8, $0x3ff71547652b82fe
DATA sumexpc<>+64(SB)/8, $0x4338000000000000
DATA sumexpc<>+72(SB)/8, $0x4338000000000000
DATA sumexpc<>+80(SB)/8, $0x4338000000000000
DATA sumexpc<>+88(SB)/8, $0x4338000000000000
DATA sumexpc<>+96(SB)/8, $0x3fe62e42fee00000
DATA sumexpc<>+104(SB)/8, $0x3fe62e42fee00000
DATA sumexpc<>+112(SB)/8, $0x3fe62e42fee00000
DATA sumexpc<>+120(SB)/8, $0x3fe62e42fee00000
DATA sumexpc<>+128(SB)/8, $0x3dea39ef35793c76
DATA sumexpc<>+136(SB)/8, $0x3dea39ef35793c76
DATA sumexpc<>+144(SB)/8, $0x3dea39ef35793c76
DATA sumexpc<>+152(SB)/8, $0x3dea39ef35793c76
DATA sumexpc<>+160(SB)/8, $0x3ff0000000000000
DATA sumexpc<>+168(SB)/8, $0x3ff0000000000000
DATA sumexpc<>+176(SB)/8, $0x3ff0000000000000
DATA sumexpc<>+184(SB)/8, $0x3ff0000000000000
DATA sumexpc<>+192(SB)/8, $0x3fc5555555555555
DATA sumexpc<>+200(SB)/8, $0x3fc5555555555555
DATA sumexpc<>+208(SB)/8, $0x3fc5555555555555
DATA sumexpc<>+216(SB)/8, $0x3fc5555555555555
DATA sumexpc<>+224(SB)/8, $0x3fe0000000000000
DATA sumexpc<>+232(SB)/8, $0x3fe0000000000000
DATA sumexpc<>+240(SB)/8, $0x3fe0000000000000
DATA sumexpc<>+248(SB)/8, $0x3fe0000000000000
DATA sumexpc<>+256(SB)/8, $0x3fa5555555555555
DATA sumexpc<>+264(SB)/8, $0x3fa5555555555555
DATA sumexpc<>+272(SB)/8, $0x3fa5555555555555
DATA sumexpc<>+280(SB)/8, $0x3fa5555555555555
DATA sumexpc<>+288(SB)/8, $0x3f81111111111111
DATA sumexpc<>+296(SB)/8, $0x3f81111111111111
DATA sumexpc<>+304(SB)/8, $0x3f81111111111111
DATA sumexpc<>+312(SB)/8, $0x3f81111111111111
DATA sumexpc<>+320(SB)/8, $0x3f56c16c16c16c17
DATA sumexpc<>+328(SB)/8, $0x3f56c16c16c16c17
DATA sumexpc<>+336(SB)/8, $0x3f56c16c16c16c17
DATA sumexpc<>+344(SB)/8, $0x3f56c16c16c16c17
DATA sumexpc<>+352(SB)/8, $0x3f2a01a01a01a01a
DATA sumexpc<>+360(SB)/8, $0x3f2a01a01a01a01a
DATA sumexpc<>+368(SB)/8, $0x3f2a01a01a01a01a
DATA sumexpc<>+376(SB)/8, $0x3f2a01a01a01a01a
DATA sumexpc<>+384(SB)/8, $0x3efa01a01a01a01a
DATA sumexpc<>+392(SB)/8, $0x3efa01a01a01a01a
DATA sumexpc<>+400(SB)/8, $0x3efa01a01a01a01a
DATA sumexpc<>+408(SB)/8, $0x3efa01a01a01a01a
DATA sumexpc<>+416(SB)/8, $0x3ec71de3a556c734
DATA sumexpc<>+424(SB)/8, $0x3ec71de3a556c734
DATA sumexpc<>+432(SB)/8, $0x3ec71de3a556c734
DATA sumexpc<>+440(SB)/8, $0x3ec71de3a556c734
DATA sumexpc<>+448(SB)/8, $0x3e927e4fb7789f5c
DATA sumexpc<>+456(SB)/8, $0x3e927e4fb7789f5c
DATA sumexpc<>+464(SB)/8, $0x3e927e4fb7789f5c
DATA sumexpc<>+472(SB)/8, $0x3e927e4fb7789f5c
DATA sumexpc<>+480(SB)/8, $0x3e5ae64567f544e4
DATA sumexpc<>+488(SB)/8, $0x3e5ae64567f544e4
DATA sumexpc<>+496(SB)/8, $0x3e5ae64567f544e4
DATA sumexpc<>+504(SB)/8, $0x3e5ae64567f544e4
DATA sumexpc<>+512(SB)/8, $0x00000000000003ff
DATA sumexpc<>+520(SB)/8, $0x00000000000003ff
DATA sumexpc<>+528(SB)/8, $0x00000000000003ff
DATA sumexpc<>+536(SB)/8, $0x00000000000003ff
GLOBL sumexpc<>(SB), RODATA|NOPTR, $544

// EXPNEG: Y8 = expNeg(Y0) per lane; clobbers Y1-Y13 (Y6: the x < −708
// mask).
#define EXPNEG \
	VCMPPD    $1, sumexpc<>+0(SB), Y0, Y6; \
	VMULPD    sumexpc<>+32(SB), Y0, Y1; \
	VADDPD    sumexpc<>+64(SB), Y1, Y1; \
	VSUBPD    sumexpc<>+64(SB), Y1, Y2; \
	VMULPD    sumexpc<>+96(SB), Y2, Y3; \
	VSUBPD    Y3, Y0, Y3; \
	VMULPD    sumexpc<>+128(SB), Y2, Y4; \
	VSUBPD    Y4, Y3, Y3; \
	VMULPD    Y3, Y3, Y4; \
	VMULPD    Y4, Y4, Y5; \
	VMULPD    Y5, Y5, Y7; \
	VADDPD    sumexpc<>+160(SB), Y3, Y8; \
	VMULPD    sumexpc<>+192(SB), Y3, Y9; \
	VADDPD    sumexpc<>+224(SB), Y9, Y9; \
	VMULPD    sumexpc<>+288(SB), Y3, Y10; \
	VADDPD    sumexpc<>+256(SB), Y10, Y10; \
	VMULPD    sumexpc<>+352(SB), Y3, Y11; \
	VADDPD    sumexpc<>+320(SB), Y11, Y11; \
	VMULPD    sumexpc<>+416(SB), Y3, Y12; \
	VADDPD    sumexpc<>+384(SB), Y12, Y12; \
	VMULPD    sumexpc<>+480(SB), Y3, Y13; \
	VADDPD    sumexpc<>+448(SB), Y13, Y13; \
	VMULPD    Y4, Y9, Y9; \
	VADDPD    Y9, Y8, Y8; \
	VMULPD    Y4, Y11, Y11; \
	VADDPD    Y11, Y10, Y10; \
	VMULPD    Y10, Y5, Y10; \
	VMULPD    Y4, Y13, Y13; \
	VADDPD    Y13, Y12, Y12; \
	VMULPD    Y12, Y7, Y12; \
	VADDPD    Y10, Y8, Y8; \
	VADDPD    Y12, Y8, Y8; \
	VPADDQ    sumexpc<>+512(SB), Y1, Y1; \
	VPSLLQ    $52, Y1, Y1; \
	VMULPD    Y1, Y8, Y8; \
	VANDNPD   Y8, Y6, Y8

// func sumExpNegAVX2(z *float32, n int, m float64) float64
// Σ expNeg(float64(z[i]) − m) for i < n (a multiple of 4); the four
// lanes' sums are added at the end.
TEXT ·sumExpNegAVX2(SB), NOSPLIT, $0-32
	MOVQ         z+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSD m+16(FP), Y15
	VXORPD       Y14, Y14, Y14

sloop:
	CMPQ      CX, $4
	JLT       sdone
	VCVTPS2PD (SI), Y0
	VSUBPD    Y15, Y0, Y0
	EXPNEG
	VADDPD    Y8, Y14, Y14
	ADDQ      $16, SI
	SUBQ      $4, CX
	JMP       sloop

sdone:
	VEXTRACTF128 $1, Y14, X0
	VADDPD       X0, X14, X0
	VUNPCKHPD    X0, X0, X1
	VADDSD       X1, X0, X0
	MOVSD        X0, ret+24(FP)
	VZEROUPPER
	RET

// func expNegScaledAVX2(z *float32, n int, m, invT float64, w *float64)
// w[i] = expNeg((float64(z[i]) − m) · invT) for i < n (a multiple of 4).
TEXT ·expNegScaledAVX2(SB), NOSPLIT, $0-40
	MOVQ         z+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSD m+16(FP), Y15
	VBROADCASTSD invT+24(FP), Y14
	MOVQ         w+32(FP), DI

wloop:
	CMPQ      CX, $4
	JLT       wdone
	VCVTPS2PD (SI), Y0
	VSUBPD    Y15, Y0, Y0
	VMULPD    Y14, Y0, Y0
	EXPNEG
	VMOVUPD   Y8, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $4, CX
	JMP       wloop

wdone:
	VZEROUPPER
	RET
