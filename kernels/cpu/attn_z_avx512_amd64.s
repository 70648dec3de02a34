#include "textflag.h"

// AVX-512 kernels of Attend's decode path for groups of eight query heads
// per KV head over an F16 store (attn_z_amd64.go). Each computes the
// same operations per value, in the same order, as its AVX2 / Go twin:
// two positions share a vector (lanes 2h+i: head h, position p+i), so
// every instruction does twice the AVX2 kernels' work.

// Constants of EXPZ, broadcast from one float32 (or int32) each: the
// values of attnexpf<> in attn_exp_amd64.s.
DATA attnz<>+0(SB)/4, $0xc2ae0000  // -87
DATA attnz<>+4(SB)/4, $0x3fb8aa3b  // log2(e)
DATA attnz<>+8(SB)/4, $0x3f318000  // c1
DATA attnz<>+12(SB)/4, $0xb95e8083 // c2
DATA attnz<>+16(SB)/4, $0x39506967 // p0
DATA attnz<>+20(SB)/4, $0x3ab743ce // p1
DATA attnz<>+24(SB)/4, $0x3c088908 // p2
DATA attnz<>+28(SB)/4, $0x3d2aa9c1 // p3
DATA attnz<>+32(SB)/4, $0x3e2aaaaa // p4
DATA attnz<>+36(SB)/4, $0x3f000000 // p5
DATA attnz<>+40(SB)/4, $0x3f800000 // 1
DATA attnz<>+44(SB)/4, $0x0000007f // 127
GLOBL attnz<>(SB), RODATA|NOPTR, $48

// EXPZ: Z0 = expAttn(Z0) per lane, the operations of attn_exp_amd64.s's
// EXPF on 16 lanes (VRNDSCALEPS $0 rounds to even as VROUNDPS $0 does);
// clobbers Z1-Z5, K1, K2.
#define EXPZ \
	VMOVAPS          Z0, Z5; \
	VMAXPS.BCST      attnz<>+0(SB), Z0, Z0; \
	VPXORD           Z4, Z4, Z4; \
	VMINPS           Z4, Z0, Z0; \
	VMULPS.BCST      attnz<>+4(SB), Z0, Z1; \
	VRNDSCALEPS      $0, Z1, Z1; \
	VMULPS.BCST      attnz<>+8(SB), Z1, Z2; \
	VSUBPS           Z2, Z0, Z0; \
	VMULPS.BCST      attnz<>+12(SB), Z1, Z2; \
	VSUBPS           Z2, Z0, Z0; \
	VMULPS           Z0, Z0, Z3; \
	VMULPS.BCST      attnz<>+16(SB), Z0, Z2; \
	VADDPS.BCST      attnz<>+20(SB), Z2, Z2; \
	VMULPS           Z0, Z2, Z2; \
	VADDPS.BCST      attnz<>+24(SB), Z2, Z2; \
	VMULPS           Z0, Z2, Z2; \
	VADDPS.BCST      attnz<>+28(SB), Z2, Z2; \
	VMULPS           Z0, Z2, Z2; \
	VADDPS.BCST      attnz<>+32(SB), Z2, Z2; \
	VMULPS           Z0, Z2, Z2; \
	VADDPS.BCST      attnz<>+36(SB), Z2, Z2; \
	VMULPS           Z3, Z2, Z2; \
	VADDPS           Z0, Z2, Z2; \
	VADDPS.BCST      attnz<>+40(SB), Z2, Z2; \
	VCVTPS2DQ        Z1, Z1; \
	VPADDD.BCST      attnz<>+44(SB), Z1, Z1; \
	VPSLLD           $23, Z1, Z1; \
	VMULPS           Z1, Z2, Z0; \
	VCMPPS.BCST      $1, attnz<>+0(SB), Z5, K1; \
	VPXORD           Z0, Z0, K1, Z0; \
	VCMPPS           $3, Z5, Z5, K2; \
	VMOVAPS          Z5, K2, Z0

// func attnExpZ8(scores *float32, npairs int, m *float32, sums *float64)
// attnExpAVX2 for eight heads, two positions per vector: for p < 2·npairs,
// h < 8: e = expAttn(scores[p·8+h] − m[h]); scores[p·8+h] = e;
// sums[h] += float64(e), in order of p (the sums stay in Z6).
TEXT ·attnExpZ8(SB), NOSPLIT, $0-32
	MOVQ            scores+0(FP), SI
	MOVQ            npairs+8(FP), CX
	MOVQ            m+16(FP), R8
	MOVQ            sums+24(FP), R9
	VBROADCASTF64X4 (R8), Z15
	VMOVUPD         (R9), Z6
	TESTQ           CX, CX
	JZ              xzdone

xzpair:
	VMOVUPS       (SI), Z0
	VSUBPS        Z15, Z0, Z0
	EXPZ
	VMOVUPS       Z0, (SI)
	VCVTPS2PD     Y0, Z1
	VADDPD        Z1, Z6, Z6
	VEXTRACTF64X4 $1, Z0, Y2
	VCVTPS2PD     Y2, Z2
	VADDPD        Z2, Z6, Z6
	ADDQ          $64, SI
	DECQ          CX
	JNZ           xzpair

xzdone:
	VMOVUPD Z6, (R9)
	VZEROUPPER
	RET

// func attnCvtPairsZ(src *uint16, sstride int, dst *float32, nrows, w int, idx *int32)
// Widens nrows F16 rows of w values (a multiple of 16), sstride values
// apart, into pair rows: rows 2m and 2m+1 become dst[m·2w + 2j + i] =
// float32(src[(2m+i)·sstride + j]); an odd last row is paired with zeros.
// idx holds the two VPERMT2PS index vectors that interleave a 16-value
// chunk of the two rows (attnPairIdx).
TEXT ·attnCvtPairsZ(SB), NOSPLIT, $0-48
	MOVQ    src+0(FP), SI
	MOVQ    sstride+8(FP), R8
	MOVQ    dst+16(FP), DI
	MOVQ    nrows+24(FP), CX
	MOVQ    w+32(FP), DX
	MOVQ    idx+40(FP), AX
	VMOVDQU32 (AX), Z30
	VMOVDQU32 64(AX), Z31
	SHLQ    $1, R8 // row bytes apart
	SHRQ    $4, DX // 16-value chunks per row
	TESTQ   DX, DX
	JZ      cpdone

cppair:
	CMPQ CX, $2
	JLT  cplast
	MOVQ SI, R9
	MOVQ DX, BX

cpchunk:
	VCVTPH2PS  (R9), Z0
	VCVTPH2PS  (R9)(R8*1), Z1
	VMOVAPS    Z0, Z2
	VPERMT2PS  Z1, Z30, Z0
	VPERMT2PS  Z1, Z31, Z2
	VMOVUPS    Z0, (DI)
	VMOVUPS    Z2, 64(DI)
	ADDQ       $32, R9
	ADDQ       $128, DI
	DECQ       BX
	JNZ        cpchunk
	LEAQ (SI)(R8*2), SI
	SUBQ $2, CX
	JMP  cppair

cplast:
	TESTQ  CX, CX
	JZ     cpdone
	VPXORD Z1, Z1, Z1
	MOVQ   DX, BX

cplchunk:
	VCVTPH2PS  (SI), Z0
	VMOVAPS    Z0, Z2
	VPERMT2PS  Z1, Z30, Z0
	VPERMT2PS  Z1, Z31, Z2
	VMOVUPS    Z0, (DI)
	VMOVUPS    Z2, 64(DI)
	ADDQ       $32, SI
	ADDQ       $128, DI
	DECQ       BX
	JNZ        cplchunk

cpdone:
	VZEROUPPER
	RET

// ZROW8(ko) adds the products of one head-dimension index j for eight
// pairs: the pair values at ko(R13), ko(R13)(R11*1), ko(R13)(R11*2) (pairs
// 0-2), ko(R14)... (3-5), ko(DX), ko(DX)(R11*1) (6, 7); the query row in
// Z8. Z0-Z7 += q·k as s = fma(q, k, s).
#define ZROW8(ko) \
	VBROADCASTSD ko(R13), Z9; \
	VBROADCASTSD ko(R13)(R11*1), Z10; \
	VFMADD231PS  Z9, Z8, Z0; \
	VFMADD231PS  Z10, Z8, Z1; \
	VBROADCASTSD ko(R13)(R11*2), Z9; \
	VBROADCASTSD ko(R14), Z10; \
	VFMADD231PS  Z9, Z8, Z2; \
	VFMADD231PS  Z10, Z8, Z3; \
	VBROADCASTSD ko(R14)(R11*1), Z9; \
	VBROADCASTSD ko(R14)(R11*2), Z10; \
	VFMADD231PS  Z9, Z8, Z4; \
	VFMADD231PS  Z10, Z8, Z5; \
	VBROADCASTSD ko(DX), Z9; \
	VBROADCASTSD ko(DX)(R11*1), Z10; \
	VFMADD231PS  Z9, Z8, Z6; \
	VFMADD231PS  Z10, Z8, Z7

// ZSTORE(Z) writes a pair's 16 scores at (R10), position-major (the lanes
// reordered by Z15), and steps R10 to the next pair.
#define ZSTORE(Z) \
	VPERMPS Z, Z15, Z; \
	VMOVUPS Z, (R10); \
	ADDQ    $64, R10

// PF issues the next of the pf lines (PREFETCHT0 of (R8), R8 += 64) while
// R9 of them are left: the prefetch of rows a later call reads, spread
// over the loop instead of issued at once (a burst of a block's lines
// fills the miss buffers and stalls the loads of the work between).
#define PF \
	TESTQ      R9, R9; \
	JZ         4(PC); \
	PREFETCHT0 (R8); \
	ADDQ       $64, R8; \
	DECQ       R9

// func attnScoresZ8(k *float32, qt *float32, npairs, dim, ks int, out *float32, perm *int32, pf *byte, pflines int)
// Scores of eight heads over pair rows (attnCvtPairsZ's layout, ks
// values apart): out[(2m+i)·8 + h] = Σ_j q[h][j]·k[2m+i][j] as one FMA
// chain in order of j from 0 (attnScoresGo's), for m < npairs; qt is
// [dim][16] with q[h][j] in lanes 2h and 2h+1 of row j (attnPairQ), perm
// the lane order of a position-major pair (attnPairPerm). It prefetches
// the pflines 64-byte lines from pf, one per two values of j (PF).
TEXT ·attnScoresZ8(SB), NOSPLIT, $0-72
	MOVQ      k+0(FP), R15
	MOVQ      qt+8(FP), DI
	MOVQ      npairs+16(FP), BX
	MOVQ      ks+32(FP), R11
	SHLQ      $2, R11 // pair row bytes
	MOVQ      out+40(FP), R10
	MOVQ      perm+48(FP), AX
	VMOVDQU32 (AX), Z15
	MOVQ      pf+56(FP), R8
	MOVQ      pflines+64(FP), R9

zs8:
	CMPQ   BX, $8
	JLT    zs1
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ   R15, R13
	LEAQ   (R11)(R11*2), R14
	LEAQ   (R14)(R14*1), DX
	ADDQ   R15, R14
	ADDQ   R15, DX
	MOVQ   DI, SI
	MOVQ   dim+24(FP), AX
	SHRQ   $1, AX

zsj8:
	PF
	VMOVUPS (SI), Z8
	ZROW8(0)
	VMOVUPS 64(SI), Z8
	ZROW8(8)
	ADDQ    $128, SI
	ADDQ    $16, R13
	ADDQ    $16, R14
	ADDQ    $16, DX
	DECQ    AX
	JNZ     zsj8
	ZSTORE(Z0)
	ZSTORE(Z1)
	ZSTORE(Z2)
	ZSTORE(Z3)
	ZSTORE(Z4)
	ZSTORE(Z5)
	ZSTORE(Z6)
	ZSTORE(Z7)
	LEAQ (R15)(R11*8), R15
	SUBQ $8, BX
	JMP  zs8

zs1:
	TESTQ  BX, BX
	JZ     zsdone
	VPXORD Z0, Z0, Z0
	MOVQ   R15, R13
	MOVQ   DI, SI
	MOVQ   dim+24(FP), AX

zsj1:
	VBROADCASTSD (R13), Z9
	VFMADD231PS  (SI), Z9, Z0
	ADDQ         $8, R13
	ADDQ         $64, SI
	DECQ         AX
	JNZ          zsj1
	ZSTORE(Z0)
	ADDQ         R11, R15
	DECQ         BX
	JMP          zs1

zsdone:
	VZEROUPPER
	RET

// ZAXPY(h, zw) adds position p's weight of head h (broadcast into zw)
// times the two V vectors Z16, Z17 to head h's accumulators Z(2h), Z(2h+1).
#define ZAXPY(h, zw, a0, a1) \
	VBROADCASTSS (4*h)(R13), zw; \
	VFMADD231PS  Z16, zw, a0; \
	VFMADD231PS  Z17, zw, a1

// func attnAxpyF16Z8(v *uint16, vs int, w *float32, nb, dim int, out *float32, pf *byte, pflines int)
// attnAxpyBlockAVX2 for eight heads reading the V rows as F16: for
// h < 8, p < nb, j < dim (a multiple of 32), in order of p:
// out[h·dim+j] = fma(w[p·8+h], float32(v[p·vs+j]), out[h·dim+j]) (vs: the
// rows' stride in values). Each 32-value chunk of the eight output rows
// stays in Z0-Z15 across the positions, so each V value is widened once.
// It prefetches the pflines 64-byte lines from pf, one per position and
// chunk (PF).
TEXT ·attnAxpyF16Z8(SB), NOSPLIT, $0-64
	MOVQ  pf+48(FP), R10
	MOVQ  pflines+56(FP), CX
	MOVQ  v+0(FP), SI
	MOVQ  vs+8(FP), R14
	MOVQ  w+16(FP), DI
	MOVQ  nb+24(FP), BX
	MOVQ  dim+32(FP), R9
	MOVQ  out+40(FP), R8
	SHLQ  $1, R14 // V row bytes
	SHLQ  $2, R9  // output row bytes
	TESTQ BX, BX
	JZ    zadone
	XORQ  DX, DX  // output byte offset of the chunk

zachunk:
	CMPQ    DX, R9
	JGE     zadone
	MOVQ    R8, AX
	ADDQ    DX, AX
	VMOVUPS (AX), Z0
	VMOVUPS 64(AX), Z1
	ADDQ    R9, AX
	VMOVUPS (AX), Z2
	VMOVUPS 64(AX), Z3
	ADDQ    R9, AX
	VMOVUPS (AX), Z4
	VMOVUPS 64(AX), Z5
	ADDQ    R9, AX
	VMOVUPS (AX), Z6
	VMOVUPS 64(AX), Z7
	ADDQ    R9, AX
	VMOVUPS (AX), Z8
	VMOVUPS 64(AX), Z9
	ADDQ    R9, AX
	VMOVUPS (AX), Z10
	VMOVUPS 64(AX), Z11
	ADDQ    R9, AX
	VMOVUPS (AX), Z12
	VMOVUPS 64(AX), Z13
	ADDQ    R9, AX
	VMOVUPS (AX), Z14
	VMOVUPS 64(AX), Z15
	MOVQ    DX, R12
	SHRQ    $1, R12 // V byte offset of the chunk
	ADDQ    SI, R12
	MOVQ    DI, R13
	MOVQ    BX, R11

zapos:
	TESTQ      CX, CX
	JZ         4(PC)
	PREFETCHT0 (R10)
	ADDQ       $64, R10
	DECQ       CX
	VCVTPH2PS (R12), Z16
	VCVTPH2PS 32(R12), Z17
	ZAXPY(0, Z18, Z0, Z1)
	ZAXPY(1, Z19, Z2, Z3)
	ZAXPY(2, Z20, Z4, Z5)
	ZAXPY(3, Z21, Z6, Z7)
	ZAXPY(4, Z22, Z8, Z9)
	ZAXPY(5, Z23, Z10, Z11)
	ZAXPY(6, Z24, Z12, Z13)
	ZAXPY(7, Z25, Z14, Z15)
	ADDQ      R14, R12
	ADDQ      $32, R13
	DECQ      R11
	JNZ       zapos
	MOVQ    R8, AX
	ADDQ    DX, AX
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	ADDQ    R9, AX
	VMOVUPS Z2, (AX)
	VMOVUPS Z3, 64(AX)
	ADDQ    R9, AX
	VMOVUPS Z4, (AX)
	VMOVUPS Z5, 64(AX)
	ADDQ    R9, AX
	VMOVUPS Z6, (AX)
	VMOVUPS Z7, 64(AX)
	ADDQ    R9, AX
	VMOVUPS Z8, (AX)
	VMOVUPS Z9, 64(AX)
	ADDQ    R9, AX
	VMOVUPS Z10, (AX)
	VMOVUPS Z11, 64(AX)
	ADDQ    R9, AX
	VMOVUPS Z12, (AX)
	VMOVUPS Z13, 64(AX)
	ADDQ    R9, AX
	VMOVUPS Z14, (AX)
	VMOVUPS Z15, 64(AX)
	ADDQ    $128, DX
	JMP     zachunk

zadone:
	VZEROUPPER
	RET
