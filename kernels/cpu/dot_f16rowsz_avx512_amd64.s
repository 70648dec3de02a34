// AVX-512 F16 rows × two to eight tokens for MatMul (a step of a few
// decoding sequences, or one sequence verifying drafts): the weights
// stream from memory once for all the tokens, as in dot_f16rows_amd64.s,
// with half its instructions.
//
// Each (row, token) result is bitwise dotF16AVX2's. That kernel keeps two
// 8-lane chains: chain 0 takes elements [16j, 16j+8), chain 1
// [16j+8, 16j+16), one FMA each per step j in increasing j, a final
// 8-element tail (n%16 == 8) goes into chain 0, and the result is
// HSUM8(chain0 + chain1). Here one zmm accumulator holds both chains of a
// (row, token) pair, lanes 0-7 chain 0 and lanes 8-15 chain 1, as in the
// 4×6 tile (dot_f16tile_avx512_amd64.s): one 512-bit FMA is the two
// 256-bit FMAs of step j, and the tail is an FMA merge-masked to lanes 0-7.
//
// With both chains in one register a pair has a single dependency chain,
// so two rows run at once, from two streams: rows [r, r+h) and
// [r+h, r+2h) of the caller's range, each read in order with the decode
// kernel's prefetch (gemvF16AVX2), so a prefetch past a row's end lands in
// the stream's next row.
//
// Registers: Z(t) and Z(8+t) the accumulators of token t for the rows of
// streams A and B; Z20-Z23 converted row elements; Z24 an activation
// vector; SI, R14 the two rows; DI token 0, R12 token 3 (R9 one token
// apart, R13 three); AX stream A's outputs (DX apart per token). The pair
// count stays in the argument frame.

#include "textflag.h"

// TOK: one token's 16 activations at XA against the two rows' converted
// elements RA (stream A) and RB (stream B), into accumulators A and B.
#define TOK(XA, RA, RB, A, B) \
	VMOVUPS     XA, Z24; \
	VFMADD231PS Z24, RA, A; \
	VFMADD231PS Z24, RB, B

// TOKSn: tokens 0 to n-1 at byte offset xo of each (token t at
// DI + t·R9: DI, R12 = DI + 3·R9, R13 = 3·R9).
#define TOKS1(xo, RA, RB) TOK(xo(DI), RA, RB, Z0, Z8)
#define TOKS2(xo, RA, RB) TOKS1(xo, RA, RB); TOK(xo(DI)(R9*1), RA, RB, Z1, Z9)
#define TOKS3(xo, RA, RB) TOKS2(xo, RA, RB); TOK(xo(DI)(R9*2), RA, RB, Z2, Z10)
#define TOKS4(xo, RA, RB) TOKS3(xo, RA, RB); TOK(xo(R12), RA, RB, Z3, Z11)
#define TOKS5(xo, RA, RB) TOKS4(xo, RA, RB); TOK(xo(DI)(R9*4), RA, RB, Z4, Z12)
#define TOKS6(xo, RA, RB) TOKS5(xo, RA, RB); TOK(xo(R12)(R9*2), RA, RB, Z5, Z13)
#define TOKS7(xo, RA, RB) TOKS6(xo, RA, RB); TOK(xo(R12)(R13*1), RA, RB, Z6, Z14)
#define TOKS8(xo, RA, RB) TOKS7(xo, RA, RB); TOK(xo(R12)(R9*4), RA, RB, Z7, Z15)

// TOKK: the 8-element tail of one token into chain 0 only (K1 = lanes
// 0-7); the 256-bit load zeroes lanes 8-15 and the mask keeps chain 1.
#define TOKK(XA, A, B) \
	VMOVUPS     XA, Y24; \
	VFMADD231PS Z24, Z20, K1, A; \
	VFMADD231PS Z24, Z21, K1, B

#define TOKKS1 TOKK((DI), Z0, Z8)
#define TOKKS2 TOKKS1; TOKK((DI)(R9*1), Z1, Z9)
#define TOKKS3 TOKKS2; TOKK((DI)(R9*2), Z2, Z10)
#define TOKKS4 TOKKS3; TOKK((R12), Z3, Z11)
#define TOKKS5 TOKKS4; TOKK((DI)(R9*4), Z4, Z12)
#define TOKKS6 TOKKS5; TOKK((R12)(R9*2), Z5, Z13)
#define TOKKS7 TOKKS6; TOKK((R12)(R13*1), Z6, Z14)
#define TOKKS8 TOKKS7; TOKK((R12)(R9*4), Z7, Z15)

#define ZERO1 VPXORD Z0, Z0, Z0; VPXORD Z8, Z8, Z8
#define ZERO2 ZERO1; VPXORD Z1, Z1, Z1; VPXORD Z9, Z9, Z9
#define ZERO3 ZERO2; VPXORD Z2, Z2, Z2; VPXORD Z10, Z10, Z10
#define ZERO4 ZERO3; VPXORD Z3, Z3, Z3; VPXORD Z11, Z11, Z11
#define ZERO5 ZERO4; VPXORD Z4, Z4, Z4; VPXORD Z12, Z12, Z12
#define ZERO6 ZERO5; VPXORD Z5, Z5, Z5; VPXORD Z13, Z13, Z13
#define ZERO7 ZERO6; VPXORD Z6, Z6, Z6; VPXORD Z14, Z14, Z14
#define ZERO8 ZERO7; VPXORD Z7, Z7, Z7; VPXORD Z15, Z15, Z15

// FIN: a pair's result from accumulator A (its low halves YA, XA),
// chain0 + chain1 then the additions of HSUM8 (hsum8_amd64.h) in its
// order, with the EVEX forms so that the temporary can be X25, stored at
// OUT.
#define FIN(A, YA, XA, OUT) \
	VEXTRACTF64X4 $1, A, Y25; \
	VADDPS        Y25, YA, YA; \
	VEXTRACTF32X4 $1, YA, X25; \
	VADDPS        X25, XA, XA; \
	VMOVHLPS      XA, XA, X25; \
	VADDPS        X25, XA, XA; \
	VPSHUFD       $1, XA, X25; \
	VADDSS        X25, XA, XA; \
	VMOVSS        XA, OUT

// FINn stores the n tokens' results of both rows: stream A's at
// (AX) + t·DX, stream B's ooff bytes further (BX); CX and R14 are the
// token-3 addresses of A and B, SI = 3·DX.
#define FINADDR \
	MOVQ ooff+72(FP), BX; \
	ADDQ AX, BX; \
	LEAQ (DX)(DX*2), SI; \
	LEAQ (AX)(SI*1), CX; \
	LEAQ (BX)(SI*1), R14
#define FIN1 FINADDR; FIN(Z0, Y0, X0, (AX)); FIN(Z8, Y8, X8, (BX))
#define FIN2 FIN1; FIN(Z1, Y1, X1, (AX)(DX*1)); FIN(Z9, Y9, X9, (BX)(DX*1))
#define FIN3 FIN2; FIN(Z2, Y2, X2, (AX)(DX*2)); FIN(Z10, Y10, X10, (BX)(DX*2))
#define FIN4 FIN3; FIN(Z3, Y3, X3, (CX)); FIN(Z11, Y11, X11, (R14))
#define FIN5 FIN4; FIN(Z4, Y4, X4, (AX)(DX*4)); FIN(Z12, Y12, X12, (BX)(DX*4))
#define FIN6 FIN5; FIN(Z5, Y5, X5, (CX)(DX*2)); FIN(Z13, Y13, X13, (R14)(DX*2))
#define FIN7 FIN6; FIN(Z6, Y6, X6, (CX)(SI*1)); FIN(Z14, Y14, X14, (R14)(SI*1))
#define FIN8 FIN7; FIN(Z7, Y7, X7, (CX)(DX*4)); FIN(Z15, Y15, X15, (R14)(DX*4))

// ROWSZ is the whole kernel for the token count's ZERO, TOKS, TOKKS and
// FIN. Arguments: rows+0, boff+8, np+16, rb+24, x+32, n8+40, xstride+48,
// pf+56, out+64, ooff+72, ostride+80.
#define ROWSZ(ZERO, TOKS, TOKKS, FINS) \
	MOVQ  rows+0(FP), R8; \
	MOVQ  rb+24(FP), R10; \
	MOVQ  xstride+48(FP), R9; \
	LEAQ  (R9)(R9*2), R13; \
	MOVQ  pf+56(FP), R11; \
	MOVQ  out+64(FP), AX; \
	MOVQ  ostride+80(FP), DX; \
	MOVQ  $0xFF, BX; \
	KMOVW BX, K1; \
pair: \
	MOVQ R8, SI; \
	MOVQ boff+8(FP), R14; \
	ADDQ R8, R14; \
	MOVQ x+32(FP), DI; \
	LEAQ (DI)(R13*1), R12; \
	MOVQ n8+40(FP), CX; \
	ZERO; \
	CMPQ CX, $32; \
	JLT  step16; \
loop32: \
	PREFETCHT0 (SI)(R11*1); \
	PREFETCHT0 (R14)(R11*1); \
	VCVTPH2PS  (SI), Z20; \
	VCVTPH2PS  (R14), Z21; \
	VCVTPH2PS  32(SI), Z22; \
	VCVTPH2PS  32(R14), Z23; \
	TOKS(0, Z20, Z21); \
	TOKS(64, Z22, Z23); \
	ADDQ $64, SI; \
	ADDQ $64, R14; \
	ADDQ $128, DI; \
	ADDQ $128, R12; \
	SUBQ $32, CX; \
	CMPQ CX, $32; \
	JGE  loop32; \
step16: \
	CMPQ      CX, $16; \
	JLT       tail; \
	VCVTPH2PS (SI), Z20; \
	VCVTPH2PS (R14), Z21; \
	TOKS(0, Z20, Z21); \
	ADDQ      $32, SI; \
	ADDQ      $32, R14; \
	ADDQ      $64, DI; \
	ADDQ      $64, R12; \
	SUBQ      $16, CX; \
tail: \
	CMPQ      CX, $8; \
	JLT       done; \
	VCVTPH2PS (SI), Y20; \
	VCVTPH2PS (R14), Y21; \
	TOKKS; \
done: \
	FINS; \
	ADDQ $4, AX; \
	ADDQ R10, R8; \
	DECQ np+16(FP); \
	JNZ  pair; \
	VZEROUPPER; \
	RET

// func f16RowsZ2AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)
// For p < np (np ≥ 1) and tokens t < 2, with A = rows + p·rb and
// B = A + boff: out + t·ostride + 4p (bytes) = dotF16AVX2(A, x + t·xstride, n8)
// and the same address + ooff = dotF16AVX2(B, ...). n8 is a multiple of
// 8; the rows are read with a prefetch pf bytes ahead.
TEXT ·f16RowsZ2AVX512(SB), NOSPLIT, $0-88
	ROWSZ(ZERO2, TOKS2, TOKKS2, FIN2)

// func f16RowsZ3AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)
// f16RowsZ2AVX512 for three tokens.
TEXT ·f16RowsZ3AVX512(SB), NOSPLIT, $0-88
	ROWSZ(ZERO3, TOKS3, TOKKS3, FIN3)

// func f16RowsZ4AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)
// f16RowsZ2AVX512 for four tokens.
TEXT ·f16RowsZ4AVX512(SB), NOSPLIT, $0-88
	ROWSZ(ZERO4, TOKS4, TOKKS4, FIN4)

// func f16RowsZ5AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)
// f16RowsZ2AVX512 for five tokens.
TEXT ·f16RowsZ5AVX512(SB), NOSPLIT, $0-88
	ROWSZ(ZERO5, TOKS5, TOKKS5, FIN5)

// func f16RowsZ6AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)
// f16RowsZ2AVX512 for six tokens.
TEXT ·f16RowsZ6AVX512(SB), NOSPLIT, $0-88
	ROWSZ(ZERO6, TOKS6, TOKKS6, FIN6)

// func f16RowsZ7AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)
// f16RowsZ2AVX512 for seven tokens.
TEXT ·f16RowsZ7AVX512(SB), NOSPLIT, $0-88
	ROWSZ(ZERO7, TOKS7, TOKKS7, FIN7)

// func f16RowsZ8AVX512(rows *byte, boff, np, rb int, x *float32, n8, xstride, pf int, out *float32, ooff, ostride int)
// f16RowsZ2AVX512 for eight tokens.
TEXT ·f16RowsZ8AVX512(SB), NOSPLIT, $0-88
	ROWSZ(ZERO8, TOKS8, TOKKS8, FIN8)
