//go:build ignore

// attn_z_gen.go writes attn_z_avx512_amd64.s (go run attn_z_gen.go): the
// AVX-512 decode attention kernels for g = 2, 4 and 8 query heads per KV
// head, P = 16/g positions per vector (attn_z_amd64.go).
package main

import (
	"fmt"
	"os"

	"oengine/kernels/cpu/internal/asmgen"
)

var b asmgen.File

// groups are the head counts g the kernels are written for.
var groups = []int{2, 4, 8}

// bcast is the instruction that broadcasts p float32 values to every
// p-lane unit of a zmm (all of them AVX-512 F).
func bcast(p int) string {
	return map[int]string{2: "VBROADCASTSD", 4: "VBROADCASTF32X4", 8: "VBROADCASTF64X4"}[p]
}

func label(s string, g int) { fmt.Fprintf(&b, "%s%d:\n", s, g) }

// expKernel: attnExpZ{g}.
func expKernel(g int) {
	p := 16 / g
	fmt.Fprintf(&b, "\n// func attnExpZ%d(scores *float32, nvec int, m *float32, sums *float64)\n", g)
	fmt.Fprintf(&b, "// attnExpGo for %d heads, %d positions per vector: for the first\n", g, p)
	fmt.Fprintf(&b, "// 16·nvec scores s (position-major, [n][%d]): e = expAttn(s − m[h]) in\n", g)
	fmt.Fprintf(&b, "// place, sums[h] += float64(e) in order of position (kept in\n// registers, added to the sums passed in).\n")
	fmt.Fprintf(&b, "TEXT ·attnExpZ%d(SB), NOSPLIT, $0-32\n", g)
	b.I("MOVQ scores+0(FP), SI")
	b.I("MOVQ nvec+8(FP), CX")
	b.I("MOVQ m+16(FP), R8")
	b.I("MOVQ sums+24(FP), R9")
	b.I("%s (R8), Z15", bcast(g)) // m[0..g) in every g-lane unit
	sum := map[int]string{2: "X6", 4: "Y6", 8: "Z6"}[g]
	b.I("VMOVUPD (R9), %s", sum)
	b.I("TESTQ CX, CX")
	b.I("JZ xzdone%d", g)
	label("xzvec", g)
	b.I("VMOVUPS (SI), Z0")
	b.I("VSUBPS Z15, Z0, Z0")
	b.I("EXPZ")
	b.I("VMOVUPS Z0, (SI)")
	// Lanes 0-7 then 8-15, each widened to eight float64 (Z1) and added
	// g at a time in position order.
	for half := 0; half < 2; half++ {
		if half == 0 {
			b.I("VCVTPS2PD Y0, Z1")
		} else {
			b.I("VEXTRACTF64X4 $1, Z0, Y2")
			b.I("VCVTPS2PD Y2, Z1")
		}
		switch g {
		case 8:
			b.I("VADDPD Z1, Z6, Z6")
		case 4:
			b.I("VADDPD Y1, Y6, Y6")
			b.I("VEXTRACTF64X4 $1, Z1, Y3")
			b.I("VADDPD Y3, Y6, Y6")
		case 2:
			b.I("VADDPD X1, X6, X6")
			for k := 1; k < 4; k++ {
				b.I("VEXTRACTF32X4 $%d, Z1, X3", k)
				b.I("VADDPD X3, X6, X6")
			}
		}
	}
	b.I("ADDQ $64, SI")
	b.I("DECQ CX")
	b.I("JNZ xzvec%d", g)
	label("xzdone", g)
	b.I("VMOVUPD %s, (R9)", sum)
	b.I("VZEROUPPER")
	b.I("RET")
}

// cvtKernel: attnCvtInterleave{p}, p rows interleaved.
func cvtKernel(p int) {
	fmt.Fprintf(&b, "\n// func attnCvtInterleave%d(src *uint16, sstride int, dst *float32, nrows, w int, idx *int32)\n", p)
	fmt.Fprintf(&b, "// Widens nrows F16 rows of w values (a multiple of 16), sstride values\n")
	fmt.Fprintf(&b, "// apart, into groups of %d rows: row %d·m+i becomes dst[m·%d·w + %d·j + i] =\n", p, p, p, p)
	fmt.Fprintf(&b, "// float32(src[(%d·m+i)·sstride + j]); rows past nrows in the last group\n// are zeros. idx: attnGroupIdx.\n", p)
	fmt.Fprintf(&b, "TEXT ·attnCvtInterleave%d(SB), NOSPLIT, $0-48\n", p)
	b.I("MOVQ src+0(FP), SI")
	b.I("MOVQ sstride+8(FP), R8")
	b.I("MOVQ dst+16(FP), DI")
	b.I("MOVQ nrows+24(FP), CX")
	b.I("MOVQ w+32(FP), DX")
	b.I("MOVQ idx+40(FP), AX")
	b.I("VMOVDQU32 (AX), Z28")    // float pairs, low
	b.I("VMOVDQU32 64(AX), Z29")  // float pairs, high
	b.I("VMOVDQU32 128(AX), Z30") // qword pairs, low (p ≥ 4)
	b.I("VMOVDQU32 192(AX), Z31") // qword pairs, high
	b.I("VMOVDQU32 256(AX), Z20") // 128-bit pairs, low (p = 8)
	b.I("VMOVDQU32 320(AX), Z21") // 128-bit pairs, high
	b.I("SHLQ $1, R8")            // row bytes apart
	b.I("LEAQ (R8)(R8*2), R12")
	b.I("SHRQ $4, DX") // 16-value chunks per row
	b.I("TESTQ DX, DX")
	b.I("JZ cgdone%d", p)
	label("cggroup", p)
	b.I("TESTQ CX, CX")
	b.I("JLE cgdone%d", p)
	b.I("MOVQ SI, R9")
	b.I("LEAQ (SI)(R8*4), R10")
	b.I("MOVQ DX, BX")
	label("cgchunk", p)
	// Row r's 16 values of the chunk into Z(r); a row past nrows is zero.
	for r := 0; r < p; r++ {
		addr := asmgen.TokAddr([2]string{"R9", "R10"}, "R8", "R12", r, 0)
		if r == 0 {
			b.I("VCVTPH2PS %s, Z0", addr)
			continue
		}
		b.I("CMPQ CX, $%d", r+1)
		b.I("JGE 3(PC)")
		b.I("VPXORD Z%d, Z%d, Z%d", r, r, r)
		b.I("JMP 2(PC)")
		b.I("VCVTPH2PS %s, Z%d", addr, r)
	}
	// Stage 1: rows 2k, 2k+1 into float pairs Z(8+2k) (values 0-7) and
	// Z(9+2k) (8-15).
	for k := 0; k < p/2; k++ {
		b.I("VMOVAPS Z%d, Z%d", 2*k, 8+2*k)
		b.I("VMOVAPS Z%d, Z%d", 2*k, 9+2*k)
		b.I("VPERMT2PS Z%d, Z28, Z%d", 2*k+1, 8+2*k)
		b.I("VPERMT2PS Z%d, Z29, Z%d", 2*k+1, 9+2*k)
	}
	out := []int{}
	switch p {
	case 2:
		out = []int{8, 9}
	case 4, 8:
		// Stage 2: pairs (ab, cd) interleaved as qwords: Z(16+..) hold
		// four rows per value, values 0-3, 4-7, 8-11, 12-15.
		for q := 0; q < p/4; q++ {
			ab, cd := 8+4*q, 10+4*q
			for h := 0; h < 2; h++ { // values 0-7 / 8-15
				lo, hi := 16+8*q+2*h, 17+8*q+2*h
				b.I("VMOVAPS Z%d, Z%d", ab+h, lo)
				b.I("VMOVAPS Z%d, Z%d", ab+h, hi)
				b.I("VPERMT2PD Z%d, Z30, Z%d", cd+h, lo)
				b.I("VPERMT2PD Z%d, Z31, Z%d", cd+h, hi)
			}
		}
		out = []int{16, 17, 18, 19}
		if p == 8 {
			// Stage 3: the two four-row sets interleaved as 128-bit units.
			out = nil
			for k := 0; k < 4; k++ {
				a, e := 16+k, 24+k
				lo, hi := 8+2*k, 9+2*k
				b.I("VMOVAPS Z%d, Z%d", a, lo)
				b.I("VMOVAPS Z%d, Z%d", a, hi)
				b.I("VPERMT2PD Z%d, Z20, Z%d", e, lo)
				b.I("VPERMT2PD Z%d, Z21, Z%d", e, hi)
				out = append(out, lo, hi)
			}
		}
	}
	for i, z := range out {
		b.I("VMOVUPS Z%d, %d(DI)", z, 64*i)
	}
	b.I("ADDQ $32, R9")
	b.I("ADDQ $32, R10")
	b.I("ADDQ $%d, DI", 64*len(out))
	b.I("DECQ BX")
	b.I("JNZ cgchunk%d", p)
	b.I("LEAQ (SI)(R8*%d), SI", min(p, 8))
	b.I("SUBQ $%d, CX", p)
	b.I("JMP cggroup%d", p)
	label("cgdone", p)
	b.I("VZEROUPPER")
	b.I("RET")
}

// scoresKernel: attnScoresZ{g}.
func scoresKernel(g int) {
	p := 16 / g
	fmt.Fprintf(&b, "\n// func attnScoresZ%d(k *float32, qt *float32, ngroups, dim, ks int, out *float32, perm *int32, pf *byte, pflines, pfstep int)\n", g)
	fmt.Fprintf(&b, "// Scores of %d heads over groups of %d K rows (attnCvtInterleave%d's layout,\n", g, p, p)
	fmt.Fprintf(&b, "// ks values apart): out[(%d·m+i)·%d + h] = Σ_j q[h][j]·k[%d·m+i][j], one FMA\n", p, g, p)
	fmt.Fprintf(&b, "// chain in order of j from 0 (attnScoresGo's), for m < ngroups; qt is\n")
	fmt.Fprintf(&b, "// [dim][16] with q[h][j] in lanes %d·h to %d·h+%d (attnGroupQ), perm the\n", p, p, p-1)
	fmt.Fprintf(&b, "// position-major lane order (attnGroupPerm). Eight groups run at once\n")
	fmt.Fprintf(&b, "// (eight chains), the rest one at a time; PF2 spreads the prefetch.\n")
	fmt.Fprintf(&b, "TEXT ·attnScoresZ%d(SB), NOSPLIT, $0-80\n", g)
	b.I("MOVQ k+0(FP), R15")
	b.I("MOVQ qt+8(FP), DI")
	b.I("MOVQ ngroups+16(FP), BX")
	b.I("MOVQ ks+32(FP), R11")
	b.I("SHLQ $2, R11") // group row bytes
	b.I("MOVQ out+40(FP), R10")
	b.I("MOVQ perm+48(FP), AX")
	b.I("VMOVDQU32 (AX), Z15")
	b.I("MOVQ pf+56(FP), R8")
	b.I("MOVQ pflines+64(FP), R9")
	b.I("MOVQ pfstep+72(FP), CX")
	label("zs8_", g)
	b.I("CMPQ BX, $8")
	b.I("JLT zs1_%d", g)
	for a := 0; a < 8; a++ {
		b.I("VPXORD Z%d, Z%d, Z%d", a, a, a)
	}
	b.I("MOVQ R15, R13")
	b.I("LEAQ (R11)(R11*2), R14")
	b.I("LEAQ (R14)(R14*1), DX")
	b.I("ADDQ R15, R14")
	b.I("ADDQ R15, DX")
	b.I("MOVQ DI, SI")
	b.I("MOVQ dim+24(FP), AX")
	b.I("SHRQ $1, AX")
	label("zsj8_", g)
	b.I("PF2")
	for jj := 0; jj < 2; jj++ {
		b.I("VMOVUPS %d(SI), Z8", 64*jj)
		ko := 4 * p * jj
		addrs := []string{
			fmt.Sprintf("%d(R13)", ko), fmt.Sprintf("%d(R13)(R11*1)", ko), fmt.Sprintf("%d(R13)(R11*2)", ko),
			fmt.Sprintf("%d(R14)", ko), fmt.Sprintf("%d(R14)(R11*1)", ko), fmt.Sprintf("%d(R14)(R11*2)", ko),
			fmt.Sprintf("%d(DX)", ko), fmt.Sprintf("%d(DX)(R11*1)", ko),
		}
		for a := 0; a < 8; a += 2 {
			b.I("%s %s, Z9", bcast(p), addrs[a])
			b.I("%s %s, Z10", bcast(p), addrs[a+1])
			b.I("VFMADD231PS Z9, Z8, Z%d", a)
			b.I("VFMADD231PS Z10, Z8, Z%d", a+1)
		}
	}
	b.I("ADDQ $128, SI")
	b.I("ADDQ $%d, R13", 8*p)
	b.I("ADDQ $%d, R14", 8*p)
	b.I("ADDQ $%d, DX", 8*p)
	b.I("DECQ AX")
	b.I("JNZ zsj8_%d", g)
	for a := 0; a < 8; a++ {
		b.I("ZSTORE(Z%d)", a)
	}
	b.I("LEAQ (R15)(R11*8), R15")
	b.I("SUBQ $8, BX")
	b.I("JMP zs8_%d", g)
	label("zs1_", g)
	b.I("TESTQ BX, BX")
	b.I("JZ zsdone%d", g)
	b.I("VPXORD Z0, Z0, Z0")
	b.I("MOVQ R15, R13")
	b.I("MOVQ DI, SI")
	b.I("MOVQ dim+24(FP), AX")
	label("zsj1_", g)
	b.I("%s (R13), Z9", bcast(p))
	b.I("VFMADD231PS (SI), Z9, Z0")
	b.I("ADDQ $%d, R13", 4*p)
	b.I("ADDQ $64, SI")
	b.I("DECQ AX")
	b.I("JNZ zsj1_%d", g)
	b.I("ZSTORE(Z0)")
	b.I("ADDQ R11, R15")
	b.I("DECQ BX")
	b.I("JMP zs1_%d", g)
	label("zsdone", g)
	b.I("VZEROUPPER")
	b.I("RET")
}

// axpyKernel: attnAxpyF16Z{g}, c vectors (16·c values) of each of the g
// output rows per chunk.
func axpyKernel(g, c int) {
	fmt.Fprintf(&b, "\n// func attnAxpyF16Z%d(v *uint16, vs int, w *float32, nb, dim int, out *float32, pf *byte, pflines, pfstep int)\n", g)
	fmt.Fprintf(&b, "// attnAxpyBlockAVX2 for %d heads reading the V rows as F16: for h < %d,\n", g, g)
	fmt.Fprintf(&b, "// p < nb, j < dim (a multiple of %d), in order of p: out[h·dim+j] =\n", 16*c)
	fmt.Fprintf(&b, "// fma(w[p·%d+h], float32(v[p·vs+j]), out[h·dim+j]) (vs: the rows' stride\n", g)
	fmt.Fprintf(&b, "// in values). A %d-value chunk of the output rows stays in Z0-Z%d across\n", 16*c, g*c-1)
	fmt.Fprintf(&b, "// the positions, so each V value is widened once; two prefetch lines\n// per position and chunk.\n")
	fmt.Fprintf(&b, "TEXT ·attnAxpyF16Z%d(SB), NOSPLIT, $0-72\n", g)
	b.I("MOVQ pf+48(FP), R8")
	b.I("MOVQ pflines+56(FP), R9")
	b.I("MOVQ pfstep+64(FP), CX")
	b.I("MOVQ v+0(FP), SI")
	b.I("MOVQ vs+8(FP), R14")
	b.I("MOVQ w+16(FP), DI")
	b.I("MOVQ nb+24(FP), BX")
	b.I("MOVQ dim+32(FP), R15")
	b.I("MOVQ out+40(FP), R10")
	b.I("SHLQ $1, R14") // V row bytes
	b.I("SHLQ $2, R15") // output row bytes
	b.I("TESTQ BX, BX")
	b.I("JZ zadone%d", g)
	b.I("XORQ DX, DX") // output byte offset of the chunk
	label("zachunk", g)
	b.I("CMPQ DX, R15")
	b.I("JGE zadone%d", g)
	move := func(store bool) {
		b.I("MOVQ R10, AX")
		b.I("ADDQ DX, AX")
		for h := 0; h < g; h++ {
			if h > 0 {
				b.I("ADDQ R15, AX")
			}
			for k := 0; k < c; k++ {
				if store {
					b.I("VMOVUPS Z%d, %d(AX)", h*c+k, 64*k)
				} else {
					b.I("VMOVUPS %d(AX), Z%d", 64*k, h*c+k)
				}
			}
		}
	}
	move(false)
	b.I("MOVQ DX, R12")
	b.I("SHRQ $1, R12") // V byte offset of the chunk
	b.I("ADDQ SI, R12")
	b.I("MOVQ DI, R13")
	b.I("MOVQ BX, R11")
	label("zapos", g)
	b.I("PF2")
	for k := 0; k < c; k++ {
		b.I("VCVTPH2PS %d(R12), Z%d", 32*k, 16+k)
	}
	for h := 0; h < g; h++ {
		zw := 24 + h%4
		b.I("VBROADCASTSS %d(R13), Z%d", 4*h, zw)
		for k := 0; k < c; k++ {
			b.I("VFMADD231PS Z%d, Z%d, Z%d", 16+k, zw, h*c+k)
		}
	}
	b.I("ADDQ R14, R12")
	b.I("ADDQ $%d, R13", 4*g)
	b.I("DECQ R11")
	b.I("JNZ zapos%d", g)
	move(true)
	b.I("ADDQ $%d, DX", 64*c)
	b.I("JMP zachunk%d", g)
	label("zadone", g)
	b.I("VZEROUPPER")
	b.I("RET")
}

func main() {
	b.WriteString(`// Code generated by attn_z_gen.go; DO NOT EDIT.

// AVX-512 kernels of Attend's decode path for g = 2, 4 and 8 query heads
// per KV head over an F16 store (attn_z_amd64.go). P = 16/g positions
// share a vector, lane P·h+i holding head h at position p+i, so every
// instruction does 16 lanes of work where the AVX2 helpers do eight or
// fewer; each kernel computes the same operations per value, in the same
// order, as its AVX2 / Go twin (TestAttendZBitwise).

#include "textflag.h"

#include "attn_expz_amd64.h"

// PF2 issues the next two of the lines to prefetch (PREFETCHT0 of (R8)
// and 64(R8), then R8 += CX: 128 for a contiguous span, a row's bytes
// for one head's 128-byte columns) while R9 of them are left: rows a
// later call reads, spread over a loop instead of issued at once (a
// burst of a block's lines fills the miss buffers and stalls the loads
// of the work in between).
#define PF2 \
	CMPQ       R9, $2; \
	JLT        6(PC); \
	PREFETCHT0 (R8); \
	PREFETCHT0 64(R8); \
	ADDQ       CX, R8; \
	SUBQ       $2, R9; \
	JMP        5(PC); \
	TESTQ      R9, R9; \
	JZ         3(PC); \
	PREFETCHT0 (R8); \
	XORQ       R9, R9

// ZSTORE(Z) writes a group's 16 scores at (R10), position-major (the
// lanes reordered by Z15), and steps R10 to the next group.
#define ZSTORE(Z) \
	VPERMPS Z, Z15, Z; \
	VMOVUPS Z, (R10); \
	ADDQ    $64, R10
`)
	for _, g := range groups {
		expKernel(g)
	}
	for _, g := range groups {
		cvtKernel(16 / g)
	}
	for _, g := range groups {
		scoresKernel(g)
	}
	for _, g := range groups {
		// c ≤ 4 vectors per head (Z16-Z19 hold the widened V) and g·c ≤ 16
		// accumulators; attnZChunk (attn_z_amd64.go) is 16·c.
		axpyKernel(g, min(4, 16/g))
	}
	if err := b.Save("attn_z_avx512_amd64.s"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
