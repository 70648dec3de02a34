//go:build ignore

// blk_decode_gen.go writes the decode-layout kernels of the 32-element
// block types (go run blk_decode_gen.go): q4_0_decode_few_vnni_amd64.s
// (Q4_0, two to eight tokens; its one-token kernel is
// q4_0_decode_vnni_amd64.s), q8_0_decode_vnni_amd64.s (Q8_0, one to
// eight tokens), iq4_nl_decode_vnni_amd64.s (IQ4_NL, one to eight) and
// q5_0_decode_vnni_amd64.s (Q5_0, one to eight; Q5_1, one and two).
package main

import (
	"fmt"
	"os"

	"oengine/kernels/cpu/internal/asmgen"
)

var b asmgen.File

// Token data bases: activations (qs), d and s8 of tokens 0-3 and 4-7.
var (
	qsBase = [2]string{"DI", "AX"}
	dBase  = [2]string{"DX", "R10"}
	s8Base = [2]string{"BX", "R13"}
)

// layout is a blocked type's decode layout (q4_0_decode.go,
// q8_0_decode.go, q5_0_decode.go): its kernels' name prefix and block
// size.
type layout struct {
	name  string
	block int
	q8    bool
	iq4   bool // Q4_0's layout holding IQ4_NL nibbles: each becomes its level + 128 (VPSHUFB)
	q5    bool // Q5_0's: nibble dwords at 96, fifth-bit byte masks at 32, values w+16
}

var (
	q4  = layout{name: "gemv16Q4_0P", block: 288}
	q8  = layout{name: "gemv16Q8_0P", block: 544, q8: true}
	iq4 = layout{name: "gemv16IQ4_NLP", block: 288, iq4: true}
	q5  = layout{name: "gemv16Q5_0P", block: 352, q5: true}
)

// frame returns the argument offsets and frame size of a decode-layout
// kernel for T tokens whose third per-token operand is named third (s8,
// corr or s): the one-token signature (grp, ngroups, qs, d, third, nb,
// pf, out) for T = 1, else the strided one (grp, ngroups, qs, qstride,
// d, third, dstride, nb, pf, out, ostride).
func frame(T int, third string) (map[string]int, int) {
	if T == 1 {
		return map[string]int{"grp": 0, "ngroups": 8, "qs": 16, "d": 24, third: 32, "nb": 40, "pf": 48, "out": 56}, 64
	}
	return map[string]int{"grp": 0, "ngroups": 8, "qs": 16, "qstride": 24, "d": 32, third: 40, "dstride": 48, "nb": 56, "pf": 64, "out": 72, "ostride": 80}, 88
}

// begin writes a kernel's TEXT line and loads its weight stream into SI
// and its prefetch pointer (SI + pf) into R14.
func begin(name string, size int, arg map[string]int) {
	fmt.Fprintf(&b, "TEXT ·%s(SB), NOSPLIT, $0-%d\n", name, size)
	b.I("MOVQ grp+%d(FP), SI", arg["grp"])
	b.I("MOVQ pf+%d(FP), R14", arg["pf"])
	b.I("ADDQ SI, R14")
}

// kernel writes l's kernel for T tokens. T = 1 takes the one-token
// signature (no strides).
func kernel(l layout, T int) {
	name := fmt.Sprintf("%sT%d", l.name, T)
	arg, size := frame(T, "s8")
	if T == 1 {
		name = l.name
		fmt.Fprintf(&b, "\n// func %s(grp *byte, ngroups int, qs *int8, d *float32, s8 *int32, nb, pf int, out *float32)\n", name)
		fmt.Fprintf(&b, "// ngroups ≥ 1, nb ≥ 1; out[16g+r] is row r of group g.\n")
	} else {
		fmt.Fprintf(&b, "\n// func %s(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s8 *int32, dstride, nb, pf int, out *float32, ostride int)\n", name)
		fmt.Fprintf(&b, "// %s for %d tokens: token t's activations at qs + t·qstride,\n// its d and s8 at d + t·dstride and s8 + t·dstride, its results at\n// out + t·ostride (bytes).\n", l.name, T)
	}
	begin(name, size, arg)
	if T > 1 {
		b.I("MOVQ qstride+%d(FP), R8", arg["qstride"])
		b.I("LEAQ (R8)(R8*2), R12")
		b.I("MOVQ dstride+%d(FP), R9", arg["dstride"])
		b.I("LEAQ (R9)(R9*2), R11")
	}
	if !l.q8 {
		b.I("MOVL $0x0f0f0f0f, DX")
		b.I("VPBROADCASTD DX, Z29")
	}
	if l.q5 {
		b.I("MOVL $0x10101010, DX")
		b.I("VPBROADCASTD DX, Z30")
	}
	if l.iq4 {
		b.I("VBROADCASTI32X4 iq4lev128<>(SB), Z28")
	}
	b.I("VPXORD Z31, Z31, Z31")
	fmt.Fprintf(&b, "\ngroup:\n")
	b.I("MOVQ qs+%d(FP), DI", arg["qs"])
	b.I("MOVQ d+%d(FP), DX", arg["d"])
	b.I("MOVQ s8+%d(FP), BX", arg["s8"])
	if T > 4 {
		b.I("LEAQ (DI)(R8*4), AX")
		b.I("LEAQ (DX)(R9*4), R10")
		b.I("LEAQ (BX)(R9*4), R13")
	}
	b.I("MOVQ nb+%d(FP), CX", arg["nb"])
	for t := 0; t < T; t++ {
		b.I("VPXORD Z%d, Z%d, Z%d", 16+t, 16+t, 16+t)
	}
	fmt.Fprintf(&b, "\nblock:\n")
	b.I("VCVTPH2PS (SI), Z8")
	if l.q8 {
		// The eight dwords, unsigned already.
		for k := 0; k < 8; k++ {
			b.I("VMOVDQU32 %d(SI), Z%d", 32+64*k, k)
		}
	} else {
		qsOff := 32
		if l.q5 {
			qsOff = 96
		}
		for k := 0; k < 4; k++ {
			b.I("VMOVDQU32 %d(SI), Z%d", qsOff+64*k, 4+k)
		}
	}
	for o := 0; o < l.block; o += 64 {
		b.I("PREFETCHT0 %d(R14)", o)
	}
	if !l.q8 {
		for k := 0; k < 4; k++ { // low nibbles of dword k in Z(k), high in Z(4+k)
			b.I("VPANDD Z29, Z%d, Z%d", 4+k, k)
			b.I("VPSRLD $4, Z%d, Z%d", 4+k, 4+k)
			b.I("VPANDD Z29, Z%d, Z%d", 4+k, 4+k)
		}
	}
	if l.iq4 {
		for k := 0; k < 8; k++ { // nibble -> level + 128
			b.I("VPSHUFB Z%d, Z28, Z%d", k, k)
		}
	}
	if l.q5 {
		// Vector v's fifth bits are a byte mask at 32+8v: add 16 to the
		// bytes it selects, so that each byte is w+16 (0..31).
		for v := 0; v < 8; v++ {
			b.I("KMOVQ %d(SI), K%d", 32+8*v, 1+v%4)
			b.I("VPADDB Z30, Z%d, K%d, Z%d", v, 1+v%4, v)
		}
	}
	for t := 0; t < T; t++ {
		// Temporaries alternate between two sets so that consecutive
		// tokens do not wait on each other.
		s, h, m := 10, 11, 9
		if t%2 == 1 {
			s, h, m = 12, 13, 14
		}
		// Z(s) starts at -8·Σq (Q4_0: values stored as w+8), -16·Σq
		// (Q5_0: w+16) or -128·Σq (Q8_0, IQ4_NL: w+128), Z(h) at 0.
		b.I("VPSUBD.BCST %s, Z31, Z%d", asmgen.TokAddr(s8Base, "R9", "R11", t, 0), s)
		if l.q8 || l.iq4 {
			b.I("VPSLLD $4, Z%d, Z%d", s, s)
		}
		if l.q5 {
			b.I("VPSLLD $1, Z%d, Z%d", s, s)
		}
		b.I("VPXORD Z%d, Z%d, Z%d", h, h, h)
		for k := 0; k < 4; k++ {
			// Q4_0: elements 4k.. (low nibbles) and 16+4k.. (high);
			// Q8_0: elements 4k.. and 16+4k.. (dwords k and 4+k).
			b.I("VPDPBUSD.BCST %s, Z%d, Z%d", asmgen.TokAddr(qsBase, "R8", "R12", t, 4*k), k, s)
			b.I("VPDPBUSD.BCST %s, Z%d, Z%d", asmgen.TokAddr(qsBase, "R8", "R12", t, 16+4*k), 4+k, h)
		}
		b.I("VPADDD Z%d, Z%d, Z%d", h, s, s)
		b.I("VCVTDQ2PS Z%d, Z%d", s, s)
		b.I("VMULPS.BCST %s, Z8, Z%d", asmgen.TokAddr(dBase, "R9", "R11", t, 0), m)
		b.I("VFMADD231PS Z%d, Z%d, Z%d", s, m, 16+t)
	}
	b.I("ADDQ $%d, SI", l.block)
	b.I("ADDQ $%d, R14", l.block)
	b.I("ADDQ $32, DI")
	b.I("ADDQ $4, DX")
	b.I("ADDQ $4, BX")
	if T > 4 {
		b.I("ADDQ $32, AX")
		b.I("ADDQ $4, R10")
		b.I("ADDQ $4, R13")
	}
	b.I("DECQ CX")
	b.I("JNZ block")
	b.WriteString("\n")
	// Results: token t at out + t·ostride; AX and CX the bases of tokens
	// 0-3 and 4-7, R13 the stride, R10 3× the stride.
	b.I("MOVQ out+%d(FP), AX", arg["out"])
	if T > 1 {
		b.I("MOVQ ostride+%d(FP), R13", arg["ostride"])
		b.I("LEAQ (R13)(R13*2), R10")
	}
	if T > 4 {
		b.I("LEAQ (AX)(R13*4), CX")
	}
	for t := 0; t < T; t++ {
		b.I("VMOVUPS Z%d, %s", 16+t, asmgen.TokAddr([2]string{"AX", "CX"}, "R13", "R10", t, 0))
	}
	b.I("ADDQ $64, out+%d(FP)", arg["out"])
	b.I("DECQ ngroups+%d(FP)", arg["ngroups"])
	b.I("JNZ group")
	b.I("VZEROUPPER")
	b.I("RET")
}

// q51Kernel writes gemv16Q5_1P (T = 1) or gemv16Q5_1PT2 (T = 2) on the
// Q5_1 decode layout (q5_0_decode.go): values u = 0..31, and each block's
// m·s summed per row as dotQ5_1AVX2 does.
//
// Registers: Z0-Z7 the block's unsigned values (Z(k): elements 4k..4k+3,
// Z(4+k): 16+4k..), K1 / K2 their fifth-bit masks, Z8 the rows' scales,
// Z9 token t's d·dy, Z11+8t+k token t's lane k, Z27 the integer lane
// being built, Z29 0x0f bytes, Z30 0x10 bytes, Z31 the rows' mins; the
// Σ m·s of tokens 0 and 1 in Z28 and Z10. DI, DX, BX token 0's
// activations, d and s (Q8_1 activations), AX, R10, R13 token 1's.
func q51Kernel(T int) {
	const block, base, qhOff, qsOff = 384, "gemv16Q5_1P", 64, 128
	name := base
	arg, size := frame(T, "s")
	if T == 2 {
		name = base + "T2"
		fmt.Fprintf(&b, "\n// func %s(grp *byte, ngroups int, qs *int8, qstride int, d *float32, s *float32, dstride, nb, pf int, out *float32, ostride int)\n", name)
		fmt.Fprintf(&b, "// %s for two tokens: token 1's activations at qs + qstride,\n// its d and s at d + dstride and s + dstride, its results at\n// out + ostride (bytes).\n", base)
	} else {
		fmt.Fprintf(&b, "\n// func %s(grp *byte, ngroups int, qs *int8, d *float32, s *float32, nb, pf int, out *float32)\n", name)
		fmt.Fprintf(&b, "// ngroups ≥ 1, nb ≥ 1; out[16g+r] is row r of group g.\n")
	}
	begin(name, size, arg)
	b.I("MOVL $0x0f0f0f0f, DX")
	b.I("VPBROADCASTD DX, Z29")
	b.I("MOVL $0x10101010, DX")
	b.I("VPBROADCASTD DX, Z30")
	fmt.Fprintf(&b, "\ngroup:\n")
	b.I("MOVQ qs+%d(FP), DI", arg["qs"])
	b.I("MOVQ d+%d(FP), DX", arg["d"])
	b.I("MOVQ s+%d(FP), BX", arg["s"])
	if T == 2 {
		b.I("MOVQ qstride+%d(FP), AX", arg["qstride"])
		b.I("ADDQ DI, AX")
		b.I("MOVQ dstride+%d(FP), R10", arg["dstride"])
		b.I("LEAQ (BX)(R10*1), R13")
		b.I("ADDQ DX, R10")
	}
	b.I("MOVQ nb+%d(FP), CX", arg["nb"])
	for z := 11; z < 11+8*T; z++ {
		b.I("VPXORD Z%d, Z%d, Z%d", z, z, z)
	}
	mAcc := []int{28, 10}
	for t := 0; t < T; t++ {
		b.I("VPXORD Z%d, Z%d, Z%d", mAcc[t], mAcc[t], mAcc[t])
	}
	fmt.Fprintf(&b, "\nblock:\n")
	b.I("VCVTPH2PS (SI), Z8")
	for o := 0; o < block; o += 64 {
		b.I("PREFETCHT0 %d(R14)", o)
	}
	for k := 0; k < 4; k++ {
		b.I("VMOVDQU32 %d(SI), Z27", qsOff+64*k)
		b.I("VPANDD Z29, Z27, Z%d", k)
		b.I("VPSRLD $4, Z27, Z27")
		b.I("VPANDD Z29, Z27, Z%d", 4+k)
		// The fifth bits of vectors k and 4+k are byte masks already:
		// add 16 to the bytes they select.
		b.I("KMOVQ %d(SI), K1", qhOff+8*k)
		b.I("KMOVQ %d(SI), K2", qhOff+8*(4+k))
		b.I("VPADDB Z30, Z%d, K1, Z%d", k, k)
		b.I("VPADDB Z30, Z%d, K2, Z%d", 4+k, 4+k)
	}
	b.I("VCVTPH2PS 32(SI), Z31") // the rows' mins
	qs := []string{"DI", "AX"}
	ds := []string{"DX", "R10"}
	ss := []string{"BX", "R13"}
	for t := 0; t < T; t++ {
		b.I("VMULPS.BCST (%s), Z8, Z9", ds[t])
		for k := 0; k < 8; k++ {
			// Lane k: Σ u·a of elements 4k..4k+3 (activation bytes
			// 4k..4k+3 for both halves), then the AVX2 kernel's FMA
			// with d·dy.
			b.I("VPXORD Z27, Z27, Z27")
			b.I("VPDPBUSD.BCST %d(%s), Z%d, Z27", 4*k, qs[t], k)
			b.I("VCVTDQ2PS Z27, Z27")
			b.I("VFMADD231PS Z27, Z9, Z%d", 11+8*t+k)
		}
		b.I("VFMADD231PS.BCST (%s), Z31, Z%d", ss[t], mAcc[t]) // Σ m·s, block by block
	}
	b.I("ADDQ $%d, SI", block)
	b.I("ADDQ $%d, R14", block)
	for t := 0; t < T; t++ {
		b.I("ADDQ $32, %s", qs[t])
		b.I("ADDQ $4, %s", ds[t])
		b.I("ADDQ $4, %s", ss[t])
	}
	b.I("DECQ CX")
	b.I("JNZ block")
	b.WriteString("\n")
	b.I("MOVQ out+%d(FP), AX", arg["out"])
	for t := 0; t < T; t++ {
		z := 11 + 8*t
		b.HSum8(z)
		b.I("VADDPS Z%d, Z%d, Z%d", mAcc[t], z, z)
		if t == 0 {
			b.I("VMOVUPS Z%d, (AX)", z)
		} else {
			b.I("MOVQ ostride+%d(FP), R13", arg["ostride"])
			b.I("VMOVUPS Z%d, (AX)(R13*1)", z)
		}
	}
	b.I("ADDQ $64, out+%d(FP)", arg["out"])
	b.I("DECQ ngroups+%d(FP)", arg["ngroups"])
	b.I("JNZ group")
	b.I("VZEROUPPER")
	b.I("RET")
}

func main() {
	save := func(name, head string, l layout, from int) {
		b.Reset()
		b.WriteString(head)
		for T := from; T <= 8; T++ {
			kernel(l, T)
		}
		if err := b.Save(name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	save("q4_0_decode_few_vnni_amd64.s", `// Code generated by blk_decode_gen.go; DO NOT EDIT.

// Q4_0 decode kernels on the decode layout (q4_0_decode.go) for two to
// eight tokens: gemv16Q4_0P (q4_0_decode_vnni_amd64.s) with each block's
// 288 bytes loaded and its nibbles unpacked once for all the tokens. Per
// token the same instructions on the same operands as the one-token
// kernel (Q4BLOCKSUM's exact integer sums, then cvt, the scale product
// and one FMA into the token's accumulator), so every result is bitwise
// gemv16Q4_0P's (TestQ4ZGemvFew).
//
// Registers: Z0-Z3 low and Z4-Z7 high nibbles of the block's four
// dwords, Z8 the rows' scales, Z16+t token t's accumulator, Z9-Z14
// temporaries; DI, DX, BX token 0's activations, d and s8, AX, R10, R13
// token 4's, R8 / R12 and R9 / R11 one and three token strides; the
// group count and the output pointer stay in the argument frame.

#include "textflag.h"
`, q4, 2)
	save("q8_0_decode_vnni_amd64.s", `// Code generated by blk_decode_gen.go; DO NOT EDIT.

// Q8_0 decode kernels on the decode layout (q8_0_decode.go) for one to
// eight tokens, each block's 544 bytes loaded once for all of them. Per
// token: Σ (w+128)·q by VPDPBUSD of the unsigned weight dwords against
// the broadcast activation dwords, minus 128·Σq = 16·s8, is the exact
// block sum; then cvt, the scale product dw·dx and one FMA into the
// token's accumulator, blkDotRef's arithmetic in block order, so every
// result is bitwise the row-major kernels' (TestQ8ZGemv, TestQ8ZGemvFew).
//
// Registers: Z0-Z7 the block's eight weight dwords, Z8 the rows' scales,
// Z16+t token t's accumulator, Z9-Z14 temporaries; DI, DX, BX token 0's
// activations, d and s8, AX, R10, R13 token 4's, R8 / R12 and R9 / R11
// one and three token strides; the group count and the output pointer
// stay in the argument frame.

#include "textflag.h"
`, q8, 1)
	save("iq4_nl_decode_vnni_amd64.s", `// Code generated by blk_decode_gen.go; DO NOT EDIT.

// IQ4_NL decode kernels on the decode layout (Q4_0's, q4_0_decode.go: an
// IQ4_NL block has Q4_0's bytes) for one to eight tokens: the Q4_0
// kernels with each unpacked nibble vector turned into levels + 128 by
// one VPSHUFB from iq4lev128 (iq4_levels_amd64.h), and the +128
// taken back as 128·Σq = 16·s8, as for Q8_0. The exact block sums then go
// through blkDotRef's arithmetic, so every result is bitwise the Q8_0
// kernels' on the rows converted to Q8_0 (iq4NLToQ8_0), which IQ4_NL's
// other paths compute (TestIQ4ZGemv).
//
// Registers as in q4_0_decode_few_vnni_amd64.s, and Z28 the levels.

#include "textflag.h"
#include "iq4_levels_amd64.h"
`, iq4, 1)
	b.Reset()
	b.WriteString(`// Code generated by blk_decode_gen.go; DO NOT EDIT.

// Q5_0 and Q5_1 decode kernels on their decode layouts (q5_0_decode.go).
//
// Q5_0, one to eight tokens: the Q4_0 kernels with the nibble dwords at
// 96 and 16 added to each byte that the layout's fifth-bit masks select
// (loaded into opmask registers), so that a byte is w+16, taken back as
// 16·Σq = 2·s8. The exact block sums then go through blkDotRef's
// arithmetic, so every result is bitwise the Q8_0 kernels' on the rows
// converted to Q8_0 (q5_0ToQ8_0), which Q5_0's other paths compute
// (TestQ4ZGemv). Registers as in q4_0_decode_few_vnni_amd64.s, and Z30
// the bytes 0x10.
//
// Q5_1, one and two tokens: per block the 16 rows' values are built once
// (the nibbles, plus 16 where the masks say so), then per token and lane
// k (elements 4k..4k+3, as in dotQ5_1AVX2) the exact integer sum, its
// conversion and one FMA with d·dy, and one FMA of the block's m·s per
// row; the eight lanes of a row are summed in HSUM8's order, plus Σ m·s.
// Every result is bitwise dotQ5_1AVX2's (TestQ5ZGemv).

#include "textflag.h"
`)
	for T := 1; T <= 8; T++ {
		kernel(q5, T)
	}
	b.WriteString("\n")
	q51Kernel(1)
	q51Kernel(2)
	if err := b.Save("q5_0_decode_vnni_amd64.s"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
