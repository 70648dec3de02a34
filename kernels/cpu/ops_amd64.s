// AVX2 gated activations for whole groups of 8, exp being ggml's vector
// expf (ggml_v_expf):
//
//	SwiGLU: dst[i] = gate[i] / (1 + exp(-gate[i])) * up[i]
//	GeGLU:  dst[i] = gate[i] / (1 + exp(-u)) * up[i], u = c2·(x·(1 + a·x²)), x = gate[i]
//
// Twins: the vector part of SwiGLU and geluGo (ops.go) with expGGML
// (ops_exp.go), bit for bit: every step is the same single-rounding
// float32 operation (FMAs included).

#include "textflag.h"

#define VEC8(name, bits) \
	DATA name<>+0(SB)/4, $bits; DATA name<>+4(SB)/4, $bits; \
	DATA name<>+8(SB)/4, $bits; DATA name<>+12(SB)/4, $bits; \
	DATA name<>+16(SB)/4, $bits; DATA name<>+20(SB)/4, $bits; \
	DATA name<>+24(SB)/4, $bits; DATA name<>+28(SB)/4, $bits; \
	GLOBL name<>(SB), RODATA|NOPTR, $32

VEC8(sgR, 0x4b400000)    // 0x1.8p23
VEC8(sgL2E, 0x3fb8aa3b)  // 0x1.715476p+0
VEC8(sgC1, 0x3f317200)   // 0x1.62e4p-1
VEC8(sgC2, 0x35bfbe8e)   // 0x1.7f7d1cp-20
VEC8(sgP0, 0x3c072010)   // 0x1.0e4020p-7
VEC8(sgP1, 0x3d2b9f17)   // 0x1.573e2ep-5
VEC8(sgP2, 0x3e2aaf33)   // 0x1.555e66p-3
VEC8(sgP3, 0x3efffedb)   // 0x1.fffdb6p-2
VEC8(sgP4, 0x3f7ffff6)   // 0x1.ffffecp-1
VEC8(sgOne, 0x3f800000)  // 1.0
VEC8(sgAbs, 0x7fffffff)
VEC8(sg126, 0x42fc0000)  // 126.0
VEC8(sg192, 0x43400000)  // 192.0
VEC8(sgG, 0x82000000)
VEC8(sgS1, 0x7f000000)
VEC8(geA, 0x3d372713)   // 0.044715
VEC8(geC2, 0x3fcc422a)  // 2·√(2/π)

// GLU(ARG): the loop of both kernels over n/8 groups (DI dst, SI gate, DX
// up, CX the count): Y0 = the gate values; ARG leaves exp's argument in
// Y1 (clobbering Y2 at most); then Y0 / (1 + exp(Y1)) * up.
#define GLU(ARG) \
	MOVQ    dst+0(FP), DI; \
	MOVQ    gate+8(FP), SI; \
	MOVQ    up+16(FP), DX; \
	MOVQ    n+24(FP), CX; \
	SHRQ    $3, CX; \
	JZ      done; \
	VMOVUPS sgR<>(SB), Y15; \
	VMOVUPS sgL2E<>(SB), Y14; \
	VMOVUPS sgC1<>(SB), Y13; \
	VMOVUPS sgC2<>(SB), Y12; \
	VMOVUPS sgOne<>(SB), Y6; \
loop: \
	VMOVUPS      (SI), Y0; \
	ARG; \
	VMOVAPS      Y15, Y2; \
	VFMADD231PS  Y14, Y1, Y2; \
	VSUBPS       Y15, Y2, Y3; \
	VMOVAPS      Y1, Y4; \
	VFNMADD231PS Y13, Y3, Y4; \
	VFNMADD231PS Y12, Y3, Y4; \
	VPSLLD       $23, Y2, Y5; \
	VPADDD       Y6, Y5, Y1; \
	VMULPS       Y4, Y4, Y2; \
	VMOVUPS      sgP0<>(SB), Y7; \
	VFMADD213PS  sgP1<>(SB), Y4, Y7; \
	VMOVUPS      sgP2<>(SB), Y8; \
	VFMADD213PS  sgP3<>(SB), Y4, Y8; \
	VFMADD213PS  Y8, Y2, Y7; \
	VMULPS       sgP4<>(SB), Y4, Y8; \
	VFMADD213PS  Y8, Y2, Y7; \
	VANDPS       sgAbs<>(SB), Y3, Y8; \
	VCMPPS       $0x1e, sg126<>(SB), Y8, Y9; \
	VMOVMSKPS    Y9, AX; \
	TESTL        AX, AX; \
	JNZ          slow; \
	VFMADD213PS  Y1, Y7, Y1; \
tail: \
	VADDPS  Y6, Y1, Y1; \
	VDIVPS  Y1, Y0, Y0; \
	VMULPS  (DX), Y0, Y0; \
	VMOVUPS Y0, (DI); \
	ADDQ    $32, SI; \
	ADDQ    $32, DX; \
	ADDQ    $32, DI; \
	DECQ    CX; \
	JNZ     loop; \
done: \
	VZEROUPPER; \
	RET; \
slow: \
	VMOVAPS     Y1, Y10; \
	VFMADD213PS Y1, Y7, Y10; \
	VXORPS      Y11, Y11, Y11; \
	VCMPPS      $0x12, Y11, Y3, Y11; \
	VANDPS      sgG<>(SB), Y11, Y11; \
	VPADDD      sgS1<>(SB), Y11, Y1; \
	VPSUBD      Y11, Y5, Y2; \
	VFMADD213PS Y2, Y7, Y2; \
	VMULPS      Y1, Y2, Y2; \
	VMULPS      Y1, Y1, Y4; \
	VCMPPS      $0x1e, sg192<>(SB), Y8, Y3; \
	VBLENDVPS   Y9, Y2, Y10, Y10; \
	VBLENDVPS   Y3, Y4, Y10, Y1; \
	JMP         tail

// The exp steps, in GLU's order: z = x·log2e + r (FMA), n = z − r,
// b = (x − n·c1) − n·c2 (two FNMAs), k = bits(z) << 23 + bits(1.0),
// the polynomial j in b (u = b·b, A = b·p0 + p1, B = b·p2 + p3,
// C = u·A + B, j = u·C + b·p4), and exp = j·k + k; where some lane has
// |n| > 126 (slow), the scaled forms of ggml_v_expf, chosen per lane.

// SWIARG: x = 0 − g.
#define SWIARG \
	VXORPS Y1, Y1, Y1; \
	VSUBPS Y0, Y1, Y1

// GELUARG: x = 0 − c2·(g·(1 + a·g·g)), one rounding a step.
#define GELUARG \
	VMULPS  Y0, Y0, Y1; \
	VMULPS  geA<>(SB), Y1, Y1; \
	VADDPS  Y6, Y1, Y1; \
	VMULPS  Y0, Y1, Y1; \
	VMULPS  geC2<>(SB), Y1, Y1; \
	VXORPS  Y2, Y2, Y2; \
	VSUBPS  Y1, Y2, Y1

// func swigluAVX2(dst, gate, up *float32, n int)
// n is a multiple of 8 (> 0).
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	GLU(SWIARG)

// func gegluAVX2(dst, gate, up *float32, n int)
// n is a multiple of 8 (> 0).
TEXT ·gegluAVX2(SB), NOSPLIT, $0-32
	GLU(GELUARG)

// func addAVX2(dst, a, b *float32, n int): dst[i] = a[i] + b[i], n a
// multiple of 8 (> 0); one float32 rounding each, as Go's +.
TEXT ·addAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

astep:
	VMOVUPS (SI), Y0
	VADDPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     astep
	VZEROUPPER
	RET
