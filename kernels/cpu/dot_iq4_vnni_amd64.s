// AVX-512 VNNI kernels for IQ4_XS against Q8_K activations: one row
// against one token (dotIQ4_XSZ) and against four tokens (dotIQ4_XSx4Z).
// Twin: dotIQ4_XSGo (quant_iq4.go); the four-token kernel performs, per
// token, exactly the one-token kernel's float operations.
//
// A super-block is four 64-byte chunks of two sub-blocks each. A chunk's
// 32 nibble bytes become 64 unsigned bytes in activation order (VPERMQ,
// a per-qword shift, a mask), then levels + 128 by VPSHUFB. VPDPBUSD
// multiplies them with the signed activations into 16 dword lanes, 8 per
// sub-block; VPMULLD weights each lane by its sub-block's scale l-32
// (VPERMD of the 8 scales). The +128 is taken back exactly through the
// activations' 16-element sums: the lanes start from -128·Σ_i (l_i-32)·A_i
// (A_i, the sum of sub-block i's activations, from two bsums). Per
// super-block the 16 int32 lanes (|lane| < 2^26) are converted and
// multiply-added with d·dy; the lanes are summed at the end (HSUM16).

#include "textflag.h"
#include "iq4_levels_amd64.h"
#include "hsum8_amd64.h"

// iq4zperm: qword indices repeating each 16-byte half: [s0, s0, s1, s1].
DATA iq4zperm<>+0(SB)/8, $0x0000000000000000
DATA iq4zperm<>+8(SB)/8, $0x0000000000000001
DATA iq4zperm<>+16(SB)/8, $0x0000000000000000
DATA iq4zperm<>+24(SB)/8, $0x0000000000000001
DATA iq4zperm<>+32(SB)/8, $0x0000000000000002
DATA iq4zperm<>+40(SB)/8, $0x0000000000000003
DATA iq4zperm<>+48(SB)/8, $0x0000000000000002
DATA iq4zperm<>+56(SB)/8, $0x0000000000000003
GLOBL iq4zperm<>(SB), RODATA|NOPTR, $64

// iq4zshift: per-qword right shifts giving [s0, s0>>4, s1, s1>>4].
DATA iq4zshift<>+0(SB)/8, $0x0000000000000000
DATA iq4zshift<>+8(SB)/8, $0x0000000000000000
DATA iq4zshift<>+16(SB)/8, $0x0000000000000004
DATA iq4zshift<>+24(SB)/8, $0x0000000000000004
DATA iq4zshift<>+32(SB)/8, $0x0000000000000000
DATA iq4zshift<>+40(SB)/8, $0x0000000000000000
DATA iq4zshift<>+48(SB)/8, $0x0000000000000004
DATA iq4zshift<>+56(SB)/8, $0x0000000000000004
GLOBL iq4zshift<>(SB), RODATA|NOPTR, $64

// iq4zsel: VPERMD indices spreading scales 2c and 2c+1 over 8 lanes each, c = 0..3.
DATA iq4zsel<>+0(SB)/8, $0x0000000000000000
DATA iq4zsel<>+8(SB)/8, $0x0000000000000000
DATA iq4zsel<>+16(SB)/8, $0x0000000000000000
DATA iq4zsel<>+24(SB)/8, $0x0000000000000000
DATA iq4zsel<>+32(SB)/8, $0x0000000100000001
DATA iq4zsel<>+40(SB)/8, $0x0000000100000001
DATA iq4zsel<>+48(SB)/8, $0x0000000100000001
DATA iq4zsel<>+56(SB)/8, $0x0000000100000001
DATA iq4zsel<>+64(SB)/8, $0x0000000200000002
DATA iq4zsel<>+72(SB)/8, $0x0000000200000002
DATA iq4zsel<>+80(SB)/8, $0x0000000200000002
DATA iq4zsel<>+88(SB)/8, $0x0000000200000002
DATA iq4zsel<>+96(SB)/8, $0x0000000300000003
DATA iq4zsel<>+104(SB)/8, $0x0000000300000003
DATA iq4zsel<>+112(SB)/8, $0x0000000300000003
DATA iq4zsel<>+120(SB)/8, $0x0000000300000003
DATA iq4zsel<>+128(SB)/8, $0x0000000400000004
DATA iq4zsel<>+136(SB)/8, $0x0000000400000004
DATA iq4zsel<>+144(SB)/8, $0x0000000400000004
DATA iq4zsel<>+152(SB)/8, $0x0000000400000004
DATA iq4zsel<>+160(SB)/8, $0x0000000500000005
DATA iq4zsel<>+168(SB)/8, $0x0000000500000005
DATA iq4zsel<>+176(SB)/8, $0x0000000500000005
DATA iq4zsel<>+184(SB)/8, $0x0000000500000005
DATA iq4zsel<>+192(SB)/8, $0x0000000600000006
DATA iq4zsel<>+200(SB)/8, $0x0000000600000006
DATA iq4zsel<>+208(SB)/8, $0x0000000600000006
DATA iq4zsel<>+216(SB)/8, $0x0000000600000006
DATA iq4zsel<>+224(SB)/8, $0x0000000700000007
DATA iq4zsel<>+232(SB)/8, $0x0000000700000007
DATA iq4zsel<>+240(SB)/8, $0x0000000700000007
DATA iq4zsel<>+248(SB)/8, $0x0000000700000007
GLOBL iq4zsel<>(SB), RODATA|NOPTR, $256

// iq4zlsh, iq4zhsh: shifts of scales_l (4 bits) and scales_h (2 bits) per sub-block.
DATA iq4zlsh<>+0(SB)/8, $0x0000000400000000
DATA iq4zlsh<>+8(SB)/8, $0x0000000c00000008
DATA iq4zlsh<>+16(SB)/8, $0x0000001400000010
DATA iq4zlsh<>+24(SB)/8, $0x0000001c00000018
GLOBL iq4zlsh<>(SB), RODATA|NOPTR, $32
DATA iq4zhsh<>+0(SB)/8, $0x0000000200000000
DATA iq4zhsh<>+8(SB)/8, $0x0000000600000004
DATA iq4zhsh<>+16(SB)/8, $0x0000000a00000008
DATA iq4zhsh<>+24(SB)/8, $0x0000000e0000000c
GLOBL iq4zhsh<>(SB), RODATA|NOPTR, $32

// iq4zc: dwords 15, 3, 32, and int16 ones (as two words of a dword), 0x0f bytes.
DATA iq4zc<>+0(SB)/8, $0x000000030000000f
DATA iq4zc<>+8(SB)/8, $0x0001000100000020
DATA iq4zc<>+16(SB)/8, $0x000000000f0f0f0f
DATA iq4zc<>+24(SB)/8, $0x0000000000000000
GLOBL iq4zc<>(SB), RODATA|NOPTR, $32

// HSUM16 sums the 16 float32 lanes of Z (Y, X: its low halves) into X.
#define HSUM16(Z, Y, X, YT, XT) \
	VEXTRACTF64X4 $1, Z, YT; \
	VADDPS        YT, Y, Y; \
	HSUM8(Y, X, XT)

// XSZCONSTS loads the constants into Z12-Z25 and zeroes Z31.
#define XSZCONSTS \
	VBROADCASTI32X4 iq4lev128<>(SB), Z12; \
	VPBROADCASTD    iq4zc<>+16(SB), Z13; \
	VMOVDQU64       iq4zperm<>(SB), Z14; \
	VMOVDQU64       iq4zshift<>(SB), Z15; \
	VMOVDQU64       iq4zsel<>+0(SB), Z16; \
	VMOVDQU64       iq4zsel<>+64(SB), Z17; \
	VMOVDQU64       iq4zsel<>+128(SB), Z18; \
	VMOVDQU64       iq4zsel<>+192(SB), Z19; \
	VMOVDQU32       iq4zlsh<>(SB), Y20; \
	VMOVDQU32       iq4zhsh<>(SB), Y21; \
	VPBROADCASTD    iq4zc<>+0(SB), Y22; \
	VPBROADCASTD    iq4zc<>+4(SB), Y23; \
	VPBROADCASTD    iq4zc<>+8(SB), Y24; \
	VPBROADCASTD    iq4zc<>+12(SB), Y25; \
	VPXORD          Z31, Z31, Z31

// XSZSCALES: the super-block's eight signed scales l-32 as dwords in Y10,
// and d (f16 at (SI)) in all lanes of Z30.
#define XSZSCALES \
	VPBROADCASTD 4(SI), Y10; \
	VPSRLVD      Y20, Y10, Y10; \
	VPANDD       Y22, Y10, Y10; \
	VPBROADCASTD 2(SI), Y11; \
	VPSRLVD      Y21, Y11, Y11; \
	VPANDD       Y23, Y11, Y11; \
	VPSLLD       $4, Y11, Y11; \
	VPORD        Y11, Y10, Y10; \
	VPSUBD       Y24, Y10, Y10; \
	VPBROADCASTW (SI), Y30; \
	VCVTPH2PS    Y30, Z30

// XSZCORR: int32 lanes I (Y: its low half) start from -128·Σ (l_i-32)·A_i,
// spread over lanes 0-7, from the token's 16 bsums at mb.
#define XSZCORR(mb, Y) \
	VPMADDWD mb, Y25, Y29; \
	VPMULLD  Y10, Y29, Y29; \
	VPSLLD   $7, Y29, Y29; \
	VPSUBD   Y29, Y31, Y

// XSZW: the chunk whose nibbles are at off(SI) as levels + 128 in Z28, and
// its lane scales (selector SEL) in Z26.
#define XSZW(off, SEL) \
	VMOVDQU  off(SI), Y8; \
	VPERMQ   Z8, Z14, Z28; \
	VPSRLVQ  Z15, Z28, Z28; \
	VPANDD   Z13, Z28, Z28; \
	VPSHUFB  Z28, Z12, Z28; \
	VPERMD   Z10, SEL, Z26

// XSZTOK: one token's chunk (activations at mq) into int32 lanes I.
#define XSZTOK(mq, I) \
	VPXORD   Z9, Z9, Z9; \
	VPDPBUSD mq, Z28, Z9; \
	VPMULLD  Z26, Z9, Z9; \
	VPADDD   Z9, I, I

// XSZEND: ACC += float(I)·(d·dy), dy at md.
#define XSZEND(md, I, ACC) \
	VBROADCASTSS md, Z27; \
	VMULPS       Z27, Z30, Z27; \
	VCVTDQ2PS    I, I; \
	VFMADD231PS  I, Z27, ACC

#define XSZ1CHUNK(off, SEL, ao) \
	XSZW(off, SEL); \
	XSZTOK(ao(DI), Z4)

#define XSZ4CHUNK(off, SEL, ao) \
	XSZW(off, SEL); \
	XSZTOK(ao(DI), Z4); \
	XSZTOK(ao(DI)(R8*1), Z5); \
	XSZTOK(ao(DI)(R8*2), Z6); \
	XSZTOK(ao(DI)(R9*1), Z7)

// func dotIQ4_XSZ(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32
TEXT ·dotIQ4_XSZ(SB), NOSPLIT, $0-44
	MOVQ row+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	XSZCONSTS
	VPXORD Z0, Z0, Z0
	TESTQ  CX, CX
	JLE    xsz1done

xsz1loop:
	XSZSCALES
	XSZCORR((BX), Y4)
	XSZ1CHUNK(8, Z16, 0)
	XSZ1CHUNK(40, Z17, 64)
	XSZ1CHUNK(72, Z18, 128)
	XSZ1CHUNK(104, Z19, 192)
	XSZEND((DX), Z4, Z0)
	ADDQ $136, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  xsz1loop

xsz1done:
	HSUM16(Z0, Y0, X0, Y1, X1)
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// func dotIQ4_XSx4Z(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)
// Token t: qs + t·qstride, d + t·dstride, bsums + t·8·dstride (bytes).
TEXT ·dotIQ4_XSx4Z(SB), NOSPLIT, $0-64
	MOVQ row+0(FP), SI
	MOVQ qs+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ bsums+24(FP), BX
	MOVQ nb+32(FP), CX
	MOVQ qstride+40(FP), R8
	MOVQ dstride+48(FP), R10
	LEAQ (R8)(R8*2), R9
	LEAQ (R10)(R10*2), R11
	LEAQ (R10*8), R12
	LEAQ (R12)(R12*2), R13
	XSZCONSTS
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	TESTQ  CX, CX
	JLE    xsz4done

xsz4loop:
	XSZSCALES
	XSZCORR((BX), Y4)
	XSZCORR((BX)(R12*1), Y5)
	XSZCORR((BX)(R12*2), Y6)
	XSZCORR((BX)(R13*1), Y7)
	XSZ4CHUNK(8, Z16, 0)
	XSZ4CHUNK(40, Z17, 64)
	XSZ4CHUNK(72, Z18, 128)
	XSZ4CHUNK(104, Z19, 192)
	XSZEND((DX), Z4, Z0)
	XSZEND((DX)(R10*1), Z5, Z1)
	XSZEND((DX)(R10*2), Z6, Z2)
	XSZEND((DX)(R11*1), Z7, Z3)
	ADDQ $136, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, BX
	DECQ CX
	JNZ  xsz4loop

xsz4done:
	MOVQ out+56(FP), AX
	HSUM16(Z0, Y0, X0, Y8, X8)
	VMOVSS X0, (AX)
	HSUM16(Z1, Y1, X1, Y8, X8)
	VMOVSS X1, 4(AX)
	HSUM16(Z2, Y2, X2, Y8, X8)
	VMOVSS X2, 8(AX)
	HSUM16(Z3, Y3, X3, Y8, X8)
	VMOVSS X3, 12(AX)
	VZEROUPPER
	RET
