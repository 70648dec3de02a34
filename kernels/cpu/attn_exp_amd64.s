#include "textflag.h"

// Softmax exponentials of Attend in float32, eight lanes at a time, with
// exactly the operations of expAttn (attn_exp.go), a Cephes-style expf:
// n = round-to-even(x·log2e); r = (x − n·C1) − n·C2; a degree-5
// polynomial p in r; e = ((p·r² + r) + 1)·2^n, every product and sum
// rounded to float32 (no fused operations). x is first clamped to
// [−87, 0]; lanes below −87 give +0 and NaN lanes give the input.

DATA ·attnExpF+0(SB)/4, $0xc2ae0000
DATA ·attnExpF+4(SB)/4, $0xc2ae0000
DATA ·attnExpF+8(SB)/4, $0xc2ae0000
DATA ·attnExpF+12(SB)/4, $0xc2ae0000
DATA ·attnExpF+16(SB)/4, $0xc2ae0000
DATA ·attnExpF+20(SB)/4, $0xc2ae0000
DATA ·attnExpF+24(SB)/4, $0xc2ae0000
DATA ·attnExpF+28(SB)/4, $0xc2ae0000
DATA ·attnExpF+32(SB)/4, $0x3fb8aa3b
DATA ·attnExpF+36(SB)/4, $0x3fb8aa3b
DATA ·attnExpF+40(SB)/4, $0x3fb8aa3b
DATA ·attnExpF+44(SB)/4, $0x3fb8aa3b
DATA ·attnExpF+48(SB)/4, $0x3fb8aa3b
DATA ·attnExpF+52(SB)/4, $0x3fb8aa3b
DATA ·attnExpF+56(SB)/4, $0x3fb8aa3b
DATA ·attnExpF+60(SB)/4, $0x3fb8aa3b
DATA ·attnExpF+64(SB)/4, $0x3f318000
DATA ·attnExpF+68(SB)/4, $0x3f318000
DATA ·attnExpF+72(SB)/4, $0x3f318000
DATA ·attnExpF+76(SB)/4, $0x3f318000
DATA ·attnExpF+80(SB)/4, $0x3f318000
DATA ·attnExpF+84(SB)/4, $0x3f318000
DATA ·attnExpF+88(SB)/4, $0x3f318000
DATA ·attnExpF+92(SB)/4, $0x3f318000
DATA ·attnExpF+96(SB)/4, $0xb95e8083
DATA ·attnExpF+100(SB)/4, $0xb95e8083
DATA ·attnExpF+104(SB)/4, $0xb95e8083
DATA ·attnExpF+108(SB)/4, $0xb95e8083
DATA ·attnExpF+112(SB)/4, $0xb95e8083
DATA ·attnExpF+116(SB)/4, $0xb95e8083
DATA ·attnExpF+120(SB)/4, $0xb95e8083
DATA ·attnExpF+124(SB)/4, $0xb95e8083
DATA ·attnExpF+128(SB)/4, $0x39506967
DATA ·attnExpF+132(SB)/4, $0x39506967
DATA ·attnExpF+136(SB)/4, $0x39506967
DATA ·attnExpF+140(SB)/4, $0x39506967
DATA ·attnExpF+144(SB)/4, $0x39506967
DATA ·attnExpF+148(SB)/4, $0x39506967
DATA ·attnExpF+152(SB)/4, $0x39506967
DATA ·attnExpF+156(SB)/4, $0x39506967
DATA ·attnExpF+160(SB)/4, $0x3ab743ce
DATA ·attnExpF+164(SB)/4, $0x3ab743ce
DATA ·attnExpF+168(SB)/4, $0x3ab743ce
DATA ·attnExpF+172(SB)/4, $0x3ab743ce
DATA ·attnExpF+176(SB)/4, $0x3ab743ce
DATA ·attnExpF+180(SB)/4, $0x3ab743ce
DATA ·attnExpF+184(SB)/4, $0x3ab743ce
DATA ·attnExpF+188(SB)/4, $0x3ab743ce
DATA ·attnExpF+192(SB)/4, $0x3c088908
DATA ·attnExpF+196(SB)/4, $0x3c088908
DATA ·attnExpF+200(SB)/4, $0x3c088908
DATA ·attnExpF+204(SB)/4, $0x3c088908
DATA ·attnExpF+208(SB)/4, $0x3c088908
DATA ·attnExpF+212(SB)/4, $0x3c088908
DATA ·attnExpF+216(SB)/4, $0x3c088908
DATA ·attnExpF+220(SB)/4, $0x3c088908
DATA ·attnExpF+224(SB)/4, $0x3d2aa9c1
DATA ·attnExpF+228(SB)/4, $0x3d2aa9c1
DATA ·attnExpF+232(SB)/4, $0x3d2aa9c1
DATA ·attnExpF+236(SB)/4, $0x3d2aa9c1
DATA ·attnExpF+240(SB)/4, $0x3d2aa9c1
DATA ·attnExpF+244(SB)/4, $0x3d2aa9c1
DATA ·attnExpF+248(SB)/4, $0x3d2aa9c1
DATA ·attnExpF+252(SB)/4, $0x3d2aa9c1
DATA ·attnExpF+256(SB)/4, $0x3e2aaaaa
DATA ·attnExpF+260(SB)/4, $0x3e2aaaaa
DATA ·attnExpF+264(SB)/4, $0x3e2aaaaa
DATA ·attnExpF+268(SB)/4, $0x3e2aaaaa
DATA ·attnExpF+272(SB)/4, $0x3e2aaaaa
DATA ·attnExpF+276(SB)/4, $0x3e2aaaaa
DATA ·attnExpF+280(SB)/4, $0x3e2aaaaa
DATA ·attnExpF+284(SB)/4, $0x3e2aaaaa
DATA ·attnExpF+288(SB)/4, $0x3f000000
DATA ·attnExpF+292(SB)/4, $0x3f000000
DATA ·attnExpF+296(SB)/4, $0x3f000000
DATA ·attnExpF+300(SB)/4, $0x3f000000
DATA ·attnExpF+304(SB)/4, $0x3f000000
DATA ·attnExpF+308(SB)/4, $0x3f000000
DATA ·attnExpF+312(SB)/4, $0x3f000000
DATA ·attnExpF+316(SB)/4, $0x3f000000
DATA ·attnExpF+320(SB)/4, $0x3f800000
DATA ·attnExpF+324(SB)/4, $0x3f800000
DATA ·attnExpF+328(SB)/4, $0x3f800000
DATA ·attnExpF+332(SB)/4, $0x3f800000
DATA ·attnExpF+336(SB)/4, $0x3f800000
DATA ·attnExpF+340(SB)/4, $0x3f800000
DATA ·attnExpF+344(SB)/4, $0x3f800000
DATA ·attnExpF+348(SB)/4, $0x3f800000
DATA ·attnExpF+352(SB)/4, $0x0000007f
DATA ·attnExpF+356(SB)/4, $0x0000007f
DATA ·attnExpF+360(SB)/4, $0x0000007f
DATA ·attnExpF+364(SB)/4, $0x0000007f
DATA ·attnExpF+368(SB)/4, $0x0000007f
DATA ·attnExpF+372(SB)/4, $0x0000007f
DATA ·attnExpF+376(SB)/4, $0x0000007f
DATA ·attnExpF+380(SB)/4, $0x0000007f
GLOBL ·attnExpF(SB), RODATA|NOPTR, $384

// EXPF: Y0 = expAttn(Y0) per lane; clobbers Y1-Y5 (Y4 is zeroed).
#define EXPF \
	VMOVAPS   Y0, Y5; \
	VMAXPS    ·attnExpF+0(SB), Y0, Y0; \
	VXORPS    Y4, Y4, Y4; \
	VMINPS    Y4, Y0, Y0; \
	VMULPS    ·attnExpF+32(SB), Y0, Y1; \
	VROUNDPS  $0, Y1, Y1; \
	VMULPS    ·attnExpF+64(SB), Y1, Y2; \
	VSUBPS    Y2, Y0, Y0; \
	VMULPS    ·attnExpF+96(SB), Y1, Y2; \
	VSUBPS    Y2, Y0, Y0; \
	VMULPS    Y0, Y0, Y3; \
	VMULPS    ·attnExpF+128(SB), Y0, Y2; \
	VADDPS    ·attnExpF+160(SB), Y2, Y2; \
	VMULPS    Y0, Y2, Y2; \
	VADDPS    ·attnExpF+192(SB), Y2, Y2; \
	VMULPS    Y0, Y2, Y2; \
	VADDPS    ·attnExpF+224(SB), Y2, Y2; \
	VMULPS    Y0, Y2, Y2; \
	VADDPS    ·attnExpF+256(SB), Y2, Y2; \
	VMULPS    Y0, Y2, Y2; \
	VADDPS    ·attnExpF+288(SB), Y2, Y2; \
	VMULPS    Y3, Y2, Y2; \
	VADDPS    Y0, Y2, Y2; \
	VADDPS    ·attnExpF+320(SB), Y2, Y2; \
	VCVTPS2DQ Y1, Y1; \
	VPADDD    ·attnExpF+352(SB), Y1, Y1; \
	VPSLLD    $23, Y1, Y1; \
	VMULPS    Y1, Y2, Y0; \
	VCMPPS    $1, ·attnExpF+0(SB), Y5, Y2; \
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
