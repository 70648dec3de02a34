// AVX-512 (BW, VL, VNNI) four-token K-quant kernels. Same contract as the
// AVX2 four-token kernels of dot_kquant_x4_amd64.s: per token, bit for bit the
// one-token kernel of dot_kquant_amd64.s. Only the exact integer work is
// regrouped (two sub-blocks per zmm, VPDPWSSD for the scale products); the
// float32 ops per (row, token) are the same ops in the same order, two or
// four tokens side by side in one zmm (lane-wise ops do not mix lanes).
//
// Registers: token t's q8 at DI + t*R8 (R9 = 3*R8), d at DX + t*R10
// (R11 = 2*R10, R13 = 3*R10), bsums at R12 + 8*t*R10.

#include "textflag.h"
#include "hsum8_amd64.h"

DATA kzsc0<>+0(SB)/8, $0x0000000000000000
DATA kzsc0<>+8(SB)/8, $0x0000000000000000
DATA kzsc0<>+16(SB)/8, $0x0000000000000000
DATA kzsc0<>+24(SB)/8, $0x0000000000000000
DATA kzsc0<>+32(SB)/8, $0x0001000100010001
DATA kzsc0<>+40(SB)/8, $0x0001000100010001
DATA kzsc0<>+48(SB)/8, $0x0001000100010001
DATA kzsc0<>+56(SB)/8, $0x0001000100010001
GLOBL kzsc0<>(SB), RODATA|NOPTR, $64

DATA kzsc1<>+0(SB)/8, $0x0002000200020002
DATA kzsc1<>+8(SB)/8, $0x0002000200020002
DATA kzsc1<>+16(SB)/8, $0x0002000200020002
DATA kzsc1<>+24(SB)/8, $0x0002000200020002
DATA kzsc1<>+32(SB)/8, $0x0003000300030003
DATA kzsc1<>+40(SB)/8, $0x0003000300030003
DATA kzsc1<>+48(SB)/8, $0x0003000300030003
DATA kzsc1<>+56(SB)/8, $0x0003000300030003
GLOBL kzsc1<>(SB), RODATA|NOPTR, $64

DATA kzsc2<>+0(SB)/8, $0x0004000400040004
DATA kzsc2<>+8(SB)/8, $0x0004000400040004
DATA kzsc2<>+16(SB)/8, $0x0004000400040004
DATA kzsc2<>+24(SB)/8, $0x0004000400040004
DATA kzsc2<>+32(SB)/8, $0x0005000500050005
DATA kzsc2<>+40(SB)/8, $0x0005000500050005
DATA kzsc2<>+48(SB)/8, $0x0005000500050005
DATA kzsc2<>+56(SB)/8, $0x0005000500050005
GLOBL kzsc2<>(SB), RODATA|NOPTR, $64

DATA kzsc3<>+0(SB)/8, $0x0006000600060006
DATA kzsc3<>+8(SB)/8, $0x0006000600060006
DATA kzsc3<>+16(SB)/8, $0x0006000600060006
DATA kzsc3<>+24(SB)/8, $0x0006000600060006
DATA kzsc3<>+32(SB)/8, $0x0007000700070007
DATA kzsc3<>+40(SB)/8, $0x0007000700070007
DATA kzsc3<>+48(SB)/8, $0x0007000700070007
DATA kzsc3<>+56(SB)/8, $0x0007000700070007
GLOBL kzsc3<>(SB), RODATA|NOPTR, $64

DATA kzmdup<>+0(SB)/8, $0x0001000100000000
DATA kzmdup<>+8(SB)/8, $0x0003000300020002
DATA kzmdup<>+16(SB)/8, $0x0005000500040004
DATA kzmdup<>+24(SB)/8, $0x0007000700060006
DATA kzmdup<>+32(SB)/8, $0x0001000100000000
DATA kzmdup<>+40(SB)/8, $0x0003000300020002
DATA kzmdup<>+48(SB)/8, $0x0005000500040004
DATA kzmdup<>+56(SB)/8, $0x0007000700060006
GLOBL kzmdup<>(SB), RODATA|NOPTR, $64

DATA kzeven<>+0(SB)/8, $0x0000000200000000
DATA kzeven<>+8(SB)/8, $0x0000000600000004
DATA kzeven<>+16(SB)/8, $0x0000000a00000008
DATA kzeven<>+24(SB)/8, $0x0000000e0000000c
DATA kzeven<>+32(SB)/8, $0x0000001200000010
DATA kzeven<>+40(SB)/8, $0x0000001600000014
DATA kzeven<>+48(SB)/8, $0x0000001a00000018
DATA kzeven<>+56(SB)/8, $0x0000001e0000001c
GLOBL kzeven<>(SB), RODATA|NOPTR, $64

DATA kzdy01<>+0(SB)/8, $0x0000000000000000
DATA kzdy01<>+8(SB)/8, $0x0000000000000000
DATA kzdy01<>+16(SB)/8, $0x0000000000000000
DATA kzdy01<>+24(SB)/8, $0x0000000000000000
DATA kzdy01<>+32(SB)/8, $0x0000000100000001
DATA kzdy01<>+40(SB)/8, $0x0000000100000001
DATA kzdy01<>+48(SB)/8, $0x0000000100000001
DATA kzdy01<>+56(SB)/8, $0x0000000100000001
GLOBL kzdy01<>(SB), RODATA|NOPTR, $64

DATA kzdy23<>+0(SB)/8, $0x0000000200000002
DATA kzdy23<>+8(SB)/8, $0x0000000200000002
DATA kzdy23<>+16(SB)/8, $0x0000000200000002
DATA kzdy23<>+24(SB)/8, $0x0000000200000002
DATA kzdy23<>+32(SB)/8, $0x0000000300000003
DATA kzdy23<>+40(SB)/8, $0x0000000300000003
DATA kzdy23<>+48(SB)/8, $0x0000000300000003
DATA kzdy23<>+56(SB)/8, $0x0000000300000003
GLOBL kzdy23<>(SB), RODATA|NOPTR, $64

DATA kzdym<>+0(SB)/8, $0x0000000000000000
DATA kzdym<>+8(SB)/8, $0x0000000000000000
DATA kzdym<>+16(SB)/8, $0x0000000100000001
DATA kzdym<>+24(SB)/8, $0x0000000100000001
DATA kzdym<>+32(SB)/8, $0x0000000200000002
DATA kzdym<>+40(SB)/8, $0x0000000200000002
DATA kzdym<>+48(SB)/8, $0x0000000300000003
DATA kzdym<>+56(SB)/8, $0x0000000300000003
GLOBL kzdym<>(SB), RODATA|NOPTR, $64

// KZSTORE: m = hsum8(main accumulator in Y0) - hsum8(min lanes in X7,
// upper lanes zero), as KSTORE of dot_kquant_x4_amd64.s.
#define KZSTORE(m) \
	HSUM8(Y0, X0, X1); \
	HSUM8(Y7, X7, X1); \
	VSUBSS X7, X0, X0; \
	VMOVSS X0, m

// KZROWS: row loop prologue. Frame: 0(SP) rows left, 8(SP) out pointer.
// Each row starts from the first token data again; SI runs on (the rows
// are contiguous, rb = block bytes · nb).
#define KZROWS(done) \
	MOVQ  rows+0(FP), SI; \
	MOVQ  nrows+8(FP), AX; \
	MOVQ  AX, 0(SP); \
	MOVQ  out+64(FP), AX; \
	MOVQ  AX, 8(SP); \
	MOVQ  qstride+48(FP), R8; \
	MOVQ  dstride+56(FP), R10; \
	LEAQ  (R8)(R8*2), R9; \
	LEAQ  (R10)(R10*1), R11; \
	LEAQ  (R10)(R10*2), R13; \
	CMPQ  0(SP), $0; \
	JLE   done

// KZOUT: AX = out pointer, BX = token stride in bytes; R12 = 3·BX.
#define KZOUT \
	MOVQ 8(SP), AX; \
	MOVQ ostride+72(FP), BX; \
	SHLQ $2, BX; \
	LEAQ (BX)(BX*2), R12

// KZNEXT: next row (out += 4 bytes), loop to top while rows are left.
#define KZNEXT(top) \
	ADDQ $4, 8(SP); \
	DECQ 0(SP); \
	JNZ  top

// Q4KZTOK: token S += scale · maddubs(q, y) for one pair of sub-blocks.
#define Q4KZTOK(m, SC, S) \
	VPMADDUBSW m, Z4, Z5; \
	VPDPWSSD   SC, Z5, S

// Q4KZPAIR: sub-blocks 2p (low nibbles, lower 256 bits) and 2p+1 (high
// nibbles, upper 256 bits) of the 32 quant bytes at qoff(SI).
#define Q4KZPAIR(qoff, yoff, SC) \
	VBROADCASTI64X4 qoff(SI), Z4; \
	VPSRLW          $4, Z4, K5, Z4; \
	VPANDD          Z31, Z4, Z4; \
	Q4KZTOK(yoff(DI), SC, Z0); \
	Q4KZTOK(yoff(DI)(R8*1), SC, Z1); \
	Q4KZTOK(yoff(DI)(R8*2), SC, Z2); \
	Q4KZTOK(yoff(DI)(R9*1), SC, Z3)

// func dotQ4_KRowsx4AVX512(rows *byte, nrows int, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32, ostride int)
//
// Frame: 0(SP), 8(SP) as KZROWS; from 64(SP), 256 bytes per super-block
// (nb <= kzMaxNB) of token data shared by all rows: the bsums pair sums
// (16-bit words, token t's 8 at 16t), dy for tokens 0,1 and 2,3 (8 lanes
// each), dy for tokens 0..3 (4 lanes each).
TEXT ·dotQ4_KRowsx4AVX512(SB), $16448-80
	KZROWS(q4kzend)
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	MOVL         $0x00010001, AX
	VPBROADCASTD AX, Z30
	MOVL         $0xff00, AX
	KMOVW        AX, K1
	MOVL         $0x00f0, AX
	KMOVW        AX, K2
	MOVL         $0x0f00, AX
	KMOVW        AX, K3
	MOVL         $0xf000, AX
	KMOVW        AX, K4
	MOVL         $0xffff0000, AX
	KMOVD        AX, K5
	MOVL         $0xf0, AX
	KMOVW        AX, K6
	VMOVDQU64    kzsc0<>(SB), Z20
	VMOVDQU64    kzsc1<>(SB), Z21
	VMOVDQU64    kzsc2<>(SB), Z22
	VMOVDQU64    kzsc3<>(SB), Z23

	// token data, once per call
	MOVQ d+24(FP), DX
	MOVQ bsums+32(FP), R12
	MOVQ nb+40(FP), CX
	LEAQ 64(SP), AX

q4kzpre:
	VMOVDQU         (R12), Y14
	VINSERTI64X4    $1, (R12)(R10*8), Z14, Z14
	VPMADDWD        Z30, Z14, Z14
	VPMOVDW         Z14, Y14
	VMOVDQU         (R12)(R11*8), Y15
	VINSERTI64X4    $1, (R12)(R13*8), Z15, Z15
	VPMADDWD        Z30, Z15, Z15
	VPMOVDW         Z15, Y15
	VINSERTI64X4    $1, Y15, Z14, Z14
	VMOVDQU64       Z14, (AX)
	VBROADCASTSS    (DX), Z17
	VBROADCASTSS    (DX)(R10*1), K1, Z17
	VBROADCASTSS    (DX)(R10*2), Z18
	VBROADCASTSS    (DX)(R13*1), K1, Z18
	VBROADCASTSS    (DX), Z19
	VBROADCASTSS    (DX)(R10*1), K2, Z19
	VBROADCASTSS    (DX)(R10*2), K3, Z19
	VBROADCASTSS    (DX)(R13*1), K4, Z19
	VMOVUPS         Z17, 64(AX)
	VMOVUPS         Z18, 128(AX)
	VMOVUPS         Z19, 192(AX)
	ADDQ            $256, AX
	ADDQ            $4, DX
	ADDQ            $32, R12
	DECQ            CX
	JNZ             q4kzpre

q4kzrow:
	MOVQ   qs+16(FP), DI
	MOVQ   nb+40(FP), CX
	LEAQ   64(SP), R12
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28

q4kzloop:
	// scales 0..7 -> Y14 words 0..7, mins 0..7 -> words 8..15 (the
	// decoding of K4SCALES, dot_kquant_x4_amd64.s).
	MOVL       4(SI), AX
	ANDL       $0x3f3f3f3f, AX
	MOVL       4(SI), DX
	SHRL       $6, DX
	ANDL       $0x03030303, DX
	SHLL       $4, DX
	MOVL       12(SI), BX
	ANDL       $0x0f0f0f0f, BX
	ORL        BX, DX
	SHLQ       $32, DX
	ORQ        DX, AX
	VMOVQ      AX, X14
	MOVL       8(SI), AX
	ANDL       $0x3f3f3f3f, AX
	MOVL       8(SI), DX
	SHRL       $6, DX
	ANDL       $0x03030303, DX
	SHLL       $4, DX
	MOVL       12(SI), BX
	SHRL       $4, BX
	ANDL       $0x0f0f0f0f, BX
	ORL        BX, DX
	SHLQ       $32, DX
	ORQ        DX, AX
	VPINSRQ    $1, AX, X14, X14
	VPMOVZXBW  X14, Y14
	VPERMW     Z14, Z20, Z6
	VPERMW     Z14, Z21, Z7
	VPERMW     Z14, Z22, Z8
	VPERMW     Z14, Z23, Z9
	VSHUFI32X4 $0x55, Z14, Z14, Z13

	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	Q4KZPAIR(16, 0, Z6)
	Q4KZPAIR(48, 64, Z7)
	Q4KZPAIR(80, 128, Z8)
	Q4KZPAIR(112, 192, Z9)

	// d, dmin (16 lanes each) times the dy patterns.
	VPBROADCASTW (SI), Y10
	VCVTPH2PS    Y10, Z10
	VPBROADCASTW 2(SI), Y11
	VCVTPH2PS    Y11, Z11
	VMULPS       64(R12), Z10, Z17
	VMULPS       128(R12), Z10, Z18
	VMULPS       192(R12), Z11, Z19

	// mins: lane (t, j) = m[2j]·w[2j] + m[2j+1]·w[2j+1], w the pair sums.
	VPMADDWD    (R12), Z13, Z14
	VCVTDQ2PS   Z14, Z14
	VFMADD231PS Z14, Z19, Z28

	// main: S[j] = lower[j] + upper[j] per token, tokens paired in a zmm.
	// [a.hi, b.lo] + [a.lo, b.hi] (K6: upper four qwords).
	VSHUFI64X2  $0x4e, Z1, Z0, Z14
	VMOVDQA64   Z1, K6, Z0
	VPADDD      Z0, Z14, Z14
	VCVTDQ2PS   Z14, Z14
	VFMADD231PS Z14, Z17, Z26
	VSHUFI64X2  $0x4e, Z3, Z2, Z15
	VMOVDQA64   Z3, K6, Z2
	VPADDD      Z2, Z15, Z15
	VCVTDQ2PS   Z15, Z15
	VFMADD231PS Z15, Z18, Z27

	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $256, R12
	DECQ CX
	JNZ  q4kzloop

q4kzdone:
	KZOUT
	VMOVAPS       Y26, Y0
	VEXTRACTF32X4 $0, Z28, X7
	KZSTORE((AX))
	VEXTRACTF64X4 $1, Z26, Y0
	VEXTRACTF32X4 $1, Z28, X7
	KZSTORE((AX)(BX*1))
	VMOVAPS       Y27, Y0
	VEXTRACTF32X4 $2, Z28, X7
	KZSTORE((AX)(BX*2))
	VEXTRACTF64X4 $1, Z27, Y0
	VEXTRACTF32X4 $3, Z28, X7
	KZSTORE((AX)(R12*1))
	KZNEXT(q4kzrow)

q4kzend:
	VZEROUPPER
	RET
DATA kz6sc0<>+0(SB)/8, $0x0000000000000000
DATA kz6sc0<>+8(SB)/8, $0x0000000000000000
DATA kz6sc0<>+16(SB)/8, $0x0001000100010001
DATA kz6sc0<>+24(SB)/8, $0x0001000100010001
DATA kz6sc0<>+32(SB)/8, $0x0002000200020002
DATA kz6sc0<>+40(SB)/8, $0x0002000200020002
DATA kz6sc0<>+48(SB)/8, $0x0003000300030003
DATA kz6sc0<>+56(SB)/8, $0x0003000300030003
GLOBL kz6sc0<>(SB), RODATA|NOPTR, $64

DATA kz6sc1<>+0(SB)/8, $0x0004000400040004
DATA kz6sc1<>+8(SB)/8, $0x0004000400040004
DATA kz6sc1<>+16(SB)/8, $0x0005000500050005
DATA kz6sc1<>+24(SB)/8, $0x0005000500050005
DATA kz6sc1<>+32(SB)/8, $0x0006000600060006
DATA kz6sc1<>+40(SB)/8, $0x0006000600060006
DATA kz6sc1<>+48(SB)/8, $0x0007000700070007
DATA kz6sc1<>+56(SB)/8, $0x0007000700070007
GLOBL kz6sc1<>(SB), RODATA|NOPTR, $64

DATA kz6sc2<>+0(SB)/8, $0x0008000800080008
DATA kz6sc2<>+8(SB)/8, $0x0008000800080008
DATA kz6sc2<>+16(SB)/8, $0x0009000900090009
DATA kz6sc2<>+24(SB)/8, $0x0009000900090009
DATA kz6sc2<>+32(SB)/8, $0x000a000a000a000a
DATA kz6sc2<>+40(SB)/8, $0x000a000a000a000a
DATA kz6sc2<>+48(SB)/8, $0x000b000b000b000b
DATA kz6sc2<>+56(SB)/8, $0x000b000b000b000b
GLOBL kz6sc2<>(SB), RODATA|NOPTR, $64

DATA kz6sc3<>+0(SB)/8, $0x000c000c000c000c
DATA kz6sc3<>+8(SB)/8, $0x000c000c000c000c
DATA kz6sc3<>+16(SB)/8, $0x000d000d000d000d
DATA kz6sc3<>+24(SB)/8, $0x000d000d000d000d
DATA kz6sc3<>+32(SB)/8, $0x000e000e000e000e
DATA kz6sc3<>+40(SB)/8, $0x000e000e000e000e
DATA kz6sc3<>+48(SB)/8, $0x000f000f000f000f
DATA kz6sc3<>+56(SB)/8, $0x000f000f000f000f
GLOBL kz6sc3<>(SB), RODATA|NOPTR, $64

// Q6KZTOK: token S += scale · maddubs(q, y) for one pair of 32-element groups.
#define Q6KZTOK(m, SC, S) \
	VPMADDUBSW m, Z4, Z5; \
	VPDPWSSD   SC, Z5, S

#define Q6KZTOK4(yoff, SC) \
	Q6KZTOK(yoff(DI), SC, Z0); \
	Q6KZTOK(yoff(DI)(R8*1), SC, Z1); \
	Q6KZTOK(yoff(DI)(R8*2), SC, Z2); \
	Q6KZTOK(yoff(DI)(R9*1), SC, Z3)

// Q6KZHALF: one 128-element half (groups 0..3 of ql at qloff, qh at qhoff),
// groups 0,1 then 2,3, two groups per zmm (scales SCA, SCB).
#define Q6KZHALF(qloff, qhoff, yoff, SCA, SCB) \
	VMOVDQU64       qloff(SI), Z10; \
	VBROADCASTI64X4 qhoff(SI), Z11; \
	VPSRLW          $2, Z11, K5, Z11; \
	VPANDD          Z31, Z10, Z4; \
	VPANDD          Z30, Z11, Z5; \
	VPSLLW          $4, Z5, Z5; \
	VPORD           Z5, Z4, Z4; \
	Q6KZTOK4(yoff, SCA); \
	VPSRLW          $4, Z10, Z4; \
	VPANDD          Z31, Z4, Z4; \
	VPSRLW          $4, Z11, Z5; \
	VPANDD          Z30, Z5, Z5; \
	VPSLLW          $4, Z5, Z5; \
	VPORD           Z5, Z4, Z4; \
	Q6KZTOK4(yoff+64, SCB)

// Q6KZFOLD: two tokens' S (SA, SB: lower + upper 256 bits) minus 32 ·
// Σ sc·bsum (the two tokens' bsums at m), converted and accumulated into
// ACC. The fold is [a.hi, b.lo] + [a.lo, b.hi] (K6: upper four qwords).
#define Q6KZFOLD(SA, SB, m, MUL, ACC) \
	VPMADDWD     m, Z14, Z12; \
	VPSLLD       $5, Z12, Z12; \
	VSHUFI64X2   $0x4e, SB, SA, Z15; \
	VMOVDQA64    SB, K6, SA; \
	VPADDD       SA, Z15, Z15; \
	VPSUBD       Z12, Z15, Z15; \
	VCVTDQ2PS    Z15, Z15; \
	VFMADD231PS  Z15, MUL, ACC

// func dotQ6_KRowsx4AVX512(rows *byte, nrows int, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32, ostride int)
//
// Frame: 0(SP), 8(SP) as KZROWS; from 64(SP), 256 bytes per super-block
// (nb <= kzMaxNB) of token data shared by all rows: the bsums of tokens
// 0,1 and of tokens 2,3, dy for tokens 0,1 and 2,3 (8 lanes each).
TEXT ·dotQ6_KRowsx4AVX512(SB), $16448-80
	KZROWS(q6kzend)
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Z30
	MOVL         $0xff00, AX
	KMOVW        AX, K1
	MOVL         $0xffff0000, AX
	KMOVD        AX, K5
	MOVL         $0xf0, AX
	KMOVW        AX, K6
	VMOVDQU64    kz6sc0<>(SB), Z20
	VMOVDQU64    kz6sc1<>(SB), Z21
	VMOVDQU64    kz6sc2<>(SB), Z22
	VMOVDQU64    kz6sc3<>(SB), Z23

	// token data, once per call
	MOVQ d+24(FP), DX
	MOVQ bsums+32(FP), R12
	MOVQ nb+40(FP), CX
	LEAQ 64(SP), AX

q6kzpre:
	VMOVDQU      (R12), Y14
	VINSERTI64X4 $1, (R12)(R10*8), Z14, Z14
	VMOVDQU64    Z14, (AX)
	VMOVDQU      (R12)(R11*8), Y15
	VINSERTI64X4 $1, (R12)(R13*8), Z15, Z15
	VMOVDQU64    Z15, 64(AX)
	VBROADCASTSS (DX), Z17
	VBROADCASTSS (DX)(R10*1), K1, Z17
	VBROADCASTSS (DX)(R10*2), Z18
	VBROADCASTSS (DX)(R13*1), K1, Z18
	VMOVUPS      Z17, 128(AX)
	VMOVUPS      Z18, 192(AX)
	ADDQ         $256, AX
	ADDQ         $4, DX
	ADDQ         $32, R12
	DECQ         CX
	JNZ          q6kzpre

q6kzrow:
	MOVQ   qs+16(FP), DI
	MOVQ   nb+40(FP), CX
	LEAQ   64(SP), R12
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27

q6kzloop:
	VPMOVSXBW    192(SI), Y14
	VINSERTI64X4 $1, Y14, Z14, Z14
	VPERMW       Z14, Z20, Z6
	VPERMW       Z14, Z21, Z7
	VPERMW       Z14, Z22, Z8
	VPERMW       Z14, Z23, Z9

	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	Q6KZHALF(0, 128, 0, Z6, Z7)
	Q6KZHALF(64, 160, 128, Z8, Z9)

	VPBROADCASTW 208(SI), Y10
	VCVTPH2PS    Y10, Z10
	VMULPS       128(R12), Z10, Z17
	VMULPS       192(R12), Z10, Z18
	Q6KZFOLD(Z0, Z1, (R12), Z17, Z26)
	Q6KZFOLD(Z2, Z3, 64(R12), Z18, Z27)

	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $256, R12
	DECQ CX
	JNZ  q6kzloop

q6kzdone:
	KZOUT
	VMOVAPS       Y26, Y0
	VXORPS        X7, X7, X7
	KZSTORE((AX))
	VEXTRACTF64X4 $1, Z26, Y0
	VXORPS        X7, X7, X7
	KZSTORE((AX)(BX*1))
	VMOVAPS       Y27, Y0
	VXORPS        X7, X7, X7
	KZSTORE((AX)(BX*2))
	VEXTRACTF64X4 $1, Z27, Y0
	VXORPS        X7, X7, X7
	KZSTORE((AX)(R12*1))
	KZNEXT(q6kzrow)

q6kzend:
	VZEROUPPER
	RET
