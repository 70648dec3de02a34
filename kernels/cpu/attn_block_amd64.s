#include "textflag.h"

// Blocked helpers of Attend: the same arithmetic per value as the
// per-position helpers in attn_amd64.s, over a block of positions per
// call. attnAxpyBlockAVX2 keeps 8 vectors of an output row in Y0-Y7 across
// the positions (R12 walks the v rows, R13 the weights; SI v block, DI
// weights of head h, R8 output row, BX positions, R9 d·4, R14 the v
// rows' stride in bytes, R10 g·4).

// func attnAxpyBlockAVX2(v *float32, w *float32, nb, nh, dim, vs int, out *float32)
// For h < nh, p < nb, j < dim (a multiple of 8), in order of p:
// out[h·dim+j] = fma(w[p·nh+h], v[p·vs+j], out[h·dim+j]) (vs: the V rows'
// stride in values).
TEXT ·attnAxpyBlockAVX2(SB), NOSPLIT, $0-56
	MOVQ v+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ nb+16(FP), BX
	MOVQ nh+24(FP), CX
	MOVQ dim+32(FP), R9
	MOVQ vs+40(FP), R14
	MOVQ out+48(FP), R8
	SHLQ $2, R9
	SHLQ $2, R14
	MOVQ CX, R10
	SHLQ $2, R10
	TESTQ BX, BX
	JZ    bdone

bhead:
	XORQ DX, DX // byte offset within the row

bchunk64:
	MOVQ R9, AX
	SUBQ DX, AX
	CMPQ AX, $256
	JLT  bchunk8
	VMOVUPS 0(R8)(DX*1), Y0
	VMOVUPS 32(R8)(DX*1), Y1
	VMOVUPS 64(R8)(DX*1), Y2
	VMOVUPS 96(R8)(DX*1), Y3
	VMOVUPS 128(R8)(DX*1), Y4
	VMOVUPS 160(R8)(DX*1), Y5
	VMOVUPS 192(R8)(DX*1), Y6
	VMOVUPS 224(R8)(DX*1), Y7
	LEAQ    (SI)(DX*1), R12
	MOVQ    DI, R13
	MOVQ    BX, R11

bpos64:
	VBROADCASTSS (R13), Y8
	VFMADD231PS  0(R12), Y8, Y0
	VFMADD231PS  32(R12), Y8, Y1
	VFMADD231PS  64(R12), Y8, Y2
	VFMADD231PS  96(R12), Y8, Y3
	VFMADD231PS  128(R12), Y8, Y4
	VFMADD231PS  160(R12), Y8, Y5
	VFMADD231PS  192(R12), Y8, Y6
	VFMADD231PS  224(R12), Y8, Y7
	ADDQ         R14, R12
	ADDQ         R10, R13
	DECQ         R11
	JNZ          bpos64
	VMOVUPS Y0, 0(R8)(DX*1)
	VMOVUPS Y1, 32(R8)(DX*1)
	VMOVUPS Y2, 64(R8)(DX*1)
	VMOVUPS Y3, 96(R8)(DX*1)
	VMOVUPS Y4, 128(R8)(DX*1)
	VMOVUPS Y5, 160(R8)(DX*1)
	VMOVUPS Y6, 192(R8)(DX*1)
	VMOVUPS Y7, 224(R8)(DX*1)
	ADDQ    $256, DX
	JMP     bchunk64

bchunk8:
	CMPQ AX, $32
	JLT  bnexthead
	VMOVUPS (R8)(DX*1), Y0
	LEAQ    (SI)(DX*1), R12
	MOVQ    DI, R13
	MOVQ    BX, R11

bpos8:
	VBROADCASTSS (R13), Y8
	VFMADD231PS  (R12), Y8, Y0
	ADDQ         R14, R12
	ADDQ         R10, R13
	DECQ         R11
	JNZ          bpos8
	VMOVUPS Y0, (R8)(DX*1)
	ADDQ    $32, DX
	SUBQ    $32, AX
	JMP     bchunk8

bnexthead:
	ADDQ R9, R8
	ADDQ $4, DI
	DECQ CX
	JNZ  bhead

bdone:
	VZEROUPPER
	RET

// func attnCvtRowsAVX2(src *uint16, sstride int, dst *float32, nrows, dim int)
// dst[r·dim+j] = float32(src[r·sstride+j]) for r < nrows, j < dim (a
// multiple of 8): the widening of attnCvtF16AVX2, nrows rows per call.
TEXT ·attnCvtRowsAVX2(SB), NOSPLIT, $0-40
	MOVQ src+0(FP), SI
	MOVQ sstride+8(FP), R8
	MOVQ dst+16(FP), DI
	MOVQ nrows+24(FP), CX
	MOVQ dim+32(FP), DX
	SHLQ $1, R8
	SHRQ $3, DX
	TESTQ CX, CX
	JZ    crdone
	TESTQ DX, DX
	JZ    crdone

crrow:
	MOVQ SI, R9
	MOVQ DX, BX

crvec:
	VCVTPH2PS (R9), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, R9
	ADDQ      $32, DI
	DECQ      BX
	JNZ       crvec
	ADDQ      R8, SI
	DECQ      CX
	JNZ       crrow

crdone:
	VZEROUPPER
	RET

// func attnScaleMaxAVX2(s *float32, n, g8 int, scale float32, m *float32)
// s is [n][8·g8]: every value becomes s·scale (in place) and m[h] the
// maximum over the n positions of head h's scaled values, folded into the
// m[h] passed in. Per value the same float32 multiply as attnScaleMaxGo.
TEXT ·attnScaleMaxAVX2(SB), NOSPLIT, $0-40
	MOVQ         s+0(FP), SI
	MOVQ         n+8(FP), BX
	MOVQ         g8+16(FP), CX
	VBROADCASTSS scale+24(FP), Y15
	MOVQ         m+32(FP), DI
	MOVQ         CX, R9
	SHLQ         $5, R9 // bytes per position
	TESTQ        BX, BX
	JZ           smdone
	TESTQ        CX, CX
	JZ           smdone
smchunk:
	VMOVUPS (DI), Y0
	MOVQ    SI, R8
	MOVQ    BX, R10
smpos:
	VMULPS  (R8), Y15, Y1
	VMOVUPS Y1, (R8)
	VMAXPS  Y0, Y1, Y0
	ADDQ    R9, R8
	DECQ    R10
	JNZ     smpos
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     smchunk
smdone:
	VZEROUPPER
	RET

// func attnPrefetchRowsAVX2(src *byte, sstride, nrows, bytes int)
// PREFETCHT0 of the lines covering bytes bytes at src + r·sstride (bytes
// apart) for r < nrows: the K or V rows of the next block of positions. A
// prefetch never faults and changes no value.
TEXT ·attnPrefetchRowsAVX2(SB), NOSPLIT, $0-32
	MOVQ  src+0(FP), SI
	MOVQ  sstride+8(FP), R8
	MOVQ  nrows+16(FP), CX
	MOVQ  bytes+24(FP), DX
	TESTQ CX, CX
	JLE   pfdone
	TESTQ DX, DX
	JLE   pfdone

pfrow:
	XORQ AX, AX

pfline:
	PREFETCHT0 (SI)(AX*1)
	ADDQ       $64, AX
	CMPQ       AX, DX
	JLT        pfline
	ADDQ       R8, SI
	DECQ       CX
	JNZ        pfrow

pfdone:
	RET
