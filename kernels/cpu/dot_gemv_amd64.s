// Decode (one token) kernels for Q4_0 and Q8_0 weights: groups of 8
// contiguous rows, one row per lane (the float operations of gemvQ4_0x8AVX2
// / gemvQ8_0x8AVX2 in dot_blk_amd64.s, looped over groups), with linear
// software prefetch ahead. Per (row, token) pair they do exactly the canonical
// arithmetic of blkDotRef (dot_blk.go): the exact integer block sum I_b,
// then acc = fma(dw_b·dx_b, float32(I_b), acc) over blocks in order; lane r
// of the accumulator is row r's chain, so the 8 chains run side by side
// (one vector FMA per block for 8 rows) instead of one latency-bound chain
// per row. Bitwise equal to gemv1Q4_0AVX2 / gemv1Q8_0AVX2 (TestGemv8).
//
// Prefetch: the 8 rows of a group are contiguous (8·rb bytes), read in nb
// steps of 8 blocks (one per row). Step s prefetches the 8·(block bytes) at
// relative position s of the region pf bytes ahead of the group, so a
// distance of 8·rb prefetches the next group as the current one is read,
// at the rate it is consumed (the hardware prefetchers stop at 4 KiB pages
// and do not follow 8 interleaved streams well). Two blocks per loop step.

#include "textflag.h"
#include "gemv8_amd64.h"

DATA gx0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA gx0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA gx0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA gx0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL gx0f<>(SB), RODATA|NOPTR, $32

DATA gones16<>+0(SB)/8, $0x0001000100010001
DATA gones16<>+8(SB)/8, $0x0001000100010001
DATA gones16<>+16(SB)/8, $0x0001000100010001
DATA gones16<>+24(SB)/8, $0x0001000100010001
GLOBL gones16<>(SB), RODATA|NOPTR, $32

// W80(mw, T): Q8_0 block of a row at mw (32 signed bytes) against the
// activation block in Y12 -> int32 x8 in T. Uses Y5.
#define W80(mw, T) \
	VMOVDQU    mw, Y5; \
	VPSIGNB    Y5, Y12, T; \
	VPSIGNB    Y5, Y5, Y5; \
	VPMADDUBSW T, Y5, T; \
	VPMADDWD   Y13, T, T

// W80ROWS(o): W80 for the block at offset o of the 8 rows (SI + r·R8;
// R9 = 3·R8, R10 = SI + 4·R8) -> Y0-Y4, Y6, Y7, Y9, HADD8's inputs.
#define W80ROWS(o) \
	W80(o+2(SI), Y0); \
	W80(o+2(SI)(R8*1), Y1); \
	W80(o+2(SI)(R8*2), Y2); \
	W80(o+2(SI)(R9*1), Y3); \
	W80(o+2(R10), Y4); \
	W80(o+2(R10)(R8*1), Y6); \
	W80(o+2(R10)(R8*2), Y7); \
	W80(o+2(R10)(R9*1), Y9)

// T40(V, k, qo): V holds bytes 4k..4k+3 of the 8 rows' nibbles (lane r =
// row r): low nibbles are elements 4k..4k+3, high nibbles 16+4k..16+4k+3;
// their pair products with the broadcast activations at qo(DI) are added
// to the int16 sums in Y12. Uses Y5, Y10.
#define T40(V, k, qo) \
	VPSRLW       $4, V, Y5; \
	VPAND        Y15, V, V; \
	VPAND        Y15, Y5, Y5; \
	VPBROADCASTD 4*k+qo(DI), Y10; \
	VPMADDUBSW   Y10, V, V; \
	VPBROADCASTD 16+4*k+qo(DI), Y10; \
	VPMADDUBSW   Y10, Y5, Y5; \
	VPADDW       V, Y12, Y12; \
	VPADDW       Y5, Y12, Y12

// BLK40(o, qo, do): the block at offset o of the 8 rows against the
// activation block at qo(DI) (dx at do(DX), 8·Σq at do(BX)), then
// Y8 = fma(dw·dx, I_b, Y8), lane r = row r. The rows' 16 bytes of nibbles
// are transposed by dwords (VPUNPCK), so that VPMADDUBSW against broadcast
// activation dwords leaves each row's pair sums in its own lane: no
// horizontal sums. The 8 int16 pair sums of a lane are each ≤ 2·15·127 in
// magnitude, so their total stays below 2^15; one VPMADDWD widens them to
// the exact block sums I_b (+ 8·Σq, subtracted).
#define BLK40(o, qo, do) \
	VMOVDQU      o+2(SI), X0; \
	VINSERTI128  $1, o+2(R10), Y0, Y0; \
	VMOVDQU      o+2(SI)(R8*1), X1; \
	VINSERTI128  $1, o+2(R10)(R8*1), Y1, Y1; \
	VMOVDQU      o+2(SI)(R8*2), X2; \
	VINSERTI128  $1, o+2(R10)(R8*2), Y2, Y2; \
	VMOVDQU      o+2(SI)(R9*1), X3; \
	VINSERTI128  $1, o+2(R10)(R9*1), Y3, Y3; \
	VPUNPCKLDQ   Y1, Y0, Y4; \
	VPUNPCKHDQ   Y1, Y0, Y6; \
	VPUNPCKLDQ   Y3, Y2, Y7; \
	VPUNPCKHDQ   Y3, Y2, Y9; \
	VPUNPCKLQDQ  Y7, Y4, Y0; \
	VPUNPCKHQDQ  Y7, Y4, Y1; \
	VPUNPCKLQDQ  Y9, Y6, Y2; \
	VPUNPCKHQDQ  Y9, Y6, Y3; \
	VPXOR        Y12, Y12, Y12; \
	T40(Y0, 0, qo); \
	T40(Y1, 1, qo); \
	T40(Y2, 2, qo); \
	T40(Y3, 3, qo); \
	VPMADDWD     Y13, Y12, Y0; \
	VPBROADCASTD do(BX), Y11; \
	VPSUBD       Y11, Y0, Y0; \
	VCVTDQ2PS    Y0, Y0; \
	SCALES8(o); \
	VBROADCASTSS do(DX), Y11; \
	VMULPS       Y11, Y10, Y10; \
	VFMADD231PS  Y0, Y10, Y8

// Q8_0 decode of two or three tokens: each group of 8 rows is read from
// memory once for all the tokens (the second and third token re-read the
// block's rows from L1), every token with gemv8Q8_0AVX2's float
// operations: per (row, token) bitwise its result (TestGemv8Q8_0Tokens).
// Token t's activations at DI + t·BX (qs) and DX + t·R12 (d); the
// accumulators are Y8, Y14 and Y15.

// TOK80(o, q, dd, ACC): one Q8_0 block at offset o of the 8 rows against
// the activation block at q (dx at dd) into ACC, as BLK80 with the rows'
// scales already in Y10 (kept). Clobbers Y0-Y7, Y9, Y11, Y12.
#define TOK80(o, q, dd, ACC) \
	VMOVDQU      q, Y12; \
	W80ROWS(o); \
	HADD8; \
	VCVTDQ2PS    Y0, Y0; \
	VBROADCASTSS dd, Y11; \
	VMULPS       Y11, Y10, Y11; \
	VFMADD231PS  Y0, Y11, ACC

#define BLK80x2(o, qo, do) \
	SCALES8(o); \
	TOK80(o, qo(DI), do(DX), Y8); \
	TOK80(o, qo(DI)(BX*1), do(DX)(R12*1), Y14)

#define BLK80x3(o, qo, do) \
	BLK80x2(o, qo, do); \
	TOK80(o, qo(DI)(BX*2), do(DX)(R12*2), Y15)

#define STORE80x2 \
	VMOVUPS Y8, (AX); \
	VMOVUPS Y14, (AX)(CX*1)

#define STORE80x3 STORE80x2; VMOVUPS Y15, (AX)(CX*2)

// GEMV80N(BLK, STORE): gemv8Q8_0AVX2's loop for several tokens, one block
// per step. Arguments: rows+0, ngroups+8, qs+16, d+24, nb+32, pf+40,
// out+48, qstride+56, dstride+64, ostride+72 (bytes).
#define GEMV80N(BLK, STORE) \
	MOVQ    rows+0(FP), SI; \
	MOVQ    ngroups+8(FP), R13; \
	MOVQ    nb+32(FP), R8; \
	MOVQ    pf+40(FP), R11; \
	MOVQ    out+48(FP), AX; \
	MOVQ    qstride+56(FP), BX; \
	MOVQ    dstride+64(FP), R12; \
	MOVQ    R8, R9; \
	SHLQ    $5, R8; \
	LEAQ    (R8)(R9*2), R8; \
	LEAQ    (R8)(R8*2), R9; \
	ADDQ    SI, R11; \
	VMOVDQU gones16<>(SB), Y13; \
	TESTQ   R13, R13; \
	JLE     end; \
group: \
	MOVQ   qs+16(FP), DI; \
	MOVQ   d+24(FP), DX; \
	MOVQ   nb+32(FP), CX; \
	LEAQ   (SI)(R8*4), R10; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y14, Y14, Y14; \
	VXORPS Y15, Y15, Y15; \
loop: \
	PREFETCHT0 (R11); \
	PREFETCHT0 64(R11); \
	PREFETCHT0 128(R11); \
	PREFETCHT0 192(R11); \
	PREFETCHT0 256(R11); \
	BLK(0, 0, 0); \
	ADDQ       $34, SI; \
	ADDQ       $34, R10; \
	ADDQ       $272, R11; \
	ADDQ       $32, DI; \
	ADDQ       $4, DX; \
	DECQ       CX; \
	JNZ        loop; \
	MOVQ    ostride+72(FP), CX; \
	STORE; \
	ADDQ    $32, AX; \
	LEAQ    (R10)(R9*1), SI; \
	DECQ    R13; \
	JNZ     group; \
end: \
	VZEROUPPER; \
	RET


// func gemv8Q4_0AVX2(rows *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)
// Groups of 8 contiguous Q4_0 rows (18·nb bytes each) against one token;
// out[8g+r] is row r of group g.
TEXT ·gemv8Q4_0AVX2(SB), NOSPLIT, $0-64
	MOVQ    rows+0(FP), SI
	MOVQ    ngroups+8(FP), R13
	MOVQ    nb+40(FP), R8
	MOVQ    pf+48(FP), R11
	MOVQ    out+56(FP), AX
	LEAQ    (R8)(R8*8), R8
	ADDQ    R8, R8
	LEAQ    (R8)(R8*2), R9
	ADDQ    SI, R11
	VMOVDQU gx0f<>(SB), Y15
	VMOVDQU gones16<>(SB), Y13
	TESTQ   R13, R13
	JLE     b40end

b40group:
	MOVQ   qs+16(FP), DI
	MOVQ   d+24(FP), DX
	MOVQ   s8+32(FP), BX
	MOVQ   nb+40(FP), CX
	LEAQ   (SI)(R8*4), R10
	VXORPS Y8, Y8, Y8
	CMPQ   CX, $2
	JLT    b40tail

b40loop2:
	PREFETCHT0   (R11)
	PREFETCHT0   64(R11)
	PREFETCHT0   128(R11)
	BLK40(0, 0, 0)
	PREFETCHT0   144(R11)
	PREFETCHT0   208(R11)
	PREFETCHT0   272(R11)
	BLK40(18, 32, 4)
	ADDQ         $36, SI
	ADDQ         $36, R10
	ADDQ         $288, R11
	ADDQ         $64, DI
	ADDQ         $8, DX
	ADDQ         $8, BX
	SUBQ         $2, CX
	CMPQ         CX, $2
	JGE          b40loop2

b40tail:
	TESTQ CX, CX
	JLE   b40store
	PREFETCHT0   (R11)
	PREFETCHT0   64(R11)
	PREFETCHT0   128(R11)
	BLK40(0, 0, 0)
	ADDQ         $18, SI
	ADDQ         $18, R10
	ADDQ         $144, R11

b40store:
	VMOVUPS Y8, (AX)
	ADDQ    $32, AX
	LEAQ    (R10)(R9*1), SI
	DECQ    R13
	JNZ     b40group

b40end:
	VZEROUPPER
	RET

// BLK80(o, qo, do): BLK40 for Q8_0 blocks (no 8·Σq term).
#define BLK80(o, qo, do) \
	VMOVDQU      qo(DI), Y12; \
	W80ROWS(o); \
	HADD8; \
	VCVTDQ2PS    Y0, Y0; \
	SCALES8(o); \
	VBROADCASTSS do(DX), Y11; \
	VMULPS       Y11, Y10, Y10; \
	VFMADD231PS  Y0, Y10, Y8

// func gemv8Q8_0AVX2(rows *byte, ngroups int, qs *int8, d *float32, nb, pf int, out *float32)
// gemv8Q4_0AVX2 for Q8_0 rows (34·nb bytes each).
TEXT ·gemv8Q8_0AVX2(SB), NOSPLIT, $0-56
	MOVQ    rows+0(FP), SI
	MOVQ    ngroups+8(FP), R13
	MOVQ    nb+32(FP), R8
	MOVQ    pf+40(FP), R11
	MOVQ    out+48(FP), AX
	MOVQ    R8, R9
	SHLQ    $5, R8
	LEAQ    (R8)(R9*2), R8    // rb = 34·nb
	LEAQ    (R8)(R8*2), R9    // 3·rb
	ADDQ    SI, R11           // prefetch pointer
	VMOVDQU gones16<>(SB), Y13
	TESTQ   R13, R13
	JLE     b80end

b80group:
	MOVQ   qs+16(FP), DI
	MOVQ   d+24(FP), DX
	MOVQ   nb+32(FP), CX
	LEAQ   (SI)(R8*4), R10
	VXORPS Y8, Y8, Y8
	CMPQ   CX, $2
	JLT    b80tail

b80loop2:
	PREFETCHT0   (R11)
	PREFETCHT0   64(R11)
	PREFETCHT0   128(R11)
	PREFETCHT0   192(R11)
	PREFETCHT0   256(R11)
	BLK80(0, 0, 0)
	PREFETCHT0   272(R11)
	PREFETCHT0   336(R11)
	PREFETCHT0   400(R11)
	PREFETCHT0   464(R11)
	PREFETCHT0   528(R11)
	BLK80(34, 32, 4)
	ADDQ         $68, SI
	ADDQ         $68, R10
	ADDQ         $544, R11
	ADDQ         $64, DI
	ADDQ         $8, DX
	SUBQ         $2, CX
	CMPQ         CX, $2
	JGE          b80loop2

b80tail:
	TESTQ CX, CX
	JLE   b80store
	PREFETCHT0   (R11)
	PREFETCHT0   64(R11)
	PREFETCHT0   128(R11)
	PREFETCHT0   192(R11)
	PREFETCHT0   256(R11)
	BLK80(0, 0, 0)
	ADDQ         $34, SI
	ADDQ         $34, R10
	ADDQ         $272, R11

b80store:
	VMOVUPS Y8, (AX)
	ADDQ    $32, AX
	LEAQ    (R10)(R9*1), SI   // SI moved rb: next group at SI + 7·rb
	DECQ    R13
	JNZ     b80group

b80end:
	VZEROUPPER
	RET

// func readAVX2(p *byte, n, pf int) uint64
// Reads n bytes (a multiple of 128, n ≥ 128) at p with 32-byte loads,
// prefetching pf bytes ahead: the single-thread read bandwidth reference
// of BenchmarkDecodeDRAM.
TEXT ·readAVX2(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ pf+16(FP), R11
	ADDQ SI, R11
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
rloop:
	PREFETCHT0 (R11)
	PREFETCHT0 64(R11)
	VPADDQ (SI), Y0, Y0
	VPADDQ 32(SI), Y1, Y1
	VPADDQ 64(SI), Y0, Y0
	VPADDQ 96(SI), Y1, Y1
	ADDQ $128, SI
	ADDQ $128, R11
	SUBQ $128, CX
	JG rloop
	VPADDQ Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSHUFD $0x4E, X0, X1
	VPADDQ X1, X0, X0
	VMOVQ X0, AX
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET

// func gemv8Q8_0x2AVX2(rows *byte, ngroups int, qs *int8, d *float32, nb, pf int, out *float32, qstride, dstride, ostride int)
// gemv8Q8_0AVX2 for two tokens (nb ≥ 1): token t's activations at qs +
// t·qstride and d + t·dstride, its 8·ngroups results at out + t·ostride.
TEXT ·gemv8Q8_0x2AVX2(SB), NOSPLIT, $0-80
	GEMV80N(BLK80x2, STORE80x2)

// func gemv8Q8_0x3AVX2(rows *byte, ngroups int, qs *int8, d *float32, nb, pf int, out *float32, qstride, dstride, ostride int)
// gemv8Q8_0x2AVX2 for three tokens.
TEXT ·gemv8Q8_0x3AVX2(SB), NOSPLIT, $0-80
	GEMV80N(BLK80x3, STORE80x3)
