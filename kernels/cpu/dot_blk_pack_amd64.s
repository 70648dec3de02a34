#include "textflag.h"

// Panel packing for the blocked kernels (dot_blk.go): 8 row-major rows of
// Q4_0 or Q8_0 into [nb][panelBlock] panels, byte for byte what
// packQ4_0Panel / packQ8_0Panel (the Go twins) write. Rows 0-3 go to the
// low 128-bit lane and rows 4-7 to the high lane; an in-lane 4×4 dword
// transpose then puts dword s of rows 0..7 in one register (step s). Scales
// go through the F16 table (tab), as in the twins. Each block packed also
// prefetches (to L2) 8 blocks' worth of bytes from next, usually the next 8
// rows this worker packs (a prefetch never faults): the weights of a small
// batch stream from memory while the current panel is computed.

DATA packnib0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA packnib0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA packnib0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA packnib0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL packnib0f<>(SB), RODATA|NOPTR, $32

// PACKSCALES stores the 8 rows' block scales (F16 at row offset 0, via the
// table in R12) as float32 at 256(DI). Rows 0-3 from SI, 4-7 from R11;
// R8 = rb, R9 = 3·rb.
#define PACKSCALES \
	MOVWLZX (SI), AX \
	MOVL    (R12)(AX*4), AX \
	MOVL    AX, 256(DI) \
	MOVWLZX (SI)(R8*1), AX \
	MOVL    (R12)(AX*4), AX \
	MOVL    AX, 260(DI) \
	MOVWLZX (SI)(R8*2), AX \
	MOVL    (R12)(AX*4), AX \
	MOVL    AX, 264(DI) \
	MOVWLZX (SI)(R9*1), AX \
	MOVL    (R12)(AX*4), AX \
	MOVL    AX, 268(DI) \
	MOVWLZX (R11), AX \
	MOVL    (R12)(AX*4), AX \
	MOVL    AX, 272(DI) \
	MOVWLZX (R11)(R8*1), AX \
	MOVL    (R12)(AX*4), AX \
	MOVL    AX, 276(DI) \
	MOVWLZX (R11)(R8*2), AX \
	MOVL    (R12)(AX*4), AX \
	MOVL    AX, 280(DI) \
	MOVWLZX (R11)(R9*1), AX \
	MOVL    (R12)(AX*4), AX \
	MOVL    AX, 284(DI)

// func packQ4_0PanelAVX2(panel, rows, next *byte, rb, nb int, tab *float32)
TEXT ·packQ4_0PanelAVX2(SB), NOSPLIT, $0-48
	MOVQ    panel+0(FP), DI
	MOVQ    rows+8(FP), SI
	MOVQ    next+16(FP), R14
	MOVQ    rb+24(FP), R8
	MOVQ    nb+32(FP), CX
	MOVQ    tab+40(FP), R12
	LEAQ    (R8)(R8*2), R9
	LEAQ    (SI)(R8*4), R11
	VMOVDQU packnib0f<>(SB), Y15
	TESTQ   CX, CX
	JLE     q4done

q4loop:
	// 16 nibble bytes of each row: rows r and r+4 in one register.
	VMOVDQU     2(SI), X0
	VMOVDQU     2(SI)(R8*1), X1
	VMOVDQU     2(SI)(R8*2), X2
	VMOVDQU     2(SI)(R9*1), X3
	VINSERTI128 $1, 2(R11), Y0, Y0
	VINSERTI128 $1, 2(R11)(R8*1), Y1, Y1
	VINSERTI128 $1, 2(R11)(R8*2), Y2, Y2
	VINSERTI128 $1, 2(R11)(R9*1), Y3, Y3
	VPUNPCKLDQ  Y1, Y0, Y4 // r0d0 r1d0 r0d1 r1d1
	VPUNPCKHDQ  Y1, Y0, Y5 // r0d2 r1d2 r0d3 r1d3
	VPUNPCKLDQ  Y3, Y2, Y6 // r2d0 r3d0 r2d1 r3d1
	VPUNPCKHDQ  Y3, Y2, Y7 // r2d2 r3d2 r2d3 r3d3
	VPUNPCKLQDQ Y6, Y4, Y0 // dword 0 of rows 0-3 | 4-7
	VPUNPCKHQDQ Y6, Y4, Y1 // dword 1
	VPUNPCKLQDQ Y7, Y5, Y2 // dword 2
	VPUNPCKHQDQ Y7, Y5, Y3 // dword 3
	VPAND       Y15, Y0, Y4
	VPAND       Y15, Y1, Y5
	VPAND       Y15, Y2, Y6
	VPAND       Y15, Y3, Y7
	VMOVDQU     Y4, 0(DI)
	VMOVDQU     Y5, 32(DI)
	VMOVDQU     Y6, 64(DI)
	VMOVDQU     Y7, 96(DI)
	VPSRLW      $4, Y0, Y0
	VPSRLW      $4, Y1, Y1
	VPSRLW      $4, Y2, Y2
	VPSRLW      $4, Y3, Y3
	VPAND       Y15, Y0, Y0
	VPAND       Y15, Y1, Y1
	VPAND       Y15, Y2, Y2
	VPAND       Y15, Y3, Y3
	VMOVDQU     Y0, 128(DI)
	VMOVDQU     Y1, 160(DI)
	VMOVDQU     Y2, 192(DI)
	VMOVDQU     Y3, 224(DI)
	PACKSCALES
	PREFETCHT1  0(R14)
	PREFETCHT1  64(R14)
	PREFETCHT1  128(R14)
	ADDQ        $144, R14
	ADDQ        $18, SI
	ADDQ        $18, R11
	ADDQ        $288, DI
	DECQ        CX
	JNZ         q4loop

q4done:
	VZEROUPPER
	RET

// func packQ8_0PanelAVX2(panel, rows, next *byte, rb, nb int, tab *float32)
TEXT ·packQ8_0PanelAVX2(SB), NOSPLIT, $0-48
	MOVQ  panel+0(FP), DI
	MOVQ  rows+8(FP), SI
	MOVQ  next+16(FP), R14
	MOVQ  rb+24(FP), R8
	MOVQ  nb+32(FP), CX
	MOVQ  tab+40(FP), R12
	LEAQ  (R8)(R8*2), R9
	LEAQ  (SI)(R8*4), R11
	TESTQ CX, CX
	JLE   q8done

q8loop:
	// 32 quant bytes (8 dwords) of each row.
	VMOVDQU     2(SI), Y0
	VMOVDQU     2(SI)(R8*1), Y1
	VMOVDQU     2(SI)(R8*2), Y2
	VMOVDQU     2(SI)(R9*1), Y3
	VMOVDQU     2(R11), Y4
	VMOVDQU     2(R11)(R8*1), Y5
	VMOVDQU     2(R11)(R8*2), Y6
	VMOVDQU     2(R11)(R9*1), Y7
	VPUNPCKLDQ  Y1, Y0, Y8  // r0d0 r1d0 r0d1 r1d1 | d4, d5
	VPUNPCKHDQ  Y1, Y0, Y9  // r0d2 r1d2 r0d3 r1d3 | d6, d7
	VPUNPCKLDQ  Y3, Y2, Y10
	VPUNPCKHDQ  Y3, Y2, Y11
	VPUNPCKLDQ  Y5, Y4, Y12
	VPUNPCKHDQ  Y5, Y4, Y13
	VPUNPCKLDQ  Y7, Y6, Y14
	VPUNPCKHDQ  Y7, Y6, Y15
	VPUNPCKLQDQ Y10, Y8, Y0 // rows 0-3: d0 | d4
	VPUNPCKHQDQ Y10, Y8, Y1 // d1 | d5
	VPUNPCKLQDQ Y11, Y9, Y2 // d2 | d6
	VPUNPCKHQDQ Y11, Y9, Y3 // d3 | d7
	VPUNPCKLQDQ Y14, Y12, Y4 // rows 4-7: d0 | d4
	VPUNPCKHQDQ Y14, Y12, Y5
	VPUNPCKLQDQ Y15, Y13, Y6
	VPUNPCKHQDQ Y15, Y13, Y7
	VPERM2I128  $0x20, Y4, Y0, Y8  // step 0: d0 of rows 0-7
	VPERM2I128  $0x31, Y4, Y0, Y12 // step 4
	VPERM2I128  $0x20, Y5, Y1, Y9
	VPERM2I128  $0x31, Y5, Y1, Y13
	VPERM2I128  $0x20, Y6, Y2, Y10
	VPERM2I128  $0x31, Y6, Y2, Y14
	VPERM2I128  $0x20, Y7, Y3, Y11
	VPERM2I128  $0x31, Y7, Y3, Y15
	VMOVDQU     Y8, 0(DI)
	VMOVDQU     Y9, 32(DI)
	VMOVDQU     Y10, 64(DI)
	VMOVDQU     Y11, 96(DI)
	VMOVDQU     Y12, 128(DI)
	VMOVDQU     Y13, 160(DI)
	VMOVDQU     Y14, 192(DI)
	VMOVDQU     Y15, 224(DI)
	PACKSCALES
	PREFETCHT1  0(R14)
	PREFETCHT1  64(R14)
	PREFETCHT1  128(R14)
	PREFETCHT1  192(R14)
	PREFETCHT1  256(R14)
	ADDQ        $272, R14
	ADDQ        $34, SI
	ADDQ        $34, R11
	ADDQ        $288, DI
	DECQ        CX
	JNZ         q8loop

q8done:
	VZEROUPPER
	RET
