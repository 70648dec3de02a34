#include "textflag.h"

// Attention scores of Attend with the query heads in the lanes. For a
// block of K rows (float32, [nb][dim], ks values apart) and the query group transposed and
// padded to whole vectors (qt [dim][gv·8], zeros past g), each score is
// one FMA chain over the head dimension in order,
//
//	s = 0; for j < dim: s = fma(q[h][j], k[p][j], s)
//
// so each K value is broadcast once for eight heads and no horizontal sum
// is needed. Eight positions run at once (eight independent chains), the
// rest one at a time. attnScoresGo (attn_simd.go) is the plain twin.

// ROW8(qo, ko) adds the products of one head-dimension index j: qt row j
// at qo(SI); k[p0+r][j] at ko bytes from R13 (r = 0..2), R14 (3..5) and
// DX (6, 7); R11 is a K row's bytes.
#define ROW8(qo, ko) \
	VMOVUPS      qo, Y8; \
	VBROADCASTSS ko(R13), Y9; \
	VBROADCASTSS ko(R13)(R11*1), Y10; \
	VFMADD231PS  Y9, Y8, Y0; \
	VFMADD231PS  Y10, Y8, Y1; \
	VBROADCASTSS ko(R13)(R11*2), Y9; \
	VBROADCASTSS ko(R14), Y10; \
	VFMADD231PS  Y9, Y8, Y2; \
	VFMADD231PS  Y10, Y8, Y3; \
	VBROADCASTSS ko(R14)(R11*1), Y9; \
	VBROADCASTSS ko(R14)(R11*2), Y10; \
	VFMADD231PS  Y9, Y8, Y4; \
	VFMADD231PS  Y10, Y8, Y5; \
	VBROADCASTSS ko(DX), Y9; \
	VBROADCASTSS ko(DX)(R11*1), Y10; \
	VFMADD231PS  Y9, Y8, Y6; \
	VFMADD231PS  Y10, Y8, Y7

// STORE(Y) writes one position's eight head scores at (R10) and steps
// R10 to the next position: a plain store, or (AX != 0: the last head
// vector of a group that does not fill it) a masked store of the real
// heads (mask in Y15).
#define STORE(Y) \
	TESTQ      AX, AX; \
	JNZ        3(PC); \
	VMOVUPS    Y, (R10); \
	JMP        2(PC); \
	VMASKMOVPS Y, Y15, (R10); \
	ADDQ       R8, R10

// PARTIAL sets AX = ng%8 when CX = 1 (the last head vector), else 0.
#define PARTIAL \
	XORQ AX, AX; \
	CMPQ CX, $1; \
	JNE  3(PC); \
	MOVQ ng+48(FP), AX; \
	ANDQ $7, AX

// func attnScoresAVX2(k *float32, qt *float32, nb, gv, dim, ks, ng int, out *float32, mask *int32)
// out[p·ng + v·8 + l] = the chain above for head v·8+l, for p < nb, v < gv,
// l < 8, v·8+l < ng; mask holds -1 in lanes l < ng - (gv-1)·8, 0 after.
// dim is even and positive, nb and gv positive; ks is the K rows' stride
// in values.
TEXT ·attnScoresAVX2(SB), NOSPLIT, $0-72
	MOVQ    qt+8(FP), DI
	MOVQ    gv+24(FP), CX
	MOVQ    ng+48(FP), R8
	MOVQ    out+56(FP), R9
	MOVQ    mask+64(FP), R10
	VMOVDQU (R10), Y15
	SHLQ    $2, R8       // out row bytes
	MOVQ    ks+40(FP), R11
	SHLQ    $2, R11      // K row bytes
	MOVQ    CX, R12
	SHLQ    $5, R12      // qt row bytes

svec:
	MOVQ k+0(FP), R15   // K row of the next positions
	MOVQ R9, R10        // their out row
	MOVQ nb+16(FP), BX  // positions left

spos8:
	CMPQ   BX, $8
	JLT    spos1
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   R15, R13
	LEAQ   (R11)(R11*2), R14
	LEAQ   (R14)(R14*1), DX
	ADDQ   R15, R14
	ADDQ   R15, DX
	MOVQ   DI, SI
	MOVQ   dim+32(FP), AX
	SHRQ   $1, AX

sj8:
	ROW8((SI), 0)
	ROW8((SI)(R12*1), 4)
	LEAQ (SI)(R12*2), SI
	ADDQ $8, R13
	ADDQ $8, R14
	ADDQ $8, DX
	DECQ AX
	JNZ  sj8
	PARTIAL
	STORE(Y0)
	STORE(Y1)
	STORE(Y2)
	STORE(Y3)
	STORE(Y4)
	STORE(Y5)
	STORE(Y6)
	STORE(Y7)
	LEAQ (R15)(R11*8), R15
	SUBQ $8, BX
	JMP  spos8

spos1:
	TESTQ  BX, BX
	JZ     svecnext
	VXORPS Y0, Y0, Y0
	MOVQ   R15, R13
	MOVQ   DI, SI
	MOVQ   dim+32(FP), AX

sj1:
	VBROADCASTSS (R13), Y9
	VFMADD231PS  (SI), Y9, Y0
	ADDQ         $4, R13
	ADDQ         R12, SI
	DECQ         AX
	JNZ          sj1
	PARTIAL
	STORE(Y0)
	ADDQ         R11, R15
	DECQ         BX
	JMP          spos1

svecnext:
	ADDQ $32, DI // next head vector: qt columns
	ADDQ $32, R9 // and out columns
	DECQ CX
	JNZ  svec

	VZEROUPPER
	RET
