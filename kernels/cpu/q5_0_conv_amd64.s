// Q5_0 rows in the blocked Q8_0 kernels (AVX2; q5_0_conv.go): the
// conversion of blocks to Q8_0 (twin q5_0ToQ8_0) and the one-token kernel
// over groups of 8 rows, which computes gemv8Q8_0AVX2's arithmetic on the
// rows' values q-16 (bitwise blkDot1 on the converted rows).
//
// A block's 32 values: the 16 nibble bytes give elements 0..15 (low
// nibbles, low 128-bit lane) and 16..31 (high nibbles); the 32 high bits
// (qh, bit j for element j) become bytes of 0x10 by a VPSHUFB that spreads
// qh's bytes over 8 bytes each, a VPOR with all bits but bit j%8, and a
// VPCMPEQB with all ones; then 16 is subtracted.

#include "textflag.h"
#include "gemv8_amd64.h"

DATA q5c0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q5c0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q5c0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q5c0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q5c0f<>(SB), RODATA|NOPTR, $32

DATA q5c10<>+0(SB)/8, $0x1010101010101010
DATA q5c10<>+8(SB)/8, $0x1010101010101010
DATA q5c10<>+16(SB)/8, $0x1010101010101010
DATA q5c10<>+24(SB)/8, $0x1010101010101010
GLOBL q5c10<>(SB), RODATA|NOPTR, $32

DATA q5cff<>+0(SB)/8, $0xffffffffffffffff
DATA q5cff<>+8(SB)/8, $0xffffffffffffffff
DATA q5cff<>+16(SB)/8, $0xffffffffffffffff
DATA q5cff<>+24(SB)/8, $0xffffffffffffffff
GLOBL q5cff<>(SB), RODATA|NOPTR, $32

DATA q5cshuf<>+0(SB)/8, $0x0000000000000000
DATA q5cshuf<>+8(SB)/8, $0x0101010101010101
DATA q5cshuf<>+16(SB)/8, $0x0202020202020202
DATA q5cshuf<>+24(SB)/8, $0x0303030303030303
GLOBL q5cshuf<>(SB), RODATA|NOPTR, $32

DATA q5cmask<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA q5cmask<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA q5cmask<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA q5cmask<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL q5cmask<>(SB), RODATA|NOPTR, $32

DATA q5cones16<>+0(SB)/8, $0x0001000100010001
DATA q5cones16<>+8(SB)/8, $0x0001000100010001
DATA q5cones16<>+16(SB)/8, $0x0001000100010001
DATA q5cones16<>+24(SB)/8, $0x0001000100010001
GLOBL q5cones16<>(SB), RODATA|NOPTR, $32

// Q5VALS(mq, mh, V, XV, T, XT): the block's values q-16 (signed bytes,
// element order) in V from its nibbles at mq and high bits at mh (Y14:
// 0x0f bytes, Y15: 0x10 bytes). T is clobbered.
#define Q5VALS(mq, mh, V, XV, T, XT) \
	VMOVDQU      mq, XV; \
	VPSRLW       $4, XV, XT; \
	VINSERTI128  $1, XT, V, V; \
	VPAND        Y14, V, V; \
	VPBROADCASTD mh, T; \
	VPSHUFB      q5cshuf<>(SB), T, T; \
	VPOR         q5cmask<>(SB), T, T; \
	VPCMPEQB     q5cff<>(SB), T, T; \
	VPAND        Y15, T, T; \
	VPOR         T, V, V; \
	VPSUBB       Y15, V, V

// func q5_0ToQ8_0AVX2(dst, src *byte, nb int)
TEXT ·q5_0ToQ8_0AVX2(SB), NOSPLIT, $0-24
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    nb+16(FP), CX
	VMOVDQU q5c0f<>(SB), Y14
	VMOVDQU q5c10<>(SB), Y15
	TESTQ   CX, CX
	JLE     cdone

cloop:
	MOVWLZX (SI), AX
	MOVW    AX, (DI)
	Q5VALS(6(SI), 2(SI), Y0, X0, Y1, X1)
	VMOVDQU Y0, 2(DI)
	ADDQ    $22, SI
	ADDQ    $34, DI
	DECQ    CX
	JNZ     cloop

cdone:
	VZEROUPPER
	RET

// WQ5(mq, mh, T): the Q5_0 block of a row whose nibbles are at mq and high
// bits at mh against the activation block in Y12 -> int32 x8 in T. Uses
// Y5, Y11.
#define WQ5(mq, mh, T) \
	Q5VALS(mq, mh, Y5, X5, Y11, X11); \
	VPSIGNB    Y5, Y12, T; \
	VPSIGNB    Y5, Y5, Y5; \
	VPMADDUBSW T, Y5, T; \
	VPMADDWD   Y13, T, T

// BLKQ5(qo, do): the current block of the 8 rows (SI + r·R8; R9 = 3·R8,
// R10 = SI + 4·R8) against the activations at qo(DI) (dx at do(DX)):
// Y8 = fma(dw·dx, I_b, Y8), lane r = row r, as gemv8Q8_0AVX2's BLK80.
#define BLKQ5(qo, do) \
	VMOVDQU      qo(DI), Y12; \
	WQ5(6(SI), 2(SI), Y0); \
	WQ5(6(SI)(R8*1), 2(SI)(R8*1), Y1); \
	WQ5(6(SI)(R8*2), 2(SI)(R8*2), Y2); \
	WQ5(6(SI)(R9*1), 2(SI)(R9*1), Y3); \
	WQ5(6(R10), 2(R10), Y4); \
	WQ5(6(R10)(R8*1), 2(R10)(R8*1), Y6); \
	WQ5(6(R10)(R8*2), 2(R10)(R8*2), Y7); \
	WQ5(6(R10)(R9*1), 2(R10)(R9*1), Y9); \
	HADD8; \
	VCVTDQ2PS    Y0, Y0; \
	SCALES8(0); \
	VBROADCASTSS do(DX), Y11; \
	VMULPS       Y11, Y10, Y10; \
	VFMADD231PS  Y0, Y10, Y8

// func gemv8Q5_0AVX2(rows *byte, ngroups int, qs *int8, d *float32, nb, pf int, out *float32)
// Groups of 8 contiguous Q5_0 rows (22·nb bytes each); out[8g+r] is row r
// of group g. Prefetch as gemv8Q4_0AVX2 (176 bytes per block step).
TEXT ·gemv8Q5_0AVX2(SB), NOSPLIT, $0-56
	MOVQ    rows+0(FP), SI
	MOVQ    ngroups+8(FP), R13
	MOVQ    nb+32(FP), R8
	MOVQ    pf+40(FP), R11
	MOVQ    out+48(FP), AX
	IMULQ   $22, R8 // rb
	LEAQ    (R8)(R8*2), R9
	ADDQ    SI, R11
	VMOVDQU q5cones16<>(SB), Y13
	VMOVDQU q5c0f<>(SB), Y14
	VMOVDQU q5c10<>(SB), Y15
	TESTQ   R13, R13
	JLE     gq5end

gq5group:
	MOVQ   qs+16(FP), DI
	MOVQ   d+24(FP), DX
	MOVQ   nb+32(FP), CX
	LEAQ   (SI)(R8*4), R10
	VXORPS Y8, Y8, Y8

gq5loop:
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	PREFETCHT0 128(R11)
	BLKQ5(0, 0)
	ADDQ       $22, SI
	ADDQ       $22, R10
	ADDQ       $176, R11
	ADDQ       $32, DI
	ADDQ       $4, DX
	DECQ       CX
	JNZ        gq5loop

	VMOVUPS Y8, (AX)
	ADDQ    $32, AX
	LEAQ    (R10)(R9*1), SI // SI moved rb: next group at SI + 7·rb
	DECQ    R13
	JNZ     gq5group

gq5end:
	VZEROUPPER
	RET
