#include "textflag.h"
#include "iq4_levels_amd64.h"

// The Q4_0, Q8_0 and IQ4_NL decode layouts (q4_0_decode.go, q8_0_decode.go,
// iq4_nl.go) unpacked into 16-row panels (packPanelZ's layout, dot_blk16.go) in
// AVX2: byte for byte their Go twins packPanelFromQ4Z,
// packPanelFromQ8Z and packPanelFromIQ4Z; the Q5_0 layout's
// (q5_0_decode.go) in AVX-512 at the end. Per block: the Q4_0 layout's 256 nibble bytes masked
// (low nibbles) and shifted then masked (high nibbles), or the Q8_0
// layout's 512 bytes copied, the 16 scales through the F16 table (tab),
// and a prefetch (to L2) of the same block of next, usually the group
// this worker unpacks next (a prefetch never faults).

// F16SCALES16: the 16 F16 scales at SI through the F16 table at R12
// into 16 float32 at 512(DI) (clobbers AX).
#define F16SCALES16 \
	MOVWLZX 0(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 512(DI); \
	MOVWLZX 2(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 516(DI); \
	MOVWLZX 4(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 520(DI); \
	MOVWLZX 6(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 524(DI); \
	MOVWLZX 8(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 528(DI); \
	MOVWLZX 10(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 532(DI); \
	MOVWLZX 12(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 536(DI); \
	MOVWLZX 14(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 540(DI); \
	MOVWLZX 16(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 544(DI); \
	MOVWLZX 18(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 548(DI); \
	MOVWLZX 20(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 552(DI); \
	MOVWLZX 22(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 556(DI); \
	MOVWLZX 24(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 560(DI); \
	MOVWLZX 26(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 564(DI); \
	MOVWLZX 28(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 568(DI); \
	MOVWLZX 30(SI), AX; \
	MOVL    (R12)(AX*4), AX; \
	MOVL    AX, 572(DI)

DATA q4zpnib0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q4zpnib0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q4zpnib0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q4zpnib0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q4zpnib0f<>(SB), RODATA|NOPTR, $32

// NONIB and LEVNIB are Q4ZPANEL's treatments of a vector of nibbles:
// none (Q4_0: the panel stores them) or levels + 128 by VPSHUFB from Y14
// (IQ4_NL: the Q8_0 panel's bytes).
#define NONIB(V)
#define LEVNIB(V) VPSHUFB V, Y14, V

// Q4ZPSTEP: nibble dword vector V (16 rows, bytes 4k..4k+3 of each) to
// panel steps k (low nibbles, at lo(DI)) and 4+k (high, at hi(DI)),
// through T.
#define Q4ZPSTEP(V, T, lo, hi, NIB) \
	VPAND   Y15, V, T; \
	NIB(T); \
	VMOVDQU T, lo(DI); \
	VPSRLW  $4, V, V; \
	VPAND   Y15, V, V; \
	NIB(V); \
	VMOVDQU V, hi(DI)

// Q4ZPANEL(NIB): the body of the Q4_0-layout unpackers: per block the 16
// rows' four nibble dword vectors loaded, unpacked by Q4ZPSTEP, the scales
// through the table, and a prefetch of the block of next.
#define Q4ZPANEL(NIB) \
	MOVQ    panel+0(FP), DI; \
	MOVQ    grp+8(FP), SI; \
	MOVQ    next+16(FP), R14; \
	MOVQ    nb+24(FP), CX; \
	MOVQ    tab+32(FP), R12; \
	VMOVDQU q4zpnib0f<>(SB), Y15; \
	VBROADCASTI128 iq4lev128<>(SB), Y14; \
	TESTQ   CX, CX; \
	JLE     done; \
loop: \
	VMOVDQU 32(SI), Y0; \
	VMOVDQU 64(SI), Y1; \
	VMOVDQU 96(SI), Y2; \
	VMOVDQU 128(SI), Y3; \
	VMOVDQU 160(SI), Y4; \
	VMOVDQU 192(SI), Y5; \
	VMOVDQU 224(SI), Y6; \
	VMOVDQU 256(SI), Y7; \
	Q4ZPSTEP(Y0, Y8, 0, 256, NIB); \
	Q4ZPSTEP(Y1, Y9, 32, 288, NIB); \
	Q4ZPSTEP(Y2, Y10, 64, 320, NIB); \
	Q4ZPSTEP(Y3, Y11, 96, 352, NIB); \
	Q4ZPSTEP(Y4, Y8, 128, 384, NIB); \
	Q4ZPSTEP(Y5, Y9, 160, 416, NIB); \
	Q4ZPSTEP(Y6, Y10, 192, 448, NIB); \
	Q4ZPSTEP(Y7, Y11, 224, 480, NIB); \
	F16SCALES16; \
	PREFETCHT1 0(R14); \
	PREFETCHT1 64(R14); \
	PREFETCHT1 128(R14); \
	PREFETCHT1 192(R14); \
	PREFETCHT1 256(R14); \
	ADDQ    $288, R14; \
	ADDQ    $288, SI; \
	ADDQ    $576, DI; \
	DECQ    CX; \
	JNZ     loop; \
done: \
	VZEROUPPER; \
	RET

// func packQ4ZPanelAVX2(panel, grp, next *byte, nb int, tab *float32)
TEXT ·packQ4ZPanelAVX2(SB), NOSPLIT, $0-40
	Q4ZPANEL(NONIB)

// func packIQ4ZPanelAVX2(panel, grp, next *byte, nb int, tab *float32)
// The IQ4_NL layout (Q4_0's, iq4_nl.go): byte for byte packPanelFromIQ4Z.
TEXT ·packIQ4ZPanelAVX2(SB), NOSPLIT, $0-40
	Q4ZPANEL(LEVNIB)


// func packQ8ZPanelAVX2(panel, grp, next *byte, nb int, tab *float32)
TEXT ·packQ8ZPanelAVX2(SB), NOSPLIT, $0-40
	MOVQ    panel+0(FP), DI
	MOVQ    grp+8(FP), SI
	MOVQ    next+16(FP), R14
	MOVQ    nb+24(FP), CX
	MOVQ    tab+32(FP), R12
	TESTQ   CX, CX
	JLE     q8zpdone

q8zploop:
	VMOVDQU 32(SI), Y0
	VMOVDQU 64(SI), Y1
	VMOVDQU 96(SI), Y2
	VMOVDQU 128(SI), Y3
	VMOVDQU 160(SI), Y4
	VMOVDQU 192(SI), Y5
	VMOVDQU 224(SI), Y6
	VMOVDQU 256(SI), Y7
	VMOVDQU 288(SI), Y8
	VMOVDQU 320(SI), Y9
	VMOVDQU 352(SI), Y10
	VMOVDQU 384(SI), Y11
	VMOVDQU 416(SI), Y12
	VMOVDQU 448(SI), Y13
	VMOVDQU 480(SI), Y14
	VMOVDQU 512(SI), Y15
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	VMOVDQU Y4, 128(DI)
	VMOVDQU Y5, 160(DI)
	VMOVDQU Y6, 192(DI)
	VMOVDQU Y7, 224(DI)
	VMOVDQU Y8, 256(DI)
	VMOVDQU Y9, 288(DI)
	VMOVDQU Y10, 320(DI)
	VMOVDQU Y11, 352(DI)
	VMOVDQU Y12, 384(DI)
	VMOVDQU Y13, 416(DI)
	VMOVDQU Y14, 448(DI)
	VMOVDQU Y15, 480(DI)
	F16SCALES16
	PREFETCHT1 0(R14)
	PREFETCHT1 64(R14)
	PREFETCHT1 128(R14)
	PREFETCHT1 192(R14)
	PREFETCHT1 256(R14)
	PREFETCHT1 320(R14)
	PREFETCHT1 384(R14)
	PREFETCHT1 448(R14)
	PREFETCHT1 512(R14)
	ADDQ    $544, R14
	ADDQ    $544, SI
	ADDQ    $576, DI
	DECQ    CX
	JNZ     q8zploop

q8zpdone:
	VZEROUPPER
	RET

// func packQ5ZPanelZ(panel, grp, next *byte, nb int, tab *float32)
// The Q5_0 layout (q5_0_decode.go) in AVX-512 (its fifth-bit masks are
// opmasks): byte for byte packPanelFromQ5Z. Per block and nibble dword k
// of the 16 rows: low and high nibbles (panel steps k and 4+k), 16 added
// where the steps' masks say so, then 112 (w+16 to w+128).
#define Q5ZPSTEP(k) \
	VMOVDQU32 (96+64*k)(SI), Z0; \
	VPANDD    Z29, Z0, Z1; \
	VPSRLD    $4, Z0, Z0; \
	VPANDD    Z29, Z0, Z0; \
	KMOVQ     (32+8*k)(SI), K1; \
	KMOVQ     (64+8*k)(SI), K2; \
	VPADDB    Z30, Z1, K1, Z1; \
	VPADDB    Z30, Z0, K2, Z0; \
	VPADDB    Z28, Z1, Z1; \
	VPADDB    Z28, Z0, Z0; \
	VMOVDQU32 Z1, (64*k)(DI); \
	VMOVDQU32 Z0, (256+64*k)(DI)

TEXT ·packQ5ZPanelZ(SB), NOSPLIT, $0-40
	MOVQ    panel+0(FP), DI
	MOVQ    grp+8(FP), SI
	MOVQ    next+16(FP), R14
	MOVQ    nb+24(FP), CX
	MOVQ    tab+32(FP), R12
	MOVL    $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z29
	MOVL    $0x10101010, AX
	VPBROADCASTD AX, Z30
	MOVL    $0x70707070, AX
	VPBROADCASTD AX, Z28
	TESTQ   CX, CX
	JLE     done

loop:
	Q5ZPSTEP(0)
	Q5ZPSTEP(1)
	Q5ZPSTEP(2)
	Q5ZPSTEP(3)
	F16SCALES16
	PREFETCHT1 0(R14)
	PREFETCHT1 64(R14)
	PREFETCHT1 128(R14)
	PREFETCHT1 192(R14)
	PREFETCHT1 256(R14)
	PREFETCHT1 320(R14)
	ADDQ    $352, R14
	ADDQ    $352, SI
	ADDQ    $576, DI
	DECQ    CX
	JNZ     loop

done:
	VZEROUPPER
	RET
