// AVX-512 F16 rows × two to five tokens for MatMul (a step of a few
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
// Registers: Z(t) and Z(5+t) the accumulators of token t for the rows of
// streams A and B; Z20-Z23 converted row elements; Z24 an activation
// vector; SI, R14 the two rows; DI tokens 0-2 (R9 apart), R12 tokens 3-4;
// AX stream A's outputs (DX apart per token).

#include "textflag.h"
#include "hsum8_amd64.h"

// TOK: one token's 16 activations at XA against the two rows' converted
// elements RA (stream A) and RB (stream B), into accumulators A and B.
#define TOK(XA, RA, RB, A, B) \
	VMOVUPS     XA, Z24; \
	VFMADD231PS Z24, RA, A; \
	VFMADD231PS Z24, RB, B

#define TOKS2(xo, RA, RB) \
	TOK(xo(DI), RA, RB, Z0, Z5); \
	TOK(xo(DI)(R9*1), RA, RB, Z1, Z6)
#define TOKS3(xo, RA, RB) TOKS2(xo, RA, RB); TOK(xo(DI)(R9*2), RA, RB, Z2, Z7)
#define TOKS4(xo, RA, RB) TOKS3(xo, RA, RB); TOK(xo(R12), RA, RB, Z3, Z8)
#define TOKS5(xo, RA, RB) TOKS4(xo, RA, RB); TOK(xo(R12)(R9*1), RA, RB, Z4, Z9)

// TOKK: the 8-element tail of one token into chain 0 only (K1 = lanes
// 0-7); the 256-bit load zeroes lanes 8-15 and the mask keeps chain 1.
#define TOKK(XA, A, B) \
	VMOVUPS     XA, Y24; \
	VFMADD231PS Z24, Z20, K1, A; \
	VFMADD231PS Z24, Z21, K1, B

#define TOKKS2 TOKK((DI), Z0, Z5); TOKK((DI)(R9*1), Z1, Z6)
#define TOKKS3 TOKKS2; TOKK((DI)(R9*2), Z2, Z7)
#define TOKKS4 TOKKS3; TOKK((R12), Z3, Z8)
#define TOKKS5 TOKKS4; TOKK((R12)(R9*1), Z4, Z9)

#define ZERO2 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6
#define ZERO3 ZERO2; VPXORD Z2, Z2, Z2; VPXORD Z7, Z7, Z7
#define ZERO4 ZERO3; VPXORD Z3, Z3, Z3; VPXORD Z8, Z8, Z8
#define ZERO5 ZERO4; VPXORD Z4, Z4, Z4; VPXORD Z9, Z9, Z9

// FIN: a pair's result from accumulator A (its low halves YA, XA),
// chain0 + chain1 then HSUM8 as dotF16AVX2, stored at OUT.
#define FIN(A, YA, XA, OUT) \
	VEXTRACTF64X4 $1, A, Y25; \
	VADDPS        Y25, YA, YA; \
	HSUM8(YA, XA, X15); \
	VMOVSS        XA, OUT

// FINn stores the n tokens' results of both rows: stream A's at
// (AX) + t·DX, stream B's ooff bytes further (BX).
#define FIN2 \
	MOVQ ooff+72(FP), BX; \
	ADDQ AX, BX; \
	FIN(Z0, Y0, X0, (AX)); \
	FIN(Z5, Y5, X5, (BX)); \
	FIN(Z1, Y1, X1, (AX)(DX*1)); \
	FIN(Z6, Y6, X6, (BX)(DX*1))
#define FIN3 FIN2; FIN(Z2, Y2, X2, (AX)(DX*2)); FIN(Z7, Y7, X7, (BX)(DX*2))
#define FIN4 \
	FIN3; \
	LEAQ (AX)(DX*2), CX; \
	ADDQ DX, CX; \
	LEAQ (BX)(DX*2), SI; \
	ADDQ DX, SI; \
	FIN(Z3, Y3, X3, (CX)); \
	FIN(Z8, Y8, X8, (SI))
#define FIN5 FIN4; FIN(Z4, Y4, X4, (CX)(DX*1)); FIN(Z9, Y9, X9, (SI)(DX*1))

// ROWSZ is the whole kernel for the token count's ZERO, TOKS, TOKKS and
// FIN. Arguments: rows+0, boff+8, np+16, rb+24, x+32, n8+40, xstride+48,
// pf+56, out+64, ooff+72, ostride+80.
#define ROWSZ(ZERO, TOKS, TOKKS, FINS) \
	MOVQ  rows+0(FP), R8; \
	MOVQ  np+16(FP), R13; \
	MOVQ  rb+24(FP), R10; \
	MOVQ  xstride+48(FP), R9; \
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
	LEAQ (DI)(R9*2), R12; \
	ADDQ R9, R12; \
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
	DECQ R13; \
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
