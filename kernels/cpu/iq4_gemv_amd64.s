// Decode (one token) kernels for IQ4_NL rows: groups of contiguous rows,
// one row per lane, computing exactly the Q8_0 kernels' arithmetic on the
// rows' levels (blkDotRef: the exact integer block sum I_b, then
// acc = fma(dw·dx, float32(I_b), acc) in block order), so every row gets
// the bits of blkDot1 on the row converted to Q8_0 (iq4NLToQ8_0), which
// the other IQ4_NL paths compute (tileConv; TestConvGemv).
//
// gemv8IQ4_NLAVX2 (AVX2): gemv8Q8_0AVX2 with each block's 32 signed bytes
// made from the 16 nibble bytes by one VPSHUFB from iq4Values.
// gemv16IQ4_NLZ (AVX-512 VNNI): gemv16Q4_0Z with each masked nibble
// vector turned into levels + 128 by VPSHUFB before VPDPBUSD, and the
// +128 taken back as 16·s8 (s8 = 8·Σq, so 16·s8 = 128·Σq).

#include "textflag.h"
#include "iq4_levels_amd64.h"
#include "gemv8_amd64.h"
#include "q4_0_blocksum_vnni_amd64.h"

DATA ig80f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ig80f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ig80f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ig80f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL ig80f<>(SB), RODATA|NOPTR, $32

DATA igones16<>+0(SB)/8, $0x0001000100010001
DATA igones16<>+8(SB)/8, $0x0001000100010001
DATA igones16<>+16(SB)/8, $0x0001000100010001
DATA igones16<>+24(SB)/8, $0x0001000100010001
GLOBL igones16<>(SB), RODATA|NOPTR, $32

// WI4(mw, T): the IQ4_NL block of a row whose nibbles are at mw against
// the activation block in Y12 -> int32 x8 in T (Y14: 0x0f bytes, Y15: the
// levels). Uses Y5, Y11.
#define WI4(mw, T) \
	VMOVDQU     mw, X5; \
	VPSRLW      $4, X5, X11; \
	VINSERTI128 $1, X11, Y5, Y5; \
	VPAND       Y14, Y5, Y5; \
	VPSHUFB     Y5, Y15, Y5; \
	VPSIGNB     Y5, Y12, T; \
	VPSIGNB     Y5, Y5, Y5; \
	VPMADDUBSW  T, Y5, T; \
	VPMADDWD    Y13, T, T

// BLKI4(o, qo, do): the block at offset o of the 8 rows (SI + r·R8;
// R9 = 3·R8, R10 = SI + 4·R8) against the activations at qo(DI) (dx at
// do(DX)): Y8 = fma(dw·dx, I_b, Y8), lane r = row r.
#define BLKI4(o, qo, do) \
	VMOVDQU      qo(DI), Y12; \
	WI4(o+2(SI), Y0); \
	WI4(o+2(SI)(R8*1), Y1); \
	WI4(o+2(SI)(R8*2), Y2); \
	WI4(o+2(SI)(R9*1), Y3); \
	WI4(o+2(R10), Y4); \
	WI4(o+2(R10)(R8*1), Y6); \
	WI4(o+2(R10)(R8*2), Y7); \
	WI4(o+2(R10)(R9*1), Y9); \
	HADD8; \
	VCVTDQ2PS    Y0, Y0; \
	SCALES8(o); \
	VBROADCASTSS do(DX), Y11; \
	VMULPS       Y11, Y10, Y10; \
	VFMADD231PS  Y0, Y10, Y8

// func gemv8IQ4_NLAVX2(rows *byte, ngroups int, qs *int8, d *float32, nb, pf int, out *float32)
// Groups of 8 contiguous IQ4_NL rows (18·nb bytes each); out[8g+r] is
// row r of group g. Prefetch as gemv8Q4_0AVX2 (144 bytes per block step).
TEXT ·gemv8IQ4_NLAVX2(SB), NOSPLIT, $0-56
	MOVQ           rows+0(FP), SI
	MOVQ           ngroups+8(FP), R13
	MOVQ           nb+32(FP), R8
	MOVQ           pf+40(FP), R11
	MOVQ           out+48(FP), AX
	LEAQ           (R8)(R8*8), R8
	ADDQ           R8, R8 // rb = 18·nb
	LEAQ           (R8)(R8*2), R9
	ADDQ           SI, R11
	VMOVDQU        igones16<>(SB), Y13
	VMOVDQU        ig80f<>(SB), Y14
	VBROADCASTI128 iq4lev<>(SB), Y15
	TESTQ          R13, R13
	JLE            gi8end

gi8group:
	MOVQ   qs+16(FP), DI
	MOVQ   d+24(FP), DX
	MOVQ   nb+32(FP), CX
	LEAQ   (SI)(R8*4), R10
	VXORPS Y8, Y8, Y8

gi8loop:
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	PREFETCHT0 128(R11)
	BLKI4(0, 0, 0)
	ADDQ       $18, SI
	ADDQ       $18, R10
	ADDQ       $144, R11
	ADDQ       $32, DI
	ADDQ       $4, DX
	DECQ       CX
	JNZ        gi8loop

	VMOVUPS Y8, (AX)
	ADDQ    $32, AX
	LEAQ    (R10)(R9*1), SI // SI moved rb: next group at SI + 7·rb
	DECQ    R13
	JNZ     gi8group

gi8end:
	VZEROUPPER
	RET

// I4BLOCKSUM: Q4BLOCKSUM (q4_0_blocksum_vnni_amd64.h) for IQ4_NL: the
// masked nibbles become levels + 128 (Z28: the table in every lane) and
// the lanes start from -16·s8.
#define I4BLOCKSUM \
	VPSUBD.BCST   (BX), Z31, Z10; \
	VPSLLD        $4, Z10, Z10; \
	VPXORD        Z11, Z11, Z11; \
	VPANDD        Z29, Z0, Z4; \
	VPSHUFB       Z4, Z28, Z4; \
	VPDPBUSD.BCST 0(DI), Z4, Z10; \
	VPSRLD        $4, Z0, Z0; \
	VPANDD        Z29, Z0, Z0; \
	VPSHUFB       Z0, Z28, Z0; \
	VPDPBUSD.BCST 16(DI), Z0, Z11; \
	VPANDD        Z29, Z1, Z5; \
	VPSHUFB       Z5, Z28, Z5; \
	VPDPBUSD.BCST 4(DI), Z5, Z10; \
	VPSRLD        $4, Z1, Z1; \
	VPANDD        Z29, Z1, Z1; \
	VPSHUFB       Z1, Z28, Z1; \
	VPDPBUSD.BCST 20(DI), Z1, Z11; \
	VPANDD        Z29, Z2, Z6; \
	VPSHUFB       Z6, Z28, Z6; \
	VPDPBUSD.BCST 8(DI), Z6, Z10; \
	VPSRLD        $4, Z2, Z2; \
	VPANDD        Z29, Z2, Z2; \
	VPSHUFB       Z2, Z28, Z2; \
	VPDPBUSD.BCST 24(DI), Z2, Z11; \
	VPANDD        Z29, Z3, Z7; \
	VPSHUFB       Z7, Z28, Z7; \
	VPDPBUSD.BCST 12(DI), Z7, Z10; \
	VPSRLD        $4, Z3, Z3; \
	VPANDD        Z29, Z3, Z3; \
	VPSHUFB       Z3, Z28, Z3; \
	VPDPBUSD.BCST 28(DI), Z3, Z11; \
	VPADDD        Z11, Z10, Z10

// func gemv16IQ4_NLZ(rows *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)
// Groups of 16 contiguous IQ4_NL rows (18·nb bytes each); out[16g+r] is
// row r of group g. ngroups ≥ 1, nb ≥ 1. The loads, transposes and
// prefetch are gemv16Q4_0Z's (GEMV16Z).
TEXT ·gemv16IQ4_NLZ(SB), NOSPLIT, $0-64
	VBROADCASTI32X4 iq4lev128<>(SB), Z28
	GEMV16Z(I4BLOCKSUM)
