#include "textflag.h"

// func attnCvtF16AVX2(src *uint16, dst *float32, n int)
// dst[i] = float32(src[i]) for i < n; n is a multiple of 8.
TEXT ·attnCvtF16AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
cvtloop:
	CMPQ CX, $8
	JL   cvtdone
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  cvtloop
cvtdone:
	VZEROUPPER
	RET

// func attnAxpyAVX2(v *float32, w *float32, nh, dim int, out *float32)
// out[h*d+j] += w[h]*v[j] for h < g, j < d (fused multiply-add); d is a
// multiple of 8.
TEXT ·attnAxpyAVX2(SB), NOSPLIT, $0-40
	MOVQ v+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ nh+16(FP), CX
	MOVQ dim+24(FP), DX
	MOVQ out+32(FP), R8
ahead:
	TESTQ CX, CX
	JZ    adone
	VBROADCASTSS (DI), Y0
	XORQ AX, AX
	MOVQ DX, BX
aloop8:
	CMPQ BX, $8
	JL   anext
	VMOVUPS     (SI)(AX*1), Y1
	VFMADD213PS (R8)(AX*1), Y0, Y1
	VMOVUPS     Y1, (R8)(AX*1)
	ADDQ $32, AX
	SUBQ $8, BX
	JMP  aloop8
anext:
	ADDQ $4, DI
	ADDQ AX, R8
	DECQ CX
	JMP  ahead
adone:
	VZEROUPPER
	RET
