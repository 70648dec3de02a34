// AVX2 pieces of the one-row F16 attention (AttendF16, attn_f16.go), used by
// attendF16SIMD (attn_f16_amd64.go). Each performs exactly the float
// operations of the Go code it replaces, so results are bit for bit the same:
//   attnF16DotsAVX2: dotF16Order(q16[h], k) * scale for g heads (d % 32 == 0)
//   attnF16UpdAVX2:  acc[h] = f16(acc[h]*m_h) when m_h != 1, then
//                    acc[h][j] = f16(fma32(v[j], w_h, acc[h][j]))
//   roundF16AVX2:    dst[i] = roundF16(src[i]) (n % 8 == 0)
// F16 rounding is VCVTPS2PH with round-to-nearest-even, F16 widening
// VCVTPH2PS (exact), as F32ToF16 / F16ToF32.
//
// The accumulator update uses a float32 FMA (as ggml does) where the Go
// code rounds a float64 FMA to float32 first. The F16 results are the same
// for every input because acc and v are F16 values: E = v·w + acc (v·w has
// 35 significant bits, acc 11) is exact in float64 unless |v·w| <
// 2^-18·|acc| (the opposite gap, |acc| < 2^-43·|v·w|, is outside F16's
// range); there both float32 roundings lie within one float32 ulp of acc
// and round to acc's F16 value. TestF16UpdFMA32 and TestAttendF16SIMD
// check it against the Go arithmetic.

#include "textflag.h"

DATA a1one<>+0(SB)/4, $0x3f800000
GLOBL a1one<>(SB), RODATA|NOPTR, $4

// func attnF16DotsAVX2(q *float32, k *uint16, d, ng int, scale float32, s *float32)
TEXT ·attnF16DotsAVX2(SB), NOSPLIT, $0-48
	MOVQ  q+0(FP), SI
	MOVQ  k+8(FP), DX
	MOVQ  d+16(FP), CX
	MOVQ  ng+24(FP), BX
	MOVSS scale+32(FP), X15
	MOVQ  s+40(FP), DI

dhead:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   DX, R8
	MOVQ   CX, R9

dstep:
	VCVTPH2PS   (R8), Y4
	VCVTPH2PS   16(R8), Y5
	VCVTPH2PS   32(R8), Y6
	VCVTPH2PS   48(R8), Y7
	VFMADD231PS (SI), Y4, Y0
	VFMADD231PS 32(SI), Y5, Y1
	VFMADD231PS 64(SI), Y6, Y2
	VFMADD231PS 96(SI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $64, R8
	SUBQ        $32, R9
	JNZ         dstep

	// (v0+v2) + (v1+v3); lanes l + l+4; (t0+t1) + (t2+t3).
	VADDPS       Y2, Y0, Y0
	VADDPS       Y3, Y1, Y1
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMULSS       X15, X0, X0
	VMOVSS       X0, (DI)
	ADDQ         $4, DI
	DECQ         BX
	JNZ          dhead
	VZEROUPPER
	RET

// func attnF16UpdAVX2(acc *float32, v *uint16, d, ng int, mw *float32)
// mw is [g][2]: (m, w) per head.
TEXT ·attnF16UpdAVX2(SB), NOSPLIT, $0-40
	MOVQ   acc+0(FP), DI
	MOVQ   v+8(FP), DX
	MOVQ   d+16(FP), CX
	MOVQ   ng+24(FP), BX
	MOVQ   mw+32(FP), SI
	VMOVSS a1one<>(SB), X14

uhead:
	VBROADCASTSS (SI), Y13     // m
	VBROADCASTSS 4(SI), Y12    // w
	VUCOMISS     X14, X13
	JNE          urescale
	JP           urescale
	JMP          ufma

urescale:
	MOVQ DI, R8
	MOVQ CX, R10

uresc:
	VMULPS    (R8), Y13, Y0
	VCVTPS2PH $0, Y0, X0
	VCVTPH2PS X0, Y0
	VMOVUPS   Y0, (R8)
	ADDQ      $32, R8
	SUBQ      $8, R10
	JNZ       uresc

ufma:
	MOVQ DI, R8
	MOVQ DX, R9
	MOVQ CX, R10

ustep:
	VCVTPH2PS   (R9), Y1
	VFMADD213PS (R8), Y12, Y1  // v*w + acc, one float32 rounding
	VCVTPS2PH   $0, Y1, X1
	VCVTPH2PS   X1, Y1
	VMOVUPS     Y1, (R8)
	ADDQ        $32, R8
	ADDQ        $16, R9
	SUBQ        $8, R10
	JNZ         ustep

	MOVQ R8, DI                // next head's accumulator
	ADDQ $8, SI
	DECQ BX
	JNZ  uhead
	VZEROUPPER
	RET

// func roundF16AVX2(dst, src *float32, n int)
TEXT ·roundF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

rstep:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, X0
	VCVTPH2PS X0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       rstep
	VZEROUPPER
	RET

// storeF16AVX2(dst *uint16, src *float32, n int): dst[i] = F16 bits of
// src[i] rounded to nearest even (n % 8 == 0, n > 0).
TEXT ·storeF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

sstep:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, X0
	VMOVDQU   X0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	JNZ       sstep
	VZEROUPPER
	RET
