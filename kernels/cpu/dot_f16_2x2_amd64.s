// F16 tile kernel for MatMul with n > 1: two rows × two tokens. Each
// (row, token) pair performs exactly the float operations of dotF16AVX2
// (chunk-0 and chunk-1 accumulators over 16-element steps, an 8-element
// tail into the chunk-0 accumulator, then acc0+acc1 and HSUM8), so results
// are bitwise those of the one-token kernel: batch invariance. Per 16
// elements it does 4 conversions, 4 activation loads and 8 FMAs (the
// four-token kernel needs 2 + 8 loads for 8 FMAs).

#include "textflag.h"
#include "hsum8_amd64.h"

// func dotF16x2x2AVX2(row *byte, rb int, x *float32, n, xstride int, out *float32)
// rows at row and row+rb (bytes); tokens at x and x+xstride (bytes);
// out = [r0·t0, r0·t1, r1·t0, r1·t1]; n a multiple of 8.
TEXT ·dotF16x2x2AVX2(SB), NOSPLIT, $0-48
	MOVQ   row+0(FP), SI
	MOVQ   rb+8(FP), R8
	MOVQ   x+16(FP), DI
	MOVQ   n+24(FP), CX
	MOVQ   xstride+32(FP), R9
	VXORPS Y0, Y0, Y0 // r0t0 chunk 0
	VXORPS Y1, Y1, Y1 // r0t0 chunk 1
	VXORPS Y2, Y2, Y2 // r0t1
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4 // r1t0
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6 // r1t1
	VXORPS Y7, Y7, Y7
	CMPQ   CX, $16
	JLT    f22tail

f22loop:
	VCVTPH2PS   (SI), Y8
	VCVTPH2PS   (SI)(R8*1), Y9
	VMOVUPS     (DI), Y10
	VMOVUPS     (DI)(R9*1), Y11
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y8, Y2
	VFMADD231PS Y10, Y9, Y4
	VFMADD231PS Y11, Y9, Y6
	VCVTPH2PS   16(SI), Y12
	VCVTPH2PS   16(SI)(R8*1), Y13
	VMOVUPS     32(DI), Y14
	VMOVUPS     32(DI)(R9*1), Y15
	VFMADD231PS Y14, Y12, Y1
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y14, Y13, Y5
	VFMADD231PS Y15, Y13, Y7
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	CMPQ        CX, $16
	JGE         f22loop

f22tail:
	CMPQ        CX, $8
	JLT         f22done
	VCVTPH2PS   (SI), Y8
	VCVTPH2PS   (SI)(R8*1), Y9
	VMOVUPS     (DI), Y10
	VMOVUPS     (DI)(R9*1), Y11
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y11, Y8, Y2
	VFMADD231PS Y10, Y9, Y4
	VFMADD231PS Y11, Y9, Y6

f22done:
	MOVQ   out+40(FP), AX
	VADDPS Y1, Y0, Y0
	HSUM8(Y0, X0, X8)
	VMOVSS X0, (AX)
	VADDPS Y3, Y2, Y2
	HSUM8(Y2, X2, X8)
	VMOVSS X2, 4(AX)
	VADDPS Y5, Y4, Y4
	HSUM8(Y4, X4, X8)
	VMOVSS X4, 8(AX)
	VADDPS Y7, Y6, Y6
	HSUM8(Y6, X6, X8)
	VMOVSS X6, 12(AX)
	VZEROUPPER
	RET
