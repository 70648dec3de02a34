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
#include "gemv8_amd64.h"

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
	SCALES8(0)
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
	SCALES8(0)
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

// func gemmQ4_0p4AVX2(panel *byte, qs *int8, d *float32, s8 *int32, nb, qstride, dstride int, out *float32)
// gemmQ4_0pAVX2 for four tokens at once (token t: qs + t*qstride bytes,
// d and s8 + t*dstride bytes): each panel step is loaded once for the four
// tokens. out is [4][8] (token-major). Per pair, the same operations as the
// one-token kernel.
TEXT ·gemmQ4_0p4AVX2(SB), NOSPLIT, $0-64
	MOVQ    panel+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), DX
	MOVQ    s8+24(FP), BX
	MOVQ    nb+32(FP), CX
	MOVQ    qstride+40(FP), R8
	MOVQ    dstride+48(FP), R9
	LEAQ    (R8)(R8*2), R10
	LEAQ    (R9)(R9*2), R11
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7
	VMOVDQU bones16<>(SB), Y13
	TESTQ   CX, CX
	JLE     p44done

p44loop:
	VPXOR        Y0, Y0, Y0
	VPXOR        Y1, Y1, Y1
	VPXOR        Y2, Y2, Y2
	VPXOR        Y3, Y3, Y3
	VMOVDQU      0(SI), Y8
	VPBROADCASTD (DI), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y0, Y0
	VPBROADCASTD (DI)(R8*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y1, Y1
	VPBROADCASTD (DI)(R8*2), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y2, Y2
	VPBROADCASTD (DI)(R10*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y3, Y3
	VMOVDQU      32(SI), Y8
	VPBROADCASTD 4(DI), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y0, Y0
	VPBROADCASTD 4(DI)(R8*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y1, Y1
	VPBROADCASTD 4(DI)(R8*2), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y2, Y2
	VPBROADCASTD 4(DI)(R10*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y3, Y3
	VMOVDQU      64(SI), Y8
	VPBROADCASTD 8(DI), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y0, Y0
	VPBROADCASTD 8(DI)(R8*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y1, Y1
	VPBROADCASTD 8(DI)(R8*2), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y2, Y2
	VPBROADCASTD 8(DI)(R10*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y3, Y3
	VMOVDQU      96(SI), Y8
	VPBROADCASTD 12(DI), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y0, Y0
	VPBROADCASTD 12(DI)(R8*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y1, Y1
	VPBROADCASTD 12(DI)(R8*2), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y2, Y2
	VPBROADCASTD 12(DI)(R10*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y3, Y3
	VMOVDQU      128(SI), Y8
	VPBROADCASTD 16(DI), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y0, Y0
	VPBROADCASTD 16(DI)(R8*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y1, Y1
	VPBROADCASTD 16(DI)(R8*2), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y2, Y2
	VPBROADCASTD 16(DI)(R10*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y3, Y3
	VMOVDQU      160(SI), Y8
	VPBROADCASTD 20(DI), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y0, Y0
	VPBROADCASTD 20(DI)(R8*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y1, Y1
	VPBROADCASTD 20(DI)(R8*2), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y2, Y2
	VPBROADCASTD 20(DI)(R10*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y3, Y3
	VMOVDQU      192(SI), Y8
	VPBROADCASTD 24(DI), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y0, Y0
	VPBROADCASTD 24(DI)(R8*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y1, Y1
	VPBROADCASTD 24(DI)(R8*2), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y2, Y2
	VPBROADCASTD 24(DI)(R10*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y3, Y3
	VMOVDQU      224(SI), Y8
	VPBROADCASTD 28(DI), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y0, Y0
	VPBROADCASTD 28(DI)(R8*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y1, Y1
	VPBROADCASTD 28(DI)(R8*2), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y2, Y2
	VPBROADCASTD 28(DI)(R10*1), Y9
	VPMADDUBSW   Y9, Y8, Y9
	VPADDW       Y9, Y3, Y3
	VMOVUPS      256(SI), Y12
	VPMADDWD     Y13, Y0, Y0
	VPBROADCASTD (BX), Y9
	VPSUBD       Y9, Y0, Y0
	VCVTDQ2PS    Y0, Y0
	VBROADCASTSS (DX), Y9
	VMULPS       Y12, Y9, Y9
	VFMADD231PS  Y0, Y9, Y4
	VPMADDWD     Y13, Y1, Y1
	VPBROADCASTD (BX)(R9*1), Y9
	VPSUBD       Y9, Y1, Y1
	VCVTDQ2PS    Y1, Y1
	VBROADCASTSS (DX)(R9*1), Y9
	VMULPS       Y12, Y9, Y9
	VFMADD231PS  Y1, Y9, Y5
	VPMADDWD     Y13, Y2, Y2
	VPBROADCASTD (BX)(R9*2), Y9
	VPSUBD       Y9, Y2, Y2
	VCVTDQ2PS    Y2, Y2
	VBROADCASTSS (DX)(R9*2), Y9
	VMULPS       Y12, Y9, Y9
	VFMADD231PS  Y2, Y9, Y6
	VPMADDWD     Y13, Y3, Y3
	VPBROADCASTD (BX)(R11*1), Y9
	VPSUBD       Y9, Y3, Y3
	VCVTDQ2PS    Y3, Y3
	VBROADCASTSS (DX)(R11*1), Y9
	VMULPS       Y12, Y9, Y9
	VFMADD231PS  Y3, Y9, Y7
	ADDQ         $288, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	ADDQ         $4, BX
	DECQ         CX
	JNZ          p44loop

p44done:
	MOVQ    out+56(FP), AX
	VMOVUPS Y4, (AX)
	VMOVUPS Y5, 32(AX)
	VMOVUPS Y6, 64(AX)
	VMOVUPS Y7, 96(AX)
	VZEROUPPER
	RET

// func gemmQ8_0p4AVX2(panel *byte, qs *int8, d *float32, nb, qstride, dstride int, out *float32)
// gemmQ8_0pAVX2 for four tokens at once (strides in bytes); out is [4][8].
TEXT ·gemmQ8_0p4AVX2(SB), NOSPLIT, $0-56
	MOVQ    panel+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), DX
	MOVQ    nb+24(FP), CX
	MOVQ    qstride+32(FP), R8
	MOVQ    dstride+40(FP), R9
	LEAQ    (R8)(R8*2), R10
	LEAQ    (R9)(R9*2), R11
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7
	VMOVDQU bones16<>(SB), Y13
	TESTQ   CX, CX
	JLE     p84done

p84loop:
	VPXOR        Y0, Y0, Y0
	VPXOR        Y1, Y1, Y1
	VPXOR        Y2, Y2, Y2
	VPXOR        Y3, Y3, Y3
	VMOVDQU      0(SI), Y8
	VPABSB       Y8, Y10
	VPBROADCASTD (DI), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPBROADCASTD (DI)(R8*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y1, Y1
	VPBROADCASTD (DI)(R8*2), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPBROADCASTD (DI)(R10*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y3, Y3
	VMOVDQU      32(SI), Y8
	VPABSB       Y8, Y10
	VPBROADCASTD 4(DI), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPBROADCASTD 4(DI)(R8*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y1, Y1
	VPBROADCASTD 4(DI)(R8*2), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPBROADCASTD 4(DI)(R10*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y3, Y3
	VMOVDQU      64(SI), Y8
	VPABSB       Y8, Y10
	VPBROADCASTD 8(DI), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPBROADCASTD 8(DI)(R8*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y1, Y1
	VPBROADCASTD 8(DI)(R8*2), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPBROADCASTD 8(DI)(R10*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y3, Y3
	VMOVDQU      96(SI), Y8
	VPABSB       Y8, Y10
	VPBROADCASTD 12(DI), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPBROADCASTD 12(DI)(R8*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y1, Y1
	VPBROADCASTD 12(DI)(R8*2), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPBROADCASTD 12(DI)(R10*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y3, Y3
	VMOVDQU      128(SI), Y8
	VPABSB       Y8, Y10
	VPBROADCASTD 16(DI), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPBROADCASTD 16(DI)(R8*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y1, Y1
	VPBROADCASTD 16(DI)(R8*2), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPBROADCASTD 16(DI)(R10*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y3, Y3
	VMOVDQU      160(SI), Y8
	VPABSB       Y8, Y10
	VPBROADCASTD 20(DI), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPBROADCASTD 20(DI)(R8*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y1, Y1
	VPBROADCASTD 20(DI)(R8*2), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPBROADCASTD 20(DI)(R10*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y3, Y3
	VMOVDQU      192(SI), Y8
	VPABSB       Y8, Y10
	VPBROADCASTD 24(DI), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPBROADCASTD 24(DI)(R8*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y1, Y1
	VPBROADCASTD 24(DI)(R8*2), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPBROADCASTD 24(DI)(R10*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y3, Y3
	VMOVDQU      224(SI), Y8
	VPABSB       Y8, Y10
	VPBROADCASTD 28(DI), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPBROADCASTD 28(DI)(R8*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y1, Y1
	VPBROADCASTD 28(DI)(R8*2), Y9
	VPSIGNB      Y8, Y9, Y9
	VPMADDUBSW   Y9, Y10, Y9
	VPMADDWD     Y13, Y9, Y9
	VPADDD       Y9, Y2, Y2
	VPBROADCASTD 28(DI)(R10*1), Y11
	VPSIGNB      Y8, Y11, Y11
	VPMADDUBSW   Y11, Y10, Y11
	VPMADDWD     Y13, Y11, Y11
	VPADDD       Y11, Y3, Y3
	VMOVUPS      256(SI), Y12
	VCVTDQ2PS    Y0, Y0
	VBROADCASTSS (DX), Y9
	VMULPS       Y12, Y9, Y9
	VFMADD231PS  Y0, Y9, Y4
	VCVTDQ2PS    Y1, Y1
	VBROADCASTSS (DX)(R9*1), Y9
	VMULPS       Y12, Y9, Y9
	VFMADD231PS  Y1, Y9, Y5
	VCVTDQ2PS    Y2, Y2
	VBROADCASTSS (DX)(R9*2), Y9
	VMULPS       Y12, Y9, Y9
	VFMADD231PS  Y2, Y9, Y6
	VCVTDQ2PS    Y3, Y3
	VBROADCASTSS (DX)(R11*1), Y9
	VMULPS       Y12, Y9, Y9
	VFMADD231PS  Y3, Y9, Y7
	ADDQ         $288, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          p84loop

p84done:
	MOVQ    out+48(FP), AX
	VMOVUPS Y4, (AX)
	VMOVUPS Y5, 32(AX)
	VMOVUPS Y6, 64(AX)
	VMOVUPS Y7, 96(AX)
	VZEROUPPER
	RET

// func gemv1Q4_0AVX2(row *byte, qs *int8, d *float32, s8 *int32, nb int) float32
// One row against one token in the canonical order (sequential FMA over
// blocks), reading the row as one sequential stream: 8 blocks per step
// (lanes = blocks, HADD8), then the 8 FMAs in block order on scalars.
TEXT ·gemv1Q4_0AVX2(SB), NOSPLIT, $0-44
	MOVQ    row+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), DX
	MOVQ    s8+24(FP), BX
	MOVQ    nb+32(FP), CX
	VXORPS  X8, X8, X8
	VMOVDQU bx0f<>(SB), Y15
	VMOVDQU bones16<>(SB), Y13
	CMPQ    CX, $8
	JLT     s40tail

s40loop8:
	NIB(2(SI))
	P40(0(DI), Y0)
	NIB(20(SI))
	P40(32(DI), Y1)
	NIB(38(SI))
	P40(64(DI), Y2)
	NIB(56(SI))
	P40(96(DI), Y3)
	NIB(74(SI))
	P40(128(DI), Y4)
	NIB(92(SI))
	P40(160(DI), Y6)
	NIB(110(SI))
	P40(192(DI), Y7)
	NIB(128(SI))
	P40(224(DI), Y9)
	HADD8
	VPSUBD       (BX), Y0, Y0
	VCVTDQ2PS    Y0, Y0
	VPINSRW      $0, 0(SI), X10, X10
	VPINSRW      $1, 18(SI), X10, X10
	VPINSRW      $2, 36(SI), X10, X10
	VPINSRW      $3, 54(SI), X10, X10
	VPINSRW      $4, 72(SI), X10, X10
	VPINSRW      $5, 90(SI), X10, X10
	VPINSRW      $6, 108(SI), X10, X10
	VPINSRW      $7, 126(SI), X10, X10
	VCVTPH2PS    X10, Y10
	VMULPS       (DX), Y10, Y10
	VEXTRACTF128 $1, Y0, X1
	VEXTRACTF128 $1, Y10, X11
	VFMADD231SS  X0, X10, X8
	VPERMILPS    $1, X0, X2
	VPERMILPS    $1, X10, X12
	VFMADD231SS  X2, X12, X8
	VPERMILPS    $2, X0, X2
	VPERMILPS    $2, X10, X12
	VFMADD231SS  X2, X12, X8
	VPERMILPS    $3, X0, X2
	VPERMILPS    $3, X10, X12
	VFMADD231SS  X2, X12, X8
	VFMADD231SS  X1, X11, X8
	VPERMILPS    $1, X1, X2
	VPERMILPS    $1, X11, X12
	VFMADD231SS  X2, X12, X8
	VPERMILPS    $2, X1, X2
	VPERMILPS    $2, X11, X12
	VFMADD231SS  X2, X12, X8
	VPERMILPS    $3, X1, X2
	VPERMILPS    $3, X11, X12
	VFMADD231SS  X2, X12, X8
	ADDQ         $144, SI
	ADDQ         $256, DI
	ADDQ         $32, DX
	ADDQ         $32, BX
	SUBQ         $8, CX
	CMPQ         CX, $8
	JGE          s40loop8

s40tail:
	TESTQ        CX, CX
	JLE          s40done

s40loop1:
	NIB(2(SI))
	P40((DI), Y0)
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VMOVD        (BX), X1
	VPSUBD       X1, X0, X0
	VCVTDQ2PS    X0, X0
	VPINSRW      $0, (SI), X10, X10
	VCVTPH2PS    X10, X10
	VMULSS       (DX), X10, X10
	VFMADD231SS  X0, X10, X8
	ADDQ         $18, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	ADDQ         $4, BX
	DECQ         CX
	JNZ          s40loop1

s40done:
	VMOVSS X8, ret+40(FP)
	VZEROUPPER
	RET

// func gemv1Q8_0AVX2(row *byte, qs *int8, d *float32, nb int) float32
// One row against one token in the canonical order (sequential FMA over
// blocks), reading the row as one sequential stream: 8 blocks per step
// (lanes = blocks, HADD8), then the 8 FMAs in block order on scalars.
TEXT ·gemv1Q8_0AVX2(SB), NOSPLIT, $0-36
	MOVQ    row+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), DX
	MOVQ    nb+24(FP), CX
	VXORPS  X8, X8, X8
	VMOVDQU bones16<>(SB), Y13
	CMPQ    CX, $8
	JLT     s80tail

s80loop8:
	VMOVDQU      2(SI), Y5
	VPSIGNB      Y5, Y5, Y14
	P80(0(DI), Y0)
	VMOVDQU      36(SI), Y5
	VPSIGNB      Y5, Y5, Y14
	P80(32(DI), Y1)
	VMOVDQU      70(SI), Y5
	VPSIGNB      Y5, Y5, Y14
	P80(64(DI), Y2)
	VMOVDQU      104(SI), Y5
	VPSIGNB      Y5, Y5, Y14
	P80(96(DI), Y3)
	VMOVDQU      138(SI), Y5
	VPSIGNB      Y5, Y5, Y14
	P80(128(DI), Y4)
	VMOVDQU      172(SI), Y5
	VPSIGNB      Y5, Y5, Y14
	P80(160(DI), Y6)
	VMOVDQU      206(SI), Y5
	VPSIGNB      Y5, Y5, Y14
	P80(192(DI), Y7)
	VMOVDQU      240(SI), Y5
	VPSIGNB      Y5, Y5, Y14
	P80(224(DI), Y9)
	HADD8
	VCVTDQ2PS    Y0, Y0
	VPINSRW      $0, 0(SI), X10, X10
	VPINSRW      $1, 34(SI), X10, X10
	VPINSRW      $2, 68(SI), X10, X10
	VPINSRW      $3, 102(SI), X10, X10
	VPINSRW      $4, 136(SI), X10, X10
	VPINSRW      $5, 170(SI), X10, X10
	VPINSRW      $6, 204(SI), X10, X10
	VPINSRW      $7, 238(SI), X10, X10
	VCVTPH2PS    X10, Y10
	VMULPS       (DX), Y10, Y10
	VEXTRACTF128 $1, Y0, X1
	VEXTRACTF128 $1, Y10, X11
	VFMADD231SS  X0, X10, X8
	VPERMILPS    $1, X0, X2
	VPERMILPS    $1, X10, X12
	VFMADD231SS  X2, X12, X8
	VPERMILPS    $2, X0, X2
	VPERMILPS    $2, X10, X12
	VFMADD231SS  X2, X12, X8
	VPERMILPS    $3, X0, X2
	VPERMILPS    $3, X10, X12
	VFMADD231SS  X2, X12, X8
	VFMADD231SS  X1, X11, X8
	VPERMILPS    $1, X1, X2
	VPERMILPS    $1, X11, X12
	VFMADD231SS  X2, X12, X8
	VPERMILPS    $2, X1, X2
	VPERMILPS    $2, X11, X12
	VFMADD231SS  X2, X12, X8
	VPERMILPS    $3, X1, X2
	VPERMILPS    $3, X11, X12
	VFMADD231SS  X2, X12, X8
	ADDQ         $272, SI
	ADDQ         $256, DI
	ADDQ         $32, DX
	SUBQ         $8, CX
	CMPQ         CX, $8
	JGE          s80loop8

s80tail:
	TESTQ        CX, CX
	JLE          s80done

s80loop1:
	VMOVDQU      2(SI), Y5
	VPSIGNB      Y5, Y5, Y14
	P80((DI), Y0)
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VCVTDQ2PS    X0, X0
	VPINSRW      $0, (SI), X10, X10
	VCVTPH2PS    X10, X10
	VMULSS       (DX), X10, X10
	VFMADD231SS  X0, X10, X8
	ADDQ         $34, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          s80loop1

s80done:
	VMOVSS X8, ret+32(FP)
	VZEROUPPER
	RET
