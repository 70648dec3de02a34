// AVX2 activation quantization to Q8_0 blocks. Twin: q8Block (quant_act.go),
// bit for bit: amax, d = F16(amax/127), id = 127/amax (0 if amax is 0),
// q = round-to-nearest-even(x·id) (VCVTPS2DQ under the default MXCSR).

#include "textflag.h"

DATA qabs<>+0(SB)/4, $0x7fffffff
GLOBL qabs<>(SB), RODATA|NOPTR, $4

DATA q127<>+0(SB)/4, $0x42fe0000
GLOBL q127<>(SB), RODATA|NOPTR, $4

// Dword permutation undoing the lane interleave of VPACKSSDW/VPACKSSWB.
DATA qperm<>+0(SB)/8, $0x0000000400000000
DATA qperm<>+8(SB)/8, $0x0000000500000001
DATA qperm<>+16(SB)/8, $0x0000000600000002
DATA qperm<>+24(SB)/8, $0x0000000700000003
GLOBL qperm<>(SB), RODATA|NOPTR, $32

// func quantQ8AVX2(x *float32, qs *int8, d *float32, nb int)
TEXT ·quantQ8AVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         qs+8(FP), DI
	MOVQ         d+16(FP), DX
	MOVQ         nb+24(FP), CX
	VBROADCASTSS qabs<>(SB), Y15
	VMOVSS       q127<>(SB), X14
	VMOVDQU      qperm<>(SB), Y13
	TESTQ        CX, CX
	JLE          qdone

qloop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VANDPS  Y15, Y0, Y4
	VANDPS  Y15, Y1, Y5
	VMAXPS  Y5, Y4, Y4
	VANDPS  Y15, Y2, Y5
	VANDPS  Y15, Y3, Y6
	VMAXPS  Y6, Y5, Y5
	VMAXPS  Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS  X5, X4, X4
	VMOVHLPS X4, X4, X5
	VMAXPS  X5, X4, X4
	VPSHUFD $1, X4, X5
	VMAXSS  X5, X4, X4 // amax

	VDIVSS    X14, X4, X5 // amax/127
	VCVTPS2PH $0, X5, X6
	VCVTPH2PS X6, X6
	VMOVSS    X6, (DX)

	VXORPS       X7, X7, X7
	VCMPSS       $4, X7, X4, X9 // amax != 0
	VDIVSS       X4, X14, X8    // 127/amax
	VANDPS       X9, X8, X8
	VBROADCASTSS X8, Y8
	VMULPS       Y8, Y0, Y0
	VMULPS       Y8, Y1, Y1
	VMULPS       Y8, Y2, Y2
	VMULPS       Y8, Y3, Y3
	VCVTPS2DQ    Y0, Y0
	VCVTPS2DQ    Y1, Y1
	VCVTPS2DQ    Y2, Y2
	VCVTPS2DQ    Y3, Y3
	VPACKSSDW    Y1, Y0, Y0
	VPACKSSDW    Y3, Y2, Y2
	VPACKSSWB    Y2, Y0, Y0
	VPERMD       Y0, Y13, Y0
	VMOVDQU      Y0, (DI)

	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  qloop

qdone:
	VZEROUPPER
	RET

DATA qm127<>+0(SB)/4, $0xc2fe0000
GLOBL qm127<>(SB), RODATA|NOPTR, $4

DATA qone<>+0(SB)/4, $0x3f800000
GLOBL qone<>(SB), RODATA|NOPTR, $4

// BSUM16 stores the int32 sum of the 16 values in A and B (8 lanes each) as
// an int16 at m; T is an X temp, AX clobbered.
#define BSUM16(A, B, m, T) \
	VPADDD       B, A, Y9; \
	VEXTRACTI128 $1, Y9, T; \
	VPADDD       T, X9, X9; \
	VPSHUFD      $0x4e, X9, T; \
	VPADDD       T, X9, X9; \
	VPSHUFD      $0xb1, X9, T; \
	VPADDD       T, X9, X9; \
	VMOVD        X9, AX; \
	MOVW         AX, m

// func quantQ8KAVX2(x *float32, qs *int8, d *float32, bsums *int16, nb int)
// Twin of q8KBlock: vmax = the first value of largest magnitude,
// iscale = -127/vmax, q = round-half-even(iscale·x), d = 1/iscale.
TEXT ·quantQ8KAVX2(SB), NOSPLIT, $0-40
	MOVQ         x+0(FP), SI
	MOVQ         qs+8(FP), DI
	MOVQ         d+16(FP), DX
	MOVQ         bsums+24(FP), R8
	MOVQ         nb+32(FP), CX
	VBROADCASTSS qabs<>(SB), Y15
	VMOVDQU      qperm<>(SB), Y13
	TESTQ        CX, CX
	JLE          kdone

kblock:
	// amax over 256 values
	VXORPS Y4, Y4, Y4
	XORQ   BX, BX

kmax:
	VANDPS  (SI)(BX*4), Y15, Y0
	VANDPS  32(SI)(BX*4), Y15, Y1
	VMAXPS  Y1, Y0, Y0
	VANDPS  64(SI)(BX*4), Y15, Y1
	VANDPS  96(SI)(BX*4), Y15, Y2
	VMAXPS  Y2, Y1, Y1
	VMAXPS  Y1, Y0, Y0
	VMAXPS  Y0, Y4, Y4
	ADDQ    $32, BX
	CMPQ    BX, $256
	JLT     kmax
	VEXTRACTF128 $1, Y4, X5
	VMAXPS  X5, X4, X4
	VMOVHLPS X4, X4, X5
	VMAXPS  X5, X4, X4
	VPSHUFD $1, X4, X5
	VMAXSS  X5, X4, X4 // amax
	VXORPS  X5, X5, X5
	VUCOMISS X5, X4
	JEQ     kzero

	// vmax: the first x with |x| == amax (amax itself if none matches, NaN).
	VBROADCASTSS X4, Y6
	VMOVAPS X4, X7
	XORQ    BX, BX

kfind:
	VANDPS    (SI)(BX*4), Y15, Y0
	VCMPPS    $0, Y6, Y0, Y0
	VMOVMSKPS Y0, AX
	TESTL     AX, AX
	JNZ       kfound
	ADDQ      $8, BX
	CMPQ      BX, $256
	JLT       kfind
	JMP       kscale

kfound:
	BSFL   AX, AX
	ADDQ   AX, BX
	VMOVSS (SI)(BX*4), X7

kscale:
	VMOVSS       qm127<>(SB), X8
	VDIVSS       X7, X8, X8 // iscale = -127/vmax
	VMOVSS       qone<>(SB), X5
	VDIVSS       X8, X5, X5 // d = 1/iscale
	VMOVSS       X5, (DX)
	VBROADCASTSS X8, Y8
	XORQ         BX, BX

kquant:
	VMULPS     (SI)(BX*4), Y8, Y0
	VMULPS     32(SI)(BX*4), Y8, Y1
	VMULPS     64(SI)(BX*4), Y8, Y2
	VMULPS     96(SI)(BX*4), Y8, Y3
	VCVTPS2DQ  Y0, Y0
	VCVTPS2DQ  Y1, Y1
	VCVTPS2DQ  Y2, Y2
	VCVTPS2DQ  Y3, Y3
	BSUM16(Y0, Y1, (R8), X10)
	BSUM16(Y2, Y3, 2(R8), X10)
	VPACKSSDW  Y1, Y0, Y0
	VPACKSSDW  Y3, Y2, Y2
	VPACKSSWB  Y2, Y0, Y0
	VPERMD     Y0, Y13, Y0
	VMOVDQU    Y0, (DI)(BX*1)
	ADDQ       $4, R8
	ADDQ       $32, BX
	CMPQ       BX, $256
	JLT        kquant
	JMP        knext

kzero:
	VXORPS  Y0, Y0, Y0
	VMOVSS  X0, (DX)
	XORQ    BX, BX

kzloop:
	VMOVDQU Y0, (DI)(BX*1)
	ADDQ    $32, BX
	CMPQ    BX, $256
	JLT     kzloop
	VMOVDQU Y0, (R8)
	ADDQ    $32, R8

knext:
	ADDQ $1024, SI
	ADDQ $256, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  kblock

kdone:
	VZEROUPPER
	RET

DATA qones8<>+0(SB)/8, $0x0101010101010101
GLOBL qones8<>(SB), RODATA|NOPTR, $8

DATA qones16<>+0(SB)/8, $0x0001000100010001
GLOBL qones16<>(SB), RODATA|NOPTR, $8

// func sumQ8AVX2(qs *int8, s8 *int32, nb int)
// s8[b] = 8·Σ qs[32b : 32b+32] (int8 values summed exactly). Twin: the
// sum loop of fillBlk (dot_blk.go).
TEXT ·sumQ8AVX2(SB), NOSPLIT, $0-24
	MOVQ         qs+0(FP), SI
	MOVQ         s8+8(FP), DI
	MOVQ         nb+16(FP), CX
	VPBROADCASTQ qones8<>(SB), Y15
	VPBROADCASTQ qones16<>(SB), Y14
	TESTQ        CX, CX
	JLE          sdone

sloop:
	VMOVDQU      (SI), Y0
	VPMADDUBSW   Y0, Y15, Y0 // 1·q pairs -> int16
	VPMADDWD     Y14, Y0, Y0 // pairs -> int32, 8 lanes
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VPSLLD       $3, X0, X0
	VMOVD        X0, (DI)
	ADDQ         $32, SI
	ADDQ         $4, DI
	DECQ         CX
	JNZ          sloop

sdone:
	VZEROUPPER
	RET
