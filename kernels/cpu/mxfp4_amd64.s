// MXFP4 kernels (AVX2), bitwise the Q8_0 kernels' arithmetic on the rows
// converted to Q8_0 (mxfp4.go: each nibble its level of mxfp4Values, the
// scale 2^(e-128) as mxfp4F16Scale gives it).
//
// mxfp4ToQ8_0AVX2: the conversion (twin mxfp4ToQ8_0): per block the F16
// scale from the table mxf16 (mxfp4F16Scale of every exponent byte), the
// 16 nibble bytes as 32 levels by one VPSHUFB.
//
// gemv8MXFP4AVX2: gemv8IQ4_NLAVX2 (iq4_gemv_amd64.s) for 17-byte MXFP4
// blocks: the levels come from mxlev, and the 8 rows' exponent bytes e
// become the float32 scales with F16's range by integer arithmetic:
// min(e, 143), then (e−1)<<23 (the bits of 2^(e−128)), 0 where e < 104.

#include "textflag.h"
#include "gemv8_amd64.h"

// mxfp4Values as bytes.
DATA mxlev<>+0(SB)/8, $0x0c08060403020100
DATA mxlev<>+8(SB)/8, $0xf4f8fafcfdfeff00
GLOBL mxlev<>(SB), RODATA|NOPTR, $16

DATA mx0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mx0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mx0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mx0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL mx0f<>(SB), RODATA|NOPTR, $32

DATA mxones16<>+0(SB)/8, $0x0001000100010001
DATA mxones16<>+8(SB)/8, $0x0001000100010001
DATA mxones16<>+16(SB)/8, $0x0001000100010001
DATA mxones16<>+24(SB)/8, $0x0001000100010001
GLOBL mxones16<>(SB), RODATA|NOPTR, $32

// int32 lanes: 143 (the largest exponent F16 holds), 103 (below the
// smallest), 1.
DATA mxe143<>+0(SB)/8, $0x0000008f0000008f
DATA mxe143<>+8(SB)/8, $0x0000008f0000008f
DATA mxe143<>+16(SB)/8, $0x0000008f0000008f
DATA mxe143<>+24(SB)/8, $0x0000008f0000008f
GLOBL mxe143<>(SB), RODATA|NOPTR, $32

DATA mxe103<>+0(SB)/8, $0x0000006700000067
DATA mxe103<>+8(SB)/8, $0x0000006700000067
DATA mxe103<>+16(SB)/8, $0x0000006700000067
DATA mxe103<>+24(SB)/8, $0x0000006700000067
GLOBL mxe103<>(SB), RODATA|NOPTR, $32

DATA mxone32<>+0(SB)/8, $0x0000000100000001
DATA mxone32<>+8(SB)/8, $0x0000000100000001
DATA mxone32<>+16(SB)/8, $0x0000000100000001
DATA mxone32<>+24(SB)/8, $0x0000000100000001
GLOBL mxone32<>(SB), RODATA|NOPTR, $32

// mxf16: mxfp4F16Scale(e) for e = 0..255.
DATA mxf16<>+0(SB)/8, $0x0000000000000000
DATA mxf16<>+8(SB)/8, $0x0000000000000000
DATA mxf16<>+16(SB)/8, $0x0000000000000000
DATA mxf16<>+24(SB)/8, $0x0000000000000000
DATA mxf16<>+32(SB)/8, $0x0000000000000000
DATA mxf16<>+40(SB)/8, $0x0000000000000000
DATA mxf16<>+48(SB)/8, $0x0000000000000000
DATA mxf16<>+56(SB)/8, $0x0000000000000000
DATA mxf16<>+64(SB)/8, $0x0000000000000000
DATA mxf16<>+72(SB)/8, $0x0000000000000000
DATA mxf16<>+80(SB)/8, $0x0000000000000000
DATA mxf16<>+88(SB)/8, $0x0000000000000000
DATA mxf16<>+96(SB)/8, $0x0000000000000000
DATA mxf16<>+104(SB)/8, $0x0000000000000000
DATA mxf16<>+112(SB)/8, $0x0000000000000000
DATA mxf16<>+120(SB)/8, $0x0000000000000000
DATA mxf16<>+128(SB)/8, $0x0000000000000000
DATA mxf16<>+136(SB)/8, $0x0000000000000000
DATA mxf16<>+144(SB)/8, $0x0000000000000000
DATA mxf16<>+152(SB)/8, $0x0000000000000000
DATA mxf16<>+160(SB)/8, $0x0000000000000000
DATA mxf16<>+168(SB)/8, $0x0000000000000000
DATA mxf16<>+176(SB)/8, $0x0000000000000000
DATA mxf16<>+184(SB)/8, $0x0000000000000000
DATA mxf16<>+192(SB)/8, $0x0000000000000000
DATA mxf16<>+200(SB)/8, $0x0000000000000000
DATA mxf16<>+208(SB)/8, $0x0008000400020001
DATA mxf16<>+216(SB)/8, $0x0080004000200010
DATA mxf16<>+224(SB)/8, $0x0800040002000100
DATA mxf16<>+232(SB)/8, $0x1800140010000c00
DATA mxf16<>+240(SB)/8, $0x2800240020001c00
DATA mxf16<>+248(SB)/8, $0x3800340030002c00
DATA mxf16<>+256(SB)/8, $0x4800440040003c00
DATA mxf16<>+264(SB)/8, $0x5800540050004c00
DATA mxf16<>+272(SB)/8, $0x6800640060005c00
DATA mxf16<>+280(SB)/8, $0x7800740070006c00
DATA mxf16<>+288(SB)/8, $0x7800780078007800
DATA mxf16<>+296(SB)/8, $0x7800780078007800
DATA mxf16<>+304(SB)/8, $0x7800780078007800
DATA mxf16<>+312(SB)/8, $0x7800780078007800
DATA mxf16<>+320(SB)/8, $0x7800780078007800
DATA mxf16<>+328(SB)/8, $0x7800780078007800
DATA mxf16<>+336(SB)/8, $0x7800780078007800
DATA mxf16<>+344(SB)/8, $0x7800780078007800
DATA mxf16<>+352(SB)/8, $0x7800780078007800
DATA mxf16<>+360(SB)/8, $0x7800780078007800
DATA mxf16<>+368(SB)/8, $0x7800780078007800
DATA mxf16<>+376(SB)/8, $0x7800780078007800
DATA mxf16<>+384(SB)/8, $0x7800780078007800
DATA mxf16<>+392(SB)/8, $0x7800780078007800
DATA mxf16<>+400(SB)/8, $0x7800780078007800
DATA mxf16<>+408(SB)/8, $0x7800780078007800
DATA mxf16<>+416(SB)/8, $0x7800780078007800
DATA mxf16<>+424(SB)/8, $0x7800780078007800
DATA mxf16<>+432(SB)/8, $0x7800780078007800
DATA mxf16<>+440(SB)/8, $0x7800780078007800
DATA mxf16<>+448(SB)/8, $0x7800780078007800
DATA mxf16<>+456(SB)/8, $0x7800780078007800
DATA mxf16<>+464(SB)/8, $0x7800780078007800
DATA mxf16<>+472(SB)/8, $0x7800780078007800
DATA mxf16<>+480(SB)/8, $0x7800780078007800
DATA mxf16<>+488(SB)/8, $0x7800780078007800
DATA mxf16<>+496(SB)/8, $0x7800780078007800
DATA mxf16<>+504(SB)/8, $0x7800780078007800
GLOBL mxf16<>(SB), RODATA|NOPTR, $512

// func mxfp4ToQ8_0AVX2(dst, src *byte, nb int)
TEXT ·mxfp4ToQ8_0AVX2(SB), NOSPLIT, $0-24
	MOVQ           dst+0(FP), DI
	MOVQ           src+8(FP), SI
	MOVQ           nb+16(FP), CX
	LEAQ           mxf16<>(SB), BX
	VBROADCASTI128 mxlev<>(SB), Y2
	VMOVDQU        mx0f<>(SB), Y3
	TESTQ          CX, CX
	JLE            cdone

cloop:
	MOVBLZX     (SI), AX
	MOVWLZX     (BX)(AX*2), AX
	MOVW        AX, (DI)
	VMOVDQU     1(SI), X0
	VPSRLW      $4, X0, X1
	VINSERTI128 $1, X1, Y0, Y0
	VPAND       Y3, Y0, Y0
	VPSHUFB     Y0, Y2, Y0
	VMOVDQU     Y0, 2(DI)
	ADDQ        $17, SI
	ADDQ        $34, DI
	DECQ        CX
	JNZ         cloop

cdone:
	VZEROUPPER
	RET

// WM4(mw, T): the MXFP4 block of a row whose nibbles are at mw against
// the activation block in Y12 -> int32 x8 in T (Y14: 0x0f bytes, Y15: the
// levels). Uses Y5, Y11.
#define WM4(mw, T) \
	VMOVDQU     mw, X5; \
	VPSRLW      $4, X5, X11; \
	VINSERTI128 $1, X11, Y5, Y5; \
	VPAND       Y14, Y5, Y5; \
	VPSHUFB     Y5, Y15, Y5; \
	VPSIGNB     Y5, Y12, T; \
	VPSIGNB     Y5, Y5, Y5; \
	VPMADDUBSW  T, Y5, T; \
	VPMADDWD    Y13, T, T

// SCALESM(o): the exponent bytes at offset o of rows SI + r·R8 (r =
// 0..7; R9 = 3·R8, R10 = SI + 4·R8) as the float32 scales in Y10. Uses
// Y11.
#define SCALESM(o) \
	VPINSRB   $0, o(SI), X10, X10; \
	VPINSRB   $1, o(SI)(R8*1), X10, X10; \
	VPINSRB   $2, o(SI)(R8*2), X10, X10; \
	VPINSRB   $3, o(SI)(R9*1), X10, X10; \
	VPINSRB   $4, o(R10), X10, X10; \
	VPINSRB   $5, o(R10)(R8*1), X10, X10; \
	VPINSRB   $6, o(R10)(R8*2), X10, X10; \
	VPINSRB   $7, o(R10)(R9*1), X10, X10; \
	VPMOVZXBD X10, Y10; \
	VPMINSD   mxe143<>(SB), Y10, Y10; \
	VPCMPGTD  mxe103<>(SB), Y10, Y11; \
	VPSUBD    mxone32<>(SB), Y10, Y10; \
	VPSLLD    $23, Y10, Y10; \
	VPAND     Y11, Y10, Y10

// BLKM4(qo, do): the block at SI of the 8 rows against the activations at
// qo(DI) (dx at do(DX)): Y8 = fma(dw·dx, I_b, Y8), lane r = row r.
#define BLKM4(qo, do) \
	VMOVDQU      qo(DI), Y12; \
	WM4(1(SI), Y0); \
	WM4(1(SI)(R8*1), Y1); \
	WM4(1(SI)(R8*2), Y2); \
	WM4(1(SI)(R9*1), Y3); \
	WM4(1(R10), Y4); \
	WM4(1(R10)(R8*1), Y6); \
	WM4(1(R10)(R8*2), Y7); \
	WM4(1(R10)(R9*1), Y9); \
	HADD8; \
	VCVTDQ2PS    Y0, Y0; \
	SCALESM(0); \
	VBROADCASTSS do(DX), Y11; \
	VMULPS       Y11, Y10, Y10; \
	VFMADD231PS  Y0, Y10, Y8

// func gemv8MXFP4AVX2(rows *byte, ngroups int, qs *int8, d *float32, nb, pf int, out *float32)
// Groups of 8 contiguous MXFP4 rows (17·nb bytes each); out[8g+r] is row
// r of group g. Prefetch as gemv8IQ4_NLAVX2 (136 bytes per block step).
TEXT ·gemv8MXFP4AVX2(SB), NOSPLIT, $0-56
	MOVQ           rows+0(FP), SI
	MOVQ           ngroups+8(FP), R13
	MOVQ           nb+32(FP), R8
	MOVQ           pf+40(FP), R11
	MOVQ           out+48(FP), AX
	MOVQ           R8, R9
	SHLQ           $4, R8
	ADDQ           R9, R8 // rb = 17·nb
	LEAQ           (R8)(R8*2), R9
	ADDQ           SI, R11
	VMOVDQU        mxones16<>(SB), Y13
	VMOVDQU        mx0f<>(SB), Y14
	VBROADCASTI128 mxlev<>(SB), Y15
	TESTQ          R13, R13
	JLE            gm8end

gm8group:
	MOVQ   qs+16(FP), DI
	MOVQ   d+24(FP), DX
	MOVQ   nb+32(FP), CX
	LEAQ   (SI)(R8*4), R10
	VXORPS Y8, Y8, Y8

gm8loop:
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	PREFETCHT0 128(R11)
	BLKM4(0, 0)
	ADDQ       $17, SI
	ADDQ       $17, R10
	ADDQ       $136, R11
	ADDQ       $32, DI
	ADDQ       $4, DX
	DECQ       CX
	JNZ        gm8loop

	VMOVUPS Y8, (AX)
	ADDQ    $32, AX
	LEAQ    (R10)(R9*1), SI // SI moved rb: next group at SI + 7·rb
	DECQ    R13
	JNZ     gm8group

gm8end:
	VZEROUPPER
	RET
