#include "textflag.h"
#include "attn_expz_amd64.h"

// AVX-512 forms of the score, exponential and V helpers
// (attn_scores_amd64.s, attn_exp_amd64.s, attn_block_amd64.s) for 16
// lanes a vector: the same operations in the same order per value, so
// each value is bitwise the AVX2 kernel's and the Go twin's
// (TestAttnScoresMatchesTwin, TestAttnExpBitwise,
// TestAttnBlockHelpersBitwise run both). A prefill tile has 28-32 (token, head) lanes
// (attn_chunk.go), two vectors here against four in AVX2.

// ZROW8(qo, ko) adds the products of one head-dimension index j: qt row j
// at qo(SI) (16 lanes); k[p0+r][j] at ko bytes from R13 (r = 0..2), R14
// (3..5) and DX (6, 7), broadcast by the FMA; R11 is a K row's bytes.
#define ZROW8(qo, ko) \
	VMOVUPS          qo, Z8; \
	VFMADD231PS.BCST ko(R13), Z8, Z0; \
	VFMADD231PS.BCST ko(R13)(R11*1), Z8, Z1; \
	VFMADD231PS.BCST ko(R13)(R11*2), Z8, Z2; \
	VFMADD231PS.BCST ko(R14), Z8, Z3; \
	VFMADD231PS.BCST ko(R14)(R11*1), Z8, Z4; \
	VFMADD231PS.BCST ko(R14)(R11*2), Z8, Z5; \
	VFMADD231PS.BCST ko(DX), Z8, Z6; \
	VFMADD231PS.BCST ko(DX)(R11*1), Z8, Z7

// ZSTORE(Z) writes one position's 16 lane scores at (R10), the lanes of
// K1 only, and steps R10 to the next position.
#define ZSTORE(Z) \
	VMOVUPS Z, K1, (R10); \
	ADDQ    R8, R10

// func attnScoresAVX512(k *float32, qt *float32, nb, gv, dim, ks, ng, mask int, out *float32)
// out[p·ng + v·16 + l] = fma chain over j < dim of qt[j][v·16+l]·k[p·ks+j]
// (from 0, j in order) for p < nb, v < gv, l < 16, v·16+l < ng; qt is
// [dim][gv·16]; mask has bit l set for the last vector's real lanes. dim
// is even and positive, nb and gv positive; ks is the K rows' stride in
// values.
TEXT ·attnScoresAVX512(SB), NOSPLIT, $0-72
	MOVQ qt+8(FP), DI
	MOVQ gv+24(FP), CX
	MOVQ ng+48(FP), R8
	MOVQ out+64(FP), R9
	SHLQ $2, R8        // out row bytes
	MOVQ ks+40(FP), R11
	SHLQ $2, R11       // K row bytes
	MOVQ CX, R12
	SHLQ $6, R12       // qt row bytes

zsvec:
	// K1: every lane, or the last vector's real ones.
	MOVQ  $0xffff, AX
	CMPQ  CX, $1
	JNE   zsmask
	MOVQ  mask+56(FP), AX

zsmask:
	KMOVW AX, K1
	MOVQ  k+0(FP), R15  // K row of the next positions
	MOVQ  R9, R10       // their out row
	MOVQ  nb+16(FP), BX // positions left

zspos8:
	CMPQ   BX, $8
	JLT    zspos1
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	MOVQ   R15, R13
	LEAQ   (R11)(R11*2), R14
	LEAQ   (R14)(R14*1), DX
	ADDQ   R15, R14
	ADDQ   R15, DX
	MOVQ   DI, SI
	MOVQ   dim+32(FP), AX
	SHRQ   $1, AX

zsj8:
	ZROW8((SI), 0)
	ZROW8((SI)(R12*1), 4)
	LEAQ (SI)(R12*2), SI
	ADDQ $8, R13
	ADDQ $8, R14
	ADDQ $8, DX
	DECQ AX
	JNZ  zsj8
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
	JMP  zspos8

zspos1:
	TESTQ  BX, BX
	JZ     zsvecnext
	VXORPS Z0, Z0, Z0
	MOVQ   R15, R13
	MOVQ   DI, SI
	MOVQ   dim+32(FP), AX

zsj1:
	VMOVUPS          (SI), Z8
	VFMADD231PS.BCST (R13), Z8, Z0
	ADDQ             $4, R13
	ADDQ             R12, SI
	DECQ             AX
	JNZ              zsj1
	ZSTORE(Z0)
	ADDQ             R11, R15
	DECQ             BX
	JMP              zspos1

zsvecnext:
	ADDQ $64, DI // next lane vector: qt columns
	ADDQ $64, R9 // and out columns
	DECQ CX
	JNZ  zsvec

	VZEROUPPER
	RET

// func attnAxpyBlockAVX512(v *float32, w *float32, nb, nh, dim, vs int, out *float32)
// For h < nh, p < nb, j < dim (a multiple of 16), in order of p:
// out[h·dim+j] = fma(w[p·nh+h], v[p·vs+j], out[h·dim+j]) (vs: the V rows'
// stride in values). An output row is kept in registers across the
// positions in pieces of 128, then 64, then 16 values (R12 walks the v
// rows, R13 the weights; SI v block, DI weights of head h, R8 output row,
// BX positions, R9 dim·4, R14 the v rows' stride in bytes, R10 nh·4).
TEXT ·attnAxpyBlockAVX512(SB), NOSPLIT, $0-56
	MOVQ  v+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  nb+16(FP), BX
	MOVQ  nh+24(FP), CX
	MOVQ  dim+32(FP), R9
	MOVQ  vs+40(FP), R14
	MOVQ  out+48(FP), R8
	SHLQ  $2, R9
	SHLQ  $2, R14
	MOVQ  CX, R10
	SHLQ  $2, R10
	TESTQ BX, BX
	JZ    zbdone

zbhead:
	XORQ DX, DX // byte offset within the row

zbchunk128:
	MOVQ    R9, AX
	SUBQ    DX, AX
	CMPQ    AX, $512
	JLT     zbchunk64
	VMOVUPS 0(R8)(DX*1), Z0
	VMOVUPS 64(R8)(DX*1), Z1
	VMOVUPS 128(R8)(DX*1), Z2
	VMOVUPS 192(R8)(DX*1), Z3
	VMOVUPS 256(R8)(DX*1), Z4
	VMOVUPS 320(R8)(DX*1), Z5
	VMOVUPS 384(R8)(DX*1), Z6
	VMOVUPS 448(R8)(DX*1), Z7
	LEAQ    (SI)(DX*1), R12
	MOVQ    DI, R13
	MOVQ    BX, R11

zbpos128:
	VBROADCASTSS (R13), Z8
	VFMADD231PS  0(R12), Z8, Z0
	VFMADD231PS  64(R12), Z8, Z1
	VFMADD231PS  128(R12), Z8, Z2
	VFMADD231PS  192(R12), Z8, Z3
	VFMADD231PS  256(R12), Z8, Z4
	VFMADD231PS  320(R12), Z8, Z5
	VFMADD231PS  384(R12), Z8, Z6
	VFMADD231PS  448(R12), Z8, Z7
	ADDQ         R14, R12
	ADDQ         R10, R13
	DECQ         R11
	JNZ          zbpos128
	VMOVUPS      Z0, 0(R8)(DX*1)
	VMOVUPS      Z1, 64(R8)(DX*1)
	VMOVUPS      Z2, 128(R8)(DX*1)
	VMOVUPS      Z3, 192(R8)(DX*1)
	VMOVUPS      Z4, 256(R8)(DX*1)
	VMOVUPS      Z5, 320(R8)(DX*1)
	VMOVUPS      Z6, 384(R8)(DX*1)
	VMOVUPS      Z7, 448(R8)(DX*1)
	ADDQ         $512, DX
	JMP          zbchunk128

zbchunk64:
	CMPQ    AX, $256
	JLT     zbchunk16
	VMOVUPS 0(R8)(DX*1), Z0
	VMOVUPS 64(R8)(DX*1), Z1
	VMOVUPS 128(R8)(DX*1), Z2
	VMOVUPS 192(R8)(DX*1), Z3
	LEAQ    (SI)(DX*1), R12
	MOVQ    DI, R13
	MOVQ    BX, R11

zbpos64:
	VBROADCASTSS (R13), Z8
	VFMADD231PS  0(R12), Z8, Z0
	VFMADD231PS  64(R12), Z8, Z1
	VFMADD231PS  128(R12), Z8, Z2
	VFMADD231PS  192(R12), Z8, Z3
	ADDQ         R14, R12
	ADDQ         R10, R13
	DECQ         R11
	JNZ          zbpos64
	VMOVUPS      Z0, 0(R8)(DX*1)
	VMOVUPS      Z1, 64(R8)(DX*1)
	VMOVUPS      Z2, 128(R8)(DX*1)
	VMOVUPS      Z3, 192(R8)(DX*1)
	ADDQ         $256, DX
	SUBQ         $256, AX

zbchunk16:
	CMPQ    AX, $64
	JLT     zbnexthead
	VMOVUPS (R8)(DX*1), Z0
	LEAQ    (SI)(DX*1), R12
	MOVQ    DI, R13
	MOVQ    BX, R11

zbpos16:
	VBROADCASTSS (R13), Z8
	VFMADD231PS  (R12), Z8, Z0
	ADDQ         R14, R12
	ADDQ         R10, R13
	DECQ         R11
	JNZ          zbpos16
	VMOVUPS      Z0, (R8)(DX*1)
	ADDQ         $64, DX
	SUBQ         $64, AX
	JMP          zbchunk16

zbnexthead:
	ADDQ R9, R8
	ADDQ $4, DI
	DECQ CX
	JNZ  zbhead

zbdone:
	VZEROUPPER
	RET

// func attnExpAVX512(scores *float32, n, nh int, m *float32, sums *float64)
// For p < n, h < nh (a multiple of 16): e = expAttn(scores[p·nh+h] − m[h]);
// scores[p·nh+h] = e; sums[h] += float64(e), in order of p. Sixteen heads
// at a time (R11 of them left), their m in Z6 and sums in Z7 (heads
// 0-7) and Z8 (8-15) across the positions.
TEXT ·attnExpAVX512(SB), NOSPLIT, $0-40
	MOVQ  scores+0(FP), DI
	MOVQ  nh+16(FP), R11
	MOVQ  R11, DX
	SHLQ  $2, DX         // a position's bytes
	MOVQ  m+24(FP), R8
	MOVQ  sums+32(FP), R9
	TESTQ R11, R11
	JZ    zxdone

zxcol:
	VMOVUPS (R8), Z6
	VMOVUPD (R9), Z7
	VMOVUPD 64(R9), Z8
	MOVQ    DI, SI
	MOVQ    n+8(FP), CX
	TESTQ   CX, CX
	JZ      zxcolnext

zxpos:
	VMOVUPS       (SI), Z0
	VSUBPS        Z6, Z0, Z0
	EXPZ
	VMOVUPS       Z0, (SI)
	VCVTPS2PD     Y0, Z1
	VADDPD        Z1, Z7, Z7
	VEXTRACTF64X4 $1, Z0, Y2
	VCVTPS2PD     Y2, Z1
	VADDPD        Z1, Z8, Z8
	ADDQ          DX, SI
	DECQ          CX
	JNZ           zxpos

zxcolnext:
	VMOVUPD Z7, (R9)
	VMOVUPD Z8, 64(R9)
	ADDQ    $64, DI
	ADDQ    $64, R8
	ADDQ    $128, R9
	SUBQ    $16, R11
	JNZ     zxcol

zxdone:
	VZEROUPPER
	RET
