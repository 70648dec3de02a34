#include "textflag.h"

// Softmax exponentials of Attend in float32, eight lanes at a time, with
// exactly the operations of expAttn (attn_exp.go), a Cephes-style expf:
// n = round-to-even(x·log2e); r = (x − n·C1) − n·C2; a degree-5
// polynomial p in r; e = ((p·r² + r) + 1)·2^n, every product and sum
// rounded to float32 (no fused operations). x is first clamped to
// [−87, 0]; lanes below −87 give +0 and NaN lanes give the input.

DATA attnexpf<>+0(SB)/4, $0xc2ae0000
DATA attnexpf<>+4(SB)/4, $0xc2ae0000
DATA attnexpf<>+8(SB)/4, $0xc2ae0000
DATA attnexpf<>+12(SB)/4, $0xc2ae0000
DATA attnexpf<>+16(SB)/4, $0xc2ae0000
DATA attnexpf<>+20(SB)/4, $0xc2ae0000
DATA attnexpf<>+24(SB)/4, $0xc2ae0000
DATA attnexpf<>+28(SB)/4, $0xc2ae0000
DATA attnexpf<>+32(SB)/4, $0x3fb8aa3b
DATA attnexpf<>+36(SB)/4, $0x3fb8aa3b
DATA attnexpf<>+40(SB)/4, $0x3fb8aa3b
DATA attnexpf<>+44(SB)/4, $0x3fb8aa3b
DATA attnexpf<>+48(SB)/4, $0x3fb8aa3b
DATA attnexpf<>+52(SB)/4, $0x3fb8aa3b
DATA attnexpf<>+56(SB)/4, $0x3fb8aa3b
DATA attnexpf<>+60(SB)/4, $0x3fb8aa3b
DATA attnexpf<>+64(SB)/4, $0x3f318000
DATA attnexpf<>+68(SB)/4, $0x3f318000
DATA attnexpf<>+72(SB)/4, $0x3f318000
DATA attnexpf<>+76(SB)/4, $0x3f318000
DATA attnexpf<>+80(SB)/4, $0x3f318000
DATA attnexpf<>+84(SB)/4, $0x3f318000
DATA attnexpf<>+88(SB)/4, $0x3f318000
DATA attnexpf<>+92(SB)/4, $0x3f318000
DATA attnexpf<>+96(SB)/4, $0xb95e8083
DATA attnexpf<>+100(SB)/4, $0xb95e8083
DATA attnexpf<>+104(SB)/4, $0xb95e8083
DATA attnexpf<>+108(SB)/4, $0xb95e8083
DATA attnexpf<>+112(SB)/4, $0xb95e8083
DATA attnexpf<>+116(SB)/4, $0xb95e8083
DATA attnexpf<>+120(SB)/4, $0xb95e8083
DATA attnexpf<>+124(SB)/4, $0xb95e8083
DATA attnexpf<>+128(SB)/4, $0x39506967
DATA attnexpf<>+132(SB)/4, $0x39506967
DATA attnexpf<>+136(SB)/4, $0x39506967
DATA attnexpf<>+140(SB)/4, $0x39506967
DATA attnexpf<>+144(SB)/4, $0x39506967
DATA attnexpf<>+148(SB)/4, $0x39506967
DATA attnexpf<>+152(SB)/4, $0x39506967
DATA attnexpf<>+156(SB)/4, $0x39506967
DATA attnexpf<>+160(SB)/4, $0x3ab743ce
DATA attnexpf<>+164(SB)/4, $0x3ab743ce
DATA attnexpf<>+168(SB)/4, $0x3ab743ce
DATA attnexpf<>+172(SB)/4, $0x3ab743ce
DATA attnexpf<>+176(SB)/4, $0x3ab743ce
DATA attnexpf<>+180(SB)/4, $0x3ab743ce
DATA attnexpf<>+184(SB)/4, $0x3ab743ce
DATA attnexpf<>+188(SB)/4, $0x3ab743ce
DATA attnexpf<>+192(SB)/4, $0x3c088908
DATA attnexpf<>+196(SB)/4, $0x3c088908
DATA attnexpf<>+200(SB)/4, $0x3c088908
DATA attnexpf<>+204(SB)/4, $0x3c088908
DATA attnexpf<>+208(SB)/4, $0x3c088908
DATA attnexpf<>+212(SB)/4, $0x3c088908
DATA attnexpf<>+216(SB)/4, $0x3c088908
DATA attnexpf<>+220(SB)/4, $0x3c088908
DATA attnexpf<>+224(SB)/4, $0x3d2aa9c1
DATA attnexpf<>+228(SB)/4, $0x3d2aa9c1
DATA attnexpf<>+232(SB)/4, $0x3d2aa9c1
DATA attnexpf<>+236(SB)/4, $0x3d2aa9c1
DATA attnexpf<>+240(SB)/4, $0x3d2aa9c1
DATA attnexpf<>+244(SB)/4, $0x3d2aa9c1
DATA attnexpf<>+248(SB)/4, $0x3d2aa9c1
DATA attnexpf<>+252(SB)/4, $0x3d2aa9c1
DATA attnexpf<>+256(SB)/4, $0x3e2aaaaa
DATA attnexpf<>+260(SB)/4, $0x3e2aaaaa
DATA attnexpf<>+264(SB)/4, $0x3e2aaaaa
DATA attnexpf<>+268(SB)/4, $0x3e2aaaaa
DATA attnexpf<>+272(SB)/4, $0x3e2aaaaa
DATA attnexpf<>+276(SB)/4, $0x3e2aaaaa
DATA attnexpf<>+280(SB)/4, $0x3e2aaaaa
DATA attnexpf<>+284(SB)/4, $0x3e2aaaaa
DATA attnexpf<>+288(SB)/4, $0x3f000000
DATA attnexpf<>+292(SB)/4, $0x3f000000
DATA attnexpf<>+296(SB)/4, $0x3f000000
DATA attnexpf<>+300(SB)/4, $0x3f000000
DATA attnexpf<>+304(SB)/4, $0x3f000000
DATA attnexpf<>+308(SB)/4, $0x3f000000
DATA attnexpf<>+312(SB)/4, $0x3f000000
DATA attnexpf<>+316(SB)/4, $0x3f000000
DATA attnexpf<>+320(SB)/4, $0x3f800000
DATA attnexpf<>+324(SB)/4, $0x3f800000
DATA attnexpf<>+328(SB)/4, $0x3f800000
DATA attnexpf<>+332(SB)/4, $0x3f800000
DATA attnexpf<>+336(SB)/4, $0x3f800000
DATA attnexpf<>+340(SB)/4, $0x3f800000
DATA attnexpf<>+344(SB)/4, $0x3f800000
DATA attnexpf<>+348(SB)/4, $0x3f800000
DATA attnexpf<>+352(SB)/4, $0x0000007f
DATA attnexpf<>+356(SB)/4, $0x0000007f
DATA attnexpf<>+360(SB)/4, $0x0000007f
DATA attnexpf<>+364(SB)/4, $0x0000007f
DATA attnexpf<>+368(SB)/4, $0x0000007f
DATA attnexpf<>+372(SB)/4, $0x0000007f
DATA attnexpf<>+376(SB)/4, $0x0000007f
DATA attnexpf<>+380(SB)/4, $0x0000007f
GLOBL attnexpf<>(SB), RODATA|NOPTR, $384

// EXPF: Y0 = expAttn(Y0) per lane; clobbers Y1-Y5 (Y4 is zeroed).
#define EXPF \
	VMOVAPS   Y0, Y5; \
	VMAXPS    attnexpf<>+0(SB), Y0, Y0; \
	VXORPS    Y4, Y4, Y4; \
	VMINPS    Y4, Y0, Y0; \
	VMULPS    attnexpf<>+32(SB), Y0, Y1; \
	VROUNDPS  $0, Y1, Y1; \
	VMULPS    attnexpf<>+64(SB), Y1, Y2; \
	VSUBPS    Y2, Y0, Y0; \
	VMULPS    attnexpf<>+96(SB), Y1, Y2; \
	VSUBPS    Y2, Y0, Y0; \
	VMULPS    Y0, Y0, Y3; \
	VMULPS    attnexpf<>+128(SB), Y0, Y2; \
	VADDPS    attnexpf<>+160(SB), Y2, Y2; \
	VMULPS    Y0, Y2, Y2; \
	VADDPS    attnexpf<>+192(SB), Y2, Y2; \
	VMULPS    Y0, Y2, Y2; \
	VADDPS    attnexpf<>+224(SB), Y2, Y2; \
	VMULPS    Y0, Y2, Y2; \
	VADDPS    attnexpf<>+256(SB), Y2, Y2; \
	VMULPS    Y0, Y2, Y2; \
	VADDPS    attnexpf<>+288(SB), Y2, Y2; \
	VMULPS    Y3, Y2, Y2; \
	VADDPS    Y0, Y2, Y2; \
	VADDPS    attnexpf<>+320(SB), Y2, Y2; \
	VCVTPS2DQ Y1, Y1; \
	VPADDD    attnexpf<>+352(SB), Y1, Y1; \
	VPSLLD    $23, Y1, Y1; \
	VMULPS    Y1, Y2, Y0; \
	VCMPPS    $1, attnexpf<>+0(SB), Y5, Y2; \
	VANDNPS   Y0, Y2, Y0; \
	VCMPPS    $3, Y5, Y5, Y2; \
	VBLENDVPS Y2, Y5, Y0, Y0

// func attnExpAVX2(scores *float32, n, nh int, m *float32, sums *float64)
// For p < n, h < nh (a multiple of 4): e = expAttn(scores[p·nh+h] − m[h]);
// scores[p·nh+h] = e; sums[h] += float64(e), in order of p.
TEXT ·attnExpAVX2(SB), NOSPLIT, $0-40
	MOVQ scores+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ nh+16(FP), DX

xpos:
	TESTQ CX, CX
	JZ    xdone
	MOVQ  m+24(FP), R8
	MOVQ  sums+32(FP), R9
	MOVQ  DX, BX

xvec:
	CMPQ      BX, $8
	JLT       xhalf
	VMOVUPS   (SI), Y0
	VSUBPS    (R8), Y0, Y0
	EXPF
	VMOVUPS   Y0, (SI)
	VCVTPS2PD X0, Y1
	VADDPD    (R9), Y1, Y1
	VMOVUPD   Y1, (R9)
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD X2, Y2
	VADDPD    32(R9), Y2, Y2
	VMOVUPD   Y2, 32(R9)
	ADDQ      $32, SI
	ADDQ      $32, R8
	ADDQ      $64, R9
	SUBQ      $8, BX
	JMP       xvec

xhalf:
	TESTQ     BX, BX
	JZ        xnext
	VMOVUPS   (SI), X0
	VSUBPS    (R8), X0, X0
	EXPF
	VMOVUPS   X0, (SI)
	VCVTPS2PD X0, Y1
	VADDPD    (R9), Y1, Y1
	VMOVUPD   Y1, (R9)
	ADDQ      $16, SI

xnext:
	DECQ CX
	JMP  xpos

xdone:
	VZEROUPPER
	RET
