// Blocked AVX2 kernels for Q4_0 and Q8_0 weights with Q8_0 activations:
// eight (row, token) pairs at once, one per lane. For each pair they do the
// canonical arithmetic of blkDotRef (dot_blk.go): per 32-block b the exact
// integer sum I_b = Σ w·q (Q4_0: Σ (w+8)·q − 8·Σq), then
// acc = fma(dw_b·dx_b, float32(I_b), acc) in block order. Every pair gets
// the same float operations whatever the other lanes hold, so the gemm
// (1 row × 8 tokens) and gemv (8 rows × 1 token) kernels agree bit for bit:
// batch invariance.
//
// The eight int32 vectors of partial sums (8 lanes each) are reduced to one
// vector of eight block sums with a VPHADDD tree (HADD8).

#include "textflag.h"

DATA bx0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA bx0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA bx0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA bx0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL bx0f<>(SB), RODATA|NOPTR, $32

DATA bones16<>+0(SB)/8, $0x0001000100010001
DATA bones16<>+8(SB)/8, $0x0001000100010001
DATA bones16<>+16(SB)/8, $0x0001000100010001
DATA bones16<>+24(SB)/8, $0x0001000100010001
GLOBL bones16<>(SB), RODATA|NOPTR, $32

// HADD8: Y0,Y1,Y2,Y3,Y4,Y6,Y7,Y9 (8 int32 lanes each) -> Y0 lane k = sum of
// the lanes of input k. Clobbers Y1..Y4, Y6, Y7, Y9, Y11.
#define HADD8 \
	VPHADDD    Y1, Y0, Y0; \
	VPHADDD    Y3, Y2, Y2; \
	VPHADDD    Y6, Y4, Y4; \
	VPHADDD    Y9, Y7, Y7; \
	VPHADDD    Y2, Y0, Y0; \
	VPHADDD    Y7, Y4, Y4; \
	VPERM2I128 $0x20, Y4, Y0, Y11; \
	VPERM2I128 $0x31, Y4, Y0, Y0; \
	VPADDD     Y11, Y0, Y0

// Q4_0 weights at m (16 bytes of nibbles) -> Y5 unsigned 0..15, element
// order (low lane: elements 0..15).
#define NIB(m) \
	VMOVDQU     m, X5; \
	VPSRLW      $4, X5, X10; \
	VINSERTI128 $1, X10, Y5, Y5; \
	VPAND       Y15, Y5, Y5

// Q4_0 pair: Y5 (unsigned weights) · signed q at mq -> int32 x8 in T.
#define P40(mq, T) \
	VPMADDUBSW mq, Y5, T; \
	VPMADDWD   Y13, T, T

// Q8_0 pair: Y5 signed weights, Y14 |w|, q at mq -> int32 x8 in T.
#define P80(mq, T) \
	VMOVDQU    mq, T; \
	VPSIGNB    Y5, T, T; \
	VPMADDUBSW T, Y14, T; \
	VPMADDWD   Y13, T, T

// Q4_0 pair, weights of a row at mw (16 bytes) against q in Y12.
#define R40(mw, T) \
	VMOVDQU     mw, X5; \
	VPSRLW      $4, X5, X10; \
	VINSERTI128 $1, X10, Y5, Y5; \
	VPAND       Y15, Y5, Y5; \
	VPMADDUBSW  Y12, Y5, T; \
	VPMADDWD    Y13, T, T

// Q8_0 pair, weights of a row at mw (32 bytes) against q in Y12.
#define R80(mw, T) \
	VMOVDQU    mw, Y5; \
	VPSIGNB    Y5, Y12, T; \
	VPSIGNB    Y5, Y5, Y5; \
	VPMADDUBSW T, Y5, T; \
	VPMADDWD   Y13, T, T

// func gemmQ4_0x8AVX2(row *byte, qs *int8, dT *float32, s8T *int32, nb, cols int, out *float32)
// One Q4_0 row against 8 tokens: token t's q at qs + t*cols; dT, s8T are
// [nb][8] (dx and 8·Σq of each block per token).
TEXT ·gemmQ4_0x8AVX2(SB), NOSPLIT, $0-56
	MOVQ    row+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    dT+16(FP), DX
	MOVQ    s8T+24(FP), BX
	MOVQ    nb+32(FP), CX
	MOVQ    cols+40(FP), R8
	LEAQ    (R8)(R8*2), R9
	LEAQ    (DI)(R8*4), R10
	VXORPS  Y8, Y8, Y8
	VMOVDQU bx0f<>(SB), Y15
	VMOVDQU bones16<>(SB), Y13
	TESTQ   CX, CX
	JLE     g40done

g40loop:
	NIB(2(SI))
	P40((DI), Y0)
	P40((DI)(R8*1), Y1)
	P40((DI)(R8*2), Y2)
	P40((DI)(R9*1), Y3)
	P40((R10), Y4)
	P40((R10)(R8*1), Y6)
	P40((R10)(R8*2), Y7)
	P40((R10)(R9*1), Y9)
	HADD8
	VPSUBD       (BX), Y0, Y0
	VCVTDQ2PS    Y0, Y0
	VPBROADCASTW (SI), X10
	VCVTPH2PS    X10, Y10
	VMULPS       (DX), Y10, Y10
	VFMADD231PS  Y0, Y10, Y8
	ADDQ         $18, SI
	ADDQ         $32, DI
	ADDQ         $32, R10
	ADDQ         $32, DX
	ADDQ         $32, BX
	DECQ         CX
	JNZ          g40loop

g40done:
	MOVQ    out+48(FP), AX
	VMOVUPS Y8, (AX)
	VZEROUPPER
	RET

// func gemmQ8_0x8AVX2(row *byte, qs *int8, dT *float32, nb, cols int, out *float32)
TEXT ·gemmQ8_0x8AVX2(SB), NOSPLIT, $0-48
	MOVQ    row+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    dT+16(FP), DX
	MOVQ    nb+24(FP), CX
	MOVQ    cols+32(FP), R8
	LEAQ    (R8)(R8*2), R9
	LEAQ    (DI)(R8*4), R10
	VXORPS  Y8, Y8, Y8
	VMOVDQU bones16<>(SB), Y13
	TESTQ   CX, CX
	JLE     g80done

g80loop:
	VMOVDQU      2(SI), Y5
	VPSIGNB      Y5, Y5, Y14
	P80((DI), Y0)
	P80((DI)(R8*1), Y1)
	P80((DI)(R8*2), Y2)
	P80((DI)(R9*1), Y3)
	P80((R10), Y4)
	P80((R10)(R8*1), Y6)
	P80((R10)(R8*2), Y7)
	P80((R10)(R9*1), Y9)
	HADD8
	VCVTDQ2PS    Y0, Y0
	VPBROADCASTW (SI), X10
	VCVTPH2PS    X10, Y10
	VMULPS       (DX), Y10, Y10
	VFMADD231PS  Y0, Y10, Y8
	ADDQ         $34, SI
	ADDQ         $32, DI
	ADDQ         $32, R10
	ADDQ         $32, DX
	DECQ         CX
	JNZ          g80loop

g80done:
	MOVQ    out+40(FP), AX
	VMOVUPS Y8, (AX)
	VZEROUPPER
	RET

// GATHER8(o): the F16 scales at offset o of rows SI + r*R8 (r = 0..7; R9 =
// 3*R8, R10 = SI + 4*R8) as float32 in Y10.
#define GATHER8(o) \
	VPINSRW   $0, o(SI), X10, X10; \
	VPINSRW   $1, o(SI)(R8*1), X10, X10; \
	VPINSRW   $2, o(SI)(R8*2), X10, X10; \
	VPINSRW   $3, o(SI)(R9*1), X10, X10; \
	VPINSRW   $4, o(R10), X10, X10; \
	VPINSRW   $5, o(R10)(R8*1), X10, X10; \
	VPINSRW   $6, o(R10)(R8*2), X10, X10; \
	VPINSRW   $7, o(R10)(R9*1), X10, X10; \
	VCVTPH2PS X10, Y10

// func gemvQ4_0x8AVX2(row *byte, rb int, qs *int8, d *float32, s8 *int32, nb int, out *float32)
// Eight Q4_0 rows (row + r*rb) against one token (q, d, s8 = 8·Σq per block).
TEXT ·gemvQ4_0x8AVX2(SB), NOSPLIT, $0-56
	MOVQ    row+0(FP), SI
	MOVQ    rb+8(FP), R8
	MOVQ    qs+16(FP), DI
	MOVQ    d+24(FP), DX
	MOVQ    s8+32(FP), BX
	MOVQ    nb+40(FP), CX
	LEAQ    (R8)(R8*2), R9
	LEAQ    (SI)(R8*4), R10
	VXORPS  Y8, Y8, Y8
	VMOVDQU bx0f<>(SB), Y15
	VMOVDQU bones16<>(SB), Y13
	TESTQ   CX, CX
	JLE     v40done

v40loop:
	VMOVDQU      (DI), Y12
	R40(2(SI), Y0)
	R40(2(SI)(R8*1), Y1)
	R40(2(SI)(R8*2), Y2)
	R40(2(SI)(R9*1), Y3)
	R40(2(R10), Y4)
	R40(2(R10)(R8*1), Y6)
	R40(2(R10)(R8*2), Y7)
	R40(2(R10)(R9*1), Y9)
	HADD8
	VPBROADCASTD (BX), Y11
	VPSUBD       Y11, Y0, Y0
	VCVTDQ2PS    Y0, Y0
	GATHER8(0)
	VBROADCASTSS (DX), Y11
	VMULPS       Y11, Y10, Y10
	VFMADD231PS  Y0, Y10, Y8
	ADDQ         $18, SI
	ADDQ         $18, R10
	ADDQ         $32, DI
	ADDQ         $4, DX
	ADDQ         $4, BX
	DECQ         CX
	JNZ          v40loop

v40done:
	MOVQ    out+48(FP), AX
	VMOVUPS Y8, (AX)
	VZEROUPPER
	RET

// func gemvQ8_0x8AVX2(row *byte, rb int, qs *int8, d *float32, nb int, out *float32)
TEXT ·gemvQ8_0x8AVX2(SB), NOSPLIT, $0-48
	MOVQ    row+0(FP), SI
	MOVQ    rb+8(FP), R8
	MOVQ    qs+16(FP), DI
	MOVQ    d+24(FP), DX
	MOVQ    nb+32(FP), CX
	LEAQ    (R8)(R8*2), R9
	LEAQ    (SI)(R8*4), R10
	VXORPS  Y8, Y8, Y8
	VMOVDQU bones16<>(SB), Y13
	TESTQ   CX, CX
	JLE     v80done

v80loop:
	VMOVDQU      (DI), Y12
	R80(2(SI), Y0)
	R80(2(SI)(R8*1), Y1)
	R80(2(SI)(R8*2), Y2)
	R80(2(SI)(R9*1), Y3)
	R80(2(R10), Y4)
	R80(2(R10)(R8*1), Y6)
	R80(2(R10)(R8*2), Y7)
	R80(2(R10)(R9*1), Y9)
	HADD8
	VCVTDQ2PS    Y0, Y0
	GATHER8(0)
	VBROADCASTSS (DX), Y11
	VMULPS       Y11, Y10, Y10
	VFMADD231PS  Y0, Y10, Y8
	ADDQ         $34, SI
	ADDQ         $34, R10
	ADDQ         $32, DI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          v80loop

v80done:
	MOVQ    out+40(FP), AX
	VMOVUPS Y8, (AX)
	VZEROUPPER
	RET

// func gemmQ4_0pAVX2(panel *byte, qs *int8, d *float32, s8 *int32, nb int, out *float32)
// Eight Q4_0 rows packed by packQ4_0Panel against one token: per block the
// panel holds 8 steps of 32 bytes (step s: elements 4s..4s+3 of rows 0..7,
// unsigned 0..15) then the 8 row scales as float32. Lane r accumulates row
// r: the int16 pair sums of the 8 steps stay below 8·2·15·127 < 2^15, so
// they are summed before one VPMADDWD per block. Same canonical float
// arithmetic as the other blocked kernels.
TEXT ·gemmQ4_0pAVX2(SB), NOSPLIT, $0-48
	MOVQ    panel+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), DX
	MOVQ    s8+24(FP), BX
	MOVQ    nb+32(FP), CX
	VXORPS  Y8, Y8, Y8
	VMOVDQU bones16<>(SB), Y13
	TESTQ   CX, CX
	JLE     p40done

p40loop:
	VPBROADCASTD 0(DI), Y1
	VMOVDQU      0(SI), Y0
	VPMADDUBSW   Y1, Y0, Y0
	VPBROADCASTD 4(DI), Y2
	VMOVDQU      32(SI), Y3
	VPMADDUBSW   Y2, Y3, Y3
	VPBROADCASTD 8(DI), Y4
	VMOVDQU      64(SI), Y5
	VPMADDUBSW   Y4, Y5, Y5
	VPBROADCASTD 12(DI), Y6
	VMOVDQU      96(SI), Y7
	VPMADDUBSW   Y6, Y7, Y7
	VPADDW       Y3, Y0, Y0
	VPADDW       Y7, Y5, Y5
	VPBROADCASTD 16(DI), Y1
	VMOVDQU      128(SI), Y9
	VPMADDUBSW   Y1, Y9, Y9
	VPBROADCASTD 20(DI), Y2
	VMOVDQU      160(SI), Y3
	VPMADDUBSW   Y2, Y3, Y3
	VPBROADCASTD 24(DI), Y4
	VMOVDQU      192(SI), Y10
	VPMADDUBSW   Y4, Y10, Y10
	VPBROADCASTD 28(DI), Y6
	VMOVDQU      224(SI), Y7
	VPMADDUBSW   Y6, Y7, Y7
	VPADDW       Y3, Y9, Y9
	VPADDW       Y7, Y10, Y10
	VPADDW       Y5, Y0, Y0
	VPADDW       Y10, Y9, Y9
	VPADDW       Y9, Y0, Y0
	VPMADDWD     Y13, Y0, Y0
	VPBROADCASTD (BX), Y11
	VPSUBD       Y11, Y0, Y0
	VCVTDQ2PS    Y0, Y0
	VBROADCASTSS (DX), Y11
	VMULPS       256(SI), Y11, Y10
	VFMADD231PS  Y0, Y10, Y8
	ADDQ         $288, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	ADDQ         $4, BX
	DECQ         CX
	JNZ          p40loop

p40done:
	MOVQ    out+40(FP), AX
	VMOVUPS Y8, (AX)
	VZEROUPPER
	RET

// func gemmQ8_0pAVX2(panel *byte, qs *int8, d *float32, nb int, out *float32)
// Eight Q8_0 rows packed by packQ8_0Panel (step s: bytes 4s..4s+3 of rows
// 0..7, signed) against one token; lane r accumulates row r exactly in
// int32, then the canonical float arithmetic.
TEXT ·gemmQ8_0pAVX2(SB), NOSPLIT, $0-40
	MOVQ    panel+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), DX
	MOVQ    nb+24(FP), CX
	VXORPS  Y10, Y10, Y10
	VMOVDQU bones16<>(SB), Y13
	TESTQ   CX, CX
	JLE     p80done

p80loop:
	VPXOR        Y0, Y0, Y0
	VPXOR        Y9, Y9, Y9
	VPBROADCASTD 0(DI), Y1
	VMOVDQU      0(SI), Y2
	VPSIGNB      Y2, Y1, Y1
	VPABSB       Y2, Y2
	VPMADDUBSW   Y1, Y2, Y2
	VPMADDWD     Y13, Y2, Y2
	VPADDD       Y2, Y0, Y0
	VPBROADCASTD 4(DI), Y3
	VMOVDQU      32(SI), Y4
	VPSIGNB      Y4, Y3, Y3
	VPABSB       Y4, Y4
	VPMADDUBSW   Y3, Y4, Y4
	VPMADDWD     Y13, Y4, Y4
	VPADDD       Y4, Y9, Y9
	VPBROADCASTD 8(DI), Y5
	VMOVDQU      64(SI), Y6
	VPSIGNB      Y6, Y5, Y5
	VPABSB       Y6, Y6
	VPMADDUBSW   Y5, Y6, Y6
	VPMADDWD     Y13, Y6, Y6
	VPADDD       Y6, Y0, Y0
	VPBROADCASTD 12(DI), Y7
	VMOVDQU      96(SI), Y8
	VPSIGNB      Y8, Y7, Y7
	VPABSB       Y8, Y8
	VPMADDUBSW   Y7, Y8, Y8
	VPMADDWD     Y13, Y8, Y8
	VPADDD       Y8, Y9, Y9
	VPBROADCASTD 16(DI), Y1
	VMOVDQU      128(SI), Y2
	VPSIGNB      Y2, Y1, Y1
	VPABSB       Y2, Y2
	VPMADDUBSW   Y1, Y2, Y2
	VPMADDWD     Y13, Y2, Y2
	VPADDD       Y2, Y0, Y0
	VPBROADCASTD 20(DI), Y3
	VMOVDQU      160(SI), Y4
	VPSIGNB      Y4, Y3, Y3
	VPABSB       Y4, Y4
	VPMADDUBSW   Y3, Y4, Y4
	VPMADDWD     Y13, Y4, Y4
	VPADDD       Y4, Y9, Y9
	VPBROADCASTD 24(DI), Y5
	VMOVDQU      192(SI), Y6
	VPSIGNB      Y6, Y5, Y5
	VPABSB       Y6, Y6
	VPMADDUBSW   Y5, Y6, Y6
	VPMADDWD     Y13, Y6, Y6
	VPADDD       Y6, Y0, Y0
	VPBROADCASTD 28(DI), Y7
	VMOVDQU      224(SI), Y8
	VPSIGNB      Y8, Y7, Y7
	VPABSB       Y8, Y8
	VPMADDUBSW   Y7, Y8, Y8
	VPMADDWD     Y13, Y8, Y8
	VPADDD       Y8, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VCVTDQ2PS    Y0, Y0
	VBROADCASTSS (DX), Y11
	VMULPS       256(SI), Y11, Y12
	VFMADD231PS  Y0, Y12, Y10
	ADDQ         $288, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          p80loop

p80done:
	MOVQ    out+32(FP), AX
	VMOVUPS Y10, (AX)
	VZEROUPPER
	RET
