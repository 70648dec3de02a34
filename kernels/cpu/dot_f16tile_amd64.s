// F16 prefill tiles: 12 (row, token) pairs per register tile (three rows ×
// four tokens or two rows × six tokens), several row groups per call.
//
// The canonical F16 dot (dotF16AVX2) keeps two accumulator chains per
// (row, token) pair: chain 0 takes elements [16j, 16j+8) and chain 1
// elements [16j+8, 16j+16), one FMA per 8 lanes in increasing j; a final
// 8-element tail (n%16 == 8) goes into chain 0; the result is
// HSUM8(chain0 + chain1). Twelve pairs × two chains do not fit in 16
// registers, so these kernels run the chains one after the other: per
// block of at most 16 steps (256 elements) and per row group, they load the
// 12 chain-0 accumulators from acc, run the block's chain-0 halves, store
// them, then do the same for chain 1. Each chain sees exactly the FMAs of
// dotF16AVX2 in the same order, so f16FinStoreAVX2 (chain0 + chain1, then
// the same HSUM8) gives bitwise the one-token result. Per 8 elements and
// 12 FMAs: 3 conversions + 4 activation loads (3×4) or 2 + 6 (2×6); the
// 2×2 tile needs 6 + 6.
//
// The block loop is outside the group loop: a block of the tokens (6 KiB
// at most) stays in L1 while every row group runs over it.

#include "textflag.h"
#include "hsum8_amd64.h"

// acc layout per row group ([2][12][8]float32, 768 bytes): chain c, pair p
// at acc + 384·c + 32·p. Registers: Y0-Y11 accumulators (Y(p)), Y12-Y15
// rows and tokens.

#define LOADACC(off) \
	VMOVUPS off+0(AX), Y0; \
	VMOVUPS off+32(AX), Y1; \
	VMOVUPS off+64(AX), Y2; \
	VMOVUPS off+96(AX), Y3; \
	VMOVUPS off+128(AX), Y4; \
	VMOVUPS off+160(AX), Y5; \
	VMOVUPS off+192(AX), Y6; \
	VMOVUPS off+224(AX), Y7; \
	VMOVUPS off+256(AX), Y8; \
	VMOVUPS off+288(AX), Y9; \
	VMOVUPS off+320(AX), Y10; \
	VMOVUPS off+352(AX), Y11

#define STOREACC(off) \
	VMOVUPS Y0, off+0(AX); \
	VMOVUPS Y1, off+32(AX); \
	VMOVUPS Y2, off+64(AX); \
	VMOVUPS Y3, off+96(AX); \
	VMOVUPS Y4, off+128(AX); \
	VMOVUPS Y5, off+160(AX); \
	VMOVUPS Y6, off+192(AX); \
	VMOVUPS Y7, off+224(AX); \
	VMOVUPS Y8, off+256(AX); \
	VMOVUPS Y9, off+288(AX); \
	VMOVUPS Y10, off+320(AX); \
	VMOVUPS Y11, off+352(AX)

// STEP34: 8 elements at byte offsets wo (rows from R10, R8 apart) and xo
// (tokens 0-2 from R11, R9 apart; token 3 at R12) for three rows × four
// tokens, pair p = 4·row + token.
#define STEP34(wo, xo) \
	VCVTPH2PS   wo(R10), Y12; \
	VCVTPH2PS   wo(R10)(R8*1), Y13; \
	VCVTPH2PS   wo(R10)(R8*2), Y14; \
	VMOVUPS     xo(R11), Y15; \
	VFMADD231PS Y15, Y12, Y0; \
	VFMADD231PS Y15, Y13, Y4; \
	VFMADD231PS Y15, Y14, Y8; \
	VMOVUPS     xo(R11)(R9*1), Y15; \
	VFMADD231PS Y15, Y12, Y1; \
	VFMADD231PS Y15, Y13, Y5; \
	VFMADD231PS Y15, Y14, Y9; \
	VMOVUPS     xo(R11)(R9*2), Y15; \
	VFMADD231PS Y15, Y12, Y2; \
	VFMADD231PS Y15, Y13, Y6; \
	VFMADD231PS Y15, Y14, Y10; \
	VMOVUPS     xo(R12), Y15; \
	VFMADD231PS Y15, Y12, Y3; \
	VFMADD231PS Y15, Y13, Y7; \
	VFMADD231PS Y15, Y14, Y11

// STEP25: 8 elements for two rows × five tokens (tokens 0-2 from R11,
// 3-4 from R12), pair p = 6·row + token (the accumulators of a sixth token
// stay zero).
#define STEP25(wo, xo) \
	VCVTPH2PS   wo(R10), Y12; \
	VCVTPH2PS   wo(R10)(R8*1), Y13; \
	VMOVUPS     xo(R11), Y14; \
	VFMADD231PS Y14, Y12, Y0; \
	VFMADD231PS Y14, Y13, Y6; \
	VMOVUPS     xo(R11)(R9*1), Y15; \
	VFMADD231PS Y15, Y12, Y1; \
	VFMADD231PS Y15, Y13, Y7; \
	VMOVUPS     xo(R11)(R9*2), Y14; \
	VFMADD231PS Y14, Y12, Y2; \
	VFMADD231PS Y14, Y13, Y8; \
	VMOVUPS     xo(R12), Y15; \
	VFMADD231PS Y15, Y12, Y3; \
	VFMADD231PS Y15, Y13, Y9; \
	VMOVUPS     xo(R12)(R9*1), Y14; \
	VFMADD231PS Y14, Y12, Y4; \
	VFMADD231PS Y14, Y13, Y10

// STEP26: STEP25 and the sixth token (R12 + 2·R9).
#define STEP26(wo, xo) \
	STEP25(wo, xo); \
	VMOVUPS     xo(R12)(R9*2), Y15; \
	VFMADD231PS Y15, Y12, Y5; \
	VFMADD231PS Y15, Y13, Y11

// Pass pointers: R10 rows of the group (SI), R11 tokens (DI), R12 the
// fourth token (3x4) or the fourth to sixth (2x6): DI + 3·R9.
#define PASSPTRS \
	MOVQ SI, R10; \
	MOVQ DI, R11; \
	LEAQ (DI)(R9*2), R12; \
	ADDQ R9, R12

// TILEBODY(STEP, NEXTGROUP, L) is the whole kernel; NEXTGROUP advances SI
// by the group's rows; L prefixes the labels.
// Arguments: rows+0, rb+8, ng+16, x+24, n+32, xstride+40, acc+48.
// rows+0(FP) is reused as the current block's start in the rows.
#define TILEBODY(STEP, NEXTGROUP, PF, blk, go, grp, loop0, loop1, tail, tgrp, done) \
	MOVQ rb+8(FP), R8; \
	MOVQ x+24(FP), DI; \
	MOVQ n+32(FP), BX; \
	MOVQ xstride+40(FP), R9; \
	SHRQ $4, BX; \
blk: \
	TESTQ BX, BX; \
	JZ    tail; \
	MOVQ  BX, DX; \
	CMPQ  DX, $16; \
	JLE   go; \
	MOVQ  $16, DX; \
go: \
	SUBQ DX, BX; \
	MOVQ rows+0(FP), SI; \
	MOVQ acc+48(FP), AX; \
	MOVQ ng+16(FP), CX; \
grp: \
	LOADACC(0); \
	PASSPTRS; \
	MOVQ DX, R13; \
loop0: \
	PF; \
	STEP(0, 0); \
	ADDQ $32, R10; \
	ADDQ $64, R11; \
	ADDQ $64, R12; \
	DECQ R13; \
	JNZ  loop0; \
	STOREACC(0); \
	LOADACC(384); \
	PASSPTRS; \
	MOVQ DX, R13; \
loop1: \
	STEP(16, 32); \
	ADDQ $32, R10; \
	ADDQ $64, R11; \
	ADDQ $64, R12; \
	DECQ R13; \
	JNZ  loop1; \
	STOREACC(384); \
	ADDQ $768, AX; \
	NEXTGROUP; \
	DECQ CX; \
	JNZ  grp; \
	MOVQ DX, R13; \
	SHLQ $5, R13; \
	ADDQ R13, rows+0(FP); \
	SHLQ $1, R13; \
	ADDQ R13, DI; \
	JMP  blk; \
tail: \
	MOVQ  n+32(FP), R13; \
	TESTQ $8, R13; \
	JZ    done; \
	MOVQ  rows+0(FP), SI; \
	MOVQ  acc+48(FP), AX; \
	MOVQ  ng+16(FP), CX; \
tgrp: \
	LOADACC(0); \
	PASSPTRS; \
	STEP(0, 0); \
	STOREACC(0); \
	ADDQ $768, AX; \
	NEXTGROUP; \
	DECQ CX; \
	JNZ  tgrp; \
done: \
	VZEROUPPER; \
	RET

// PF2, PF3: in the chain-0 pass, prefetch the group's rows one block
// (512 bytes) ahead, so the next block's rows stream in while this one is
// computed (the 3×4 tile at four tokens from DRAM: 1009 µs a product
// without, 670-790 with; docs/performance.md "Few-token products").
#define PF2 PREFETCHT0 512(R10); PREFETCHT0 512(R10)(R8*1)
#define PF3 PF2; PREFETCHT0 512(R10)(R8*2)
#define NEXT3 LEAQ (SI)(R8*2), SI; ADDQ R8, SI
#define NEXT2 LEAQ (SI)(R8*2), SI

// func f16Tile3x4AVX2(rows *byte, rb, ng int, x *float32, n, xstride int, acc *byte)
// ng ≥ 1 groups of three rows (group g at rows + 3g·rb, rows rb bytes
// apart) × four tokens (x + t·xstride bytes), elements [0, n) of each, n a
// multiple of 8; accumulates into acc[g] (768 bytes each, zeroed by the
// caller before the first call; a row split over several calls must be
// split at multiples of 16 elements).
TEXT ·f16Tile3x4AVX2(SB), NOSPLIT, $0-56
	TILEBODY(STEP34, NEXT3, PF3, t34blk, t34go, t34grp, t34loop0, t34loop1, t34tail, t34tgrp, t34done)

// func f16Tile2x6AVX2(rows *byte, rb, ng int, x *float32, n, xstride int, acc *byte)
// f16Tile3x4AVX2 for groups of two rows × six tokens.
TEXT ·f16Tile2x6AVX2(SB), NOSPLIT, $0-56
	TILEBODY(STEP26, NEXT2, PF2, t26blk, t26go, t26grp, t26loop0, t26loop1, t26tail, t26tgrp, t26done)

// func f16Tile2x5AVX2(rows *byte, rb, ng int, x *float32, n, xstride int, acc *byte)
// f16Tile2x6AVX2 for five tokens (acc pairs 6·row + token).
TEXT ·f16Tile2x5AVX2(SB), NOSPLIT, $0-56
	TILEBODY(STEP25, NEXT2, PF2, t25blk, t25go, t25grp, t25loop0, t25loop1, t25tail, t25tgrp, t25done)

// func f16FinStoreAVX2(acc *byte, ng, nr, nt, pt int, dst *float32, dstride int)
// For row groups g < ng of nr rows × nt tokens, accumulators at pair p =
// pt·row + token of group g (pt ≥ nt): out = HSUM8(chain0[p] +
// chain1[p]), stored at dst + token·dstride + (nr·g + row)·4 bytes; the
// accumulators are zeroed for the next token group. The reduction is
// HSUM8 (hsum8_amd64.h), as in dotF16AVX2.
TEXT ·f16FinStoreAVX2(SB), NOSPLIT, $0-56
	MOVQ   acc+0(FP), BX
	MOVQ   ng+8(FP), CX
	MOVQ   pt+32(FP), DX
	SHLQ   $5, DX
	MOVQ   dst+40(FP), DI
	MOVQ   dstride+48(FP), R9
	VXORPS Y2, Y2, Y2

fsgroup:
	MOVQ nr+16(FP), R10
	MOVQ BX, R13

fsrow:
	MOVQ nt+24(FP), R11
	MOVQ DI, R12
	MOVQ R13, AX

fstok:
	VMOVUPS      (AX), Y0
	VADDPS       384(AX), Y0, Y0
	VMOVUPS      Y2, (AX)
	VMOVUPS      Y2, 384(AX)
	HSUM8(Y0, X0, X1)
	VMOVSS       X0, (R12)
	ADDQ         $32, AX
	ADDQ         R9, R12
	DECQ         R11
	JNZ          fstok
	ADDQ         $4, DI
	ADDQ         DX, R13
	DECQ         R10
	JNZ          fsrow
	ADDQ         $768, BX
	DECQ         CX
	JNZ          fsgroup
	VZEROUPPER
	RET
