// AVX2 + FMA + F16C dot kernels: one encoded weight row against one token.
// Twins: dot_go.go / dot_kquant_go.go (compared in dot_amd64_test.go).
//
// Every kernel keeps 8 float32 lanes: per block, the exact int32 lane sums
// are converted to float32 and multiply-added with the block scale; the
// lanes are summed at the end in a fixed order. The arithmetic for one
// (row, token) never depends on other rows or tokens.

#include "textflag.h"
#include "hsum8_amd64.h"

DATA c0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA c0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA c0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA c0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL c0f<>(SB), RODATA|NOPTR, $32

// int16 ones (for VPMADDWD pair sums)
DATA cones16<>+0(SB)/8, $0x0001000100010001
DATA cones16<>+8(SB)/8, $0x0001000100010001
DATA cones16<>+16(SB)/8, $0x0001000100010001
DATA cones16<>+24(SB)/8, $0x0001000100010001
GLOBL cones16<>(SB), RODATA|NOPTR, $32

// SCALE8 broadcasts F16(at m) * f32(at dp) into all 8 lanes of Y (X = low half).
#define SCALE8(m, dp, Y, X, T) \
	VPBROADCASTW m, X; \
	VCVTPH2PS    X, Y; \
	VBROADCASTSS dp, T; \
	VMULPS       T, Y, Y

// Float kernels: n is a multiple of 8 (the caller adds the tail).
// func dotF16AVX2(row *byte, x *float32, n int) float32
// Two accumulators over 16 elements, then 8 into the first; dotF16x4AVX2
// repeats exactly this per token.
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ   row+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	CMPQ   CX, $16
	JLT    f16tail

f16loop:
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   16(SI), Y5
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	CMPQ        CX, $16
	JGE         f16loop

f16tail:
	CMPQ        CX, $8
	JLT         f16done
	VCVTPH2PS   (SI), Y4
	VFMADD231PS (DI), Y4, Y0

f16done:
	VADDPS Y1, Y0, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotBF16AVX2(row *byte, x *float32, n int) float32
// dotF16AVX2's operations on BF16 weights (each widened by a shift):
// two accumulators over 16 elements, then 8 into the first. A BF16 matrix
// that load converts to F16 (PackBF16, exactly, values times 2^pow2)
// therefore gets, from every F16 kernel, 2^pow2 times these bits.
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ   row+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	CMPQ   CX, $16
	JLT    bf16tail

bf16loop:
	VPMOVZXWD   (SI), Y4
	VPMOVZXWD   16(SI), Y5
	VPSLLD      $16, Y4, Y4
	VPSLLD      $16, Y5, Y5
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	CMPQ        CX, $16
	JGE         bf16loop

bf16tail:
	CMPQ        CX, $8
	JLT         bf16done
	VPMOVZXWD   (SI), Y4
	VPSLLD      $16, Y4, Y4
	VFMADD231PS (DI), Y4, Y0

bf16done:
	VADDPS Y1, Y0, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotF32AVX2(row *byte, x *float32, n int) float32
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ   row+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ   CX, $32
	JLT    f32tail

f32loop:
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JGE         f32loop

f32tail:
	CMPQ        CX, $8
	JLT         f32done
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         f32tail

f32done:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

DATA c10<>+0(SB)/8, $0x1010101010101010
DATA c10<>+8(SB)/8, $0x1010101010101010
DATA c10<>+16(SB)/8, $0x1010101010101010
DATA c10<>+24(SB)/8, $0x1010101010101010
GLOBL c10<>(SB), RODATA|NOPTR, $32

// VPSHUFB mask spreading a broadcast uint32 so that byte j holds byte j/8.
DATA cbitshuf<>+0(SB)/8, $0x0000000000000000
DATA cbitshuf<>+8(SB)/8, $0x0101010101010101
DATA cbitshuf<>+16(SB)/8, $0x0202020202020202
DATA cbitshuf<>+24(SB)/8, $0x0303030303030303
GLOBL cbitshuf<>(SB), RODATA|NOPTR, $32

// Byte j: every bit but bit j%8 set.
DATA cbitmask<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA cbitmask<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA cbitmask<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA cbitmask<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL cbitmask<>(SB), RODATA|NOPTR, $32

// BITS32 expands the uint32 at m into 32 bytes in Y: 0xFF where bit j is set.
// Y12 must hold all ones.
#define BITS32(m, Y, X) \
	VPBROADCASTD m, Y; \
	VPSHUFB      cbitshuf<>(SB), Y, Y; \
	VPOR         cbitmask<>(SB), Y, Y; \
	VPCMPEQB     Y12, Y, Y

// NIBBLES32 loads 16 bytes at m as 32 nibbles in Y (low lane: low nibbles =
// elements 0..15, high lane: high nibbles = 16..31); T is an X temp.
#define NIBBLES32(m, Y, X, T) \
	VMOVDQU     m, X; \
	VPSRLW      $4, X, T; \
	VINSERTI128 $1, T, Y, Y; \
	VPAND       Y15, Y, Y

// func dotQ4_1AVX2(row *byte, qs *int8, d, s *float32, nb int) float32
TEXT ·dotQ4_1AVX2(SB), NOSPLIT, $0-44
	MOVQ    row+0(FP), SI
	MOVQ    qs+8(FP), DI
	MOVQ    d+16(FP), DX
	MOVQ    s+24(FP), R8
	MOVQ    nb+32(FP), CX
	VXORPS  Y0, Y0, Y0
	VXORPS  X9, X9, X9   // Σ m·s (scalar)
	VMOVDQU c0f<>(SB), Y15
	VMOVDQU cones16<>(SB), Y13
	TESTQ   CX, CX
	JLE     q41done

q41loop:
	SCALE8((SI), (DX), Y1, X1, Y3)
	NIBBLES32(4(SI), Y2, X2, X3)
	VPMADDUBSW  (DI), Y2, Y7
	VPMADDWD    Y13, Y7, Y7
	VCVTDQ2PS   Y7, Y7
	VFMADD231PS Y7, Y1, Y0
	VPBROADCASTW 2(SI), X4
	VCVTPH2PS   X4, X4
	VMOVSS      (R8), X5
	VFMADD231SS X5, X4, X9
	ADDQ        $20, SI
	ADDQ        $32, DI
	ADDQ        $4, DX
	ADDQ        $4, R8
	DECQ        CX
	JNZ         q41loop

q41done:
	HSUM8(Y0, X0, X1)
	VADDSS X9, X0, X0
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// func dotQ5_1AVX2(row *byte, qs *int8, d, s *float32, nb int) float32
TEXT ·dotQ5_1AVX2(SB), NOSPLIT, $0-44
	MOVQ     row+0(FP), SI
	MOVQ     qs+8(FP), DI
	MOVQ     d+16(FP), DX
	MOVQ     s+24(FP), R8
	MOVQ     nb+32(FP), CX
	VXORPS   Y0, Y0, Y0
	VXORPS   X9, X9, X9
	VMOVDQU  c0f<>(SB), Y15
	VMOVDQU  cones16<>(SB), Y13
	VPCMPEQB Y12, Y12, Y12
	TESTQ    CX, CX
	JLE      q51done

q51loop:
	SCALE8((SI), (DX), Y1, X1, Y3)
	NIBBLES32(8(SI), Y2, X2, X3)
	BITS32(4(SI), Y8, X8)
	VPAND        c10<>(SB), Y8, Y8
	VPOR         Y8, Y2, Y2 // 0..31
	VPMADDUBSW   (DI), Y2, Y7
	VPMADDWD     Y13, Y7, Y7
	VCVTDQ2PS    Y7, Y7
	VFMADD231PS  Y7, Y1, Y0
	VPBROADCASTW 2(SI), X4
	VCVTPH2PS    X4, X4
	VMOVSS       (R8), X5
	VFMADD231SS  X5, X4, X9
	ADDQ         $24, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	ADDQ         $4, R8
	DECQ         CX
	JNZ          q51loop

q51done:
	HSUM8(Y0, X0, X1)
	VADDSS X9, X0, X0
	VMOVSS X0, ret+40(FP)
	VZEROUPPER
	RET

// func gemvF16AVX2(rows *byte, n, rb int, x *float32, n8, pf int, out *float32)
// Decode: out[r] = dotF16AVX2(rows + r·rb, x, n8) for r < n (n ≥ 1), the
// same two accumulators and order, unrolled to 64 bytes per step with a
// software prefetch pf bytes ahead.
TEXT ·gemvF16AVX2(SB), NOSPLIT, $0-56
	MOVQ rows+0(FP), R8
	MOVQ n+8(FP), R9
	MOVQ rb+16(FP), R10
	MOVQ pf+40(FP), R11
	MOVQ out+48(FP), AX

gf16row:
	MOVQ   R8, SI
	MOVQ   x+24(FP), DI
	MOVQ   n8+32(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	CMPQ   CX, $32
	JLT    gf16step16

gf16loop32:
	PREFETCHT0  (SI)(R11*1)
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   16(SI), Y5
	VCVTPH2PS   32(SI), Y6
	VCVTPH2PS   48(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y0
	VFMADD231PS 96(DI), Y7, Y1
	ADDQ        $64, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JGE         gf16loop32

gf16step16:
	CMPQ        CX, $16
	JLT         gf16tail
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   16(SI), Y5
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX

gf16tail:
	CMPQ        CX, $8
	JLT         gf16done
	VCVTPH2PS   (SI), Y4
	VFMADD231PS (DI), Y4, Y0

gf16done:
	VADDPS Y1, Y0, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS X0, (AX)
	ADDQ   $4, AX
	ADDQ   R10, R8
	DECQ   R9
	JNZ    gf16row
	VZEROUPPER
	RET
