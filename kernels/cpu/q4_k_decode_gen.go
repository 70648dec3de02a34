//go:build ignore

// q4_k_decode_gen.go writes q4_k_decode_vnni_amd64.s
// (go run q4_k_decode_gen.go).
package main

import (
	"fmt"
	"os"

	"oengine/kernels/cpu/internal/asmgen"
)

var b asmgen.File

// Block offsets of the Q4_K decode layout (q4_k_decode.go).
const (
	offD     = 0   // the 16 rows' F16 d
	offDmin  = 32  // their F16 dmin
	offScale = 64  // scale dword i (bytes 4i..4i+3 of the 12) at 64+64i
	offQs    = 256 // nibble dword k of chunk c at 256+512c+64k
	block    = 2304
)

func kernel() {
	b.WriteString(`
// func gemv16Q4_KP(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)
// ngroups ≥ 1, nb ≥ 1; out[16g+r] is row r of group g.
TEXT ·gemv16Q4_KP(SB), NOSPLIT, $0-64
`)
	b.I("MOVQ grp+0(FP), SI")
	b.I("MOVQ ngroups+8(FP), R10")
	b.I("MOVQ pf+48(FP), R14")
	b.I("ADDQ SI, R14")
	b.I("MOVQ out+56(FP), AX")
	b.I("MOVL $0x0f0f0f0f, DX")
	b.I("VPBROADCASTD DX, Z20")
	fmt.Fprintf(&b, "\ngroup:\n")
	b.I("MOVQ qs+16(FP), DI")
	b.I("MOVQ d+24(FP), DX")
	b.I("MOVQ bsums+32(FP), BX")
	b.I("MOVQ nb+40(FP), CX")
	for z := 8; z < 20; z++ {
		b.I("VPXORD Z%d, Z%d, Z%d", z, z, z)
	}
	fmt.Fprintf(&b, "\nsuper:\n")
	// Scales and mins, as Q4KBODY's scalar code unpacks them, for the 16
	// rows at once: sc[0..3] = s0 & 63, sc[4..7] = (s2 & 15) | (s0>>6)<<4,
	// m[0..3] = s1 & 63, m[4..7] = (s2>>4) | (s1>>6)<<4, bytewise.
	b.I("VMOVDQU32 %d(SI), Z23", offScale)
	b.I("VMOVDQU32 %d(SI), Z24", offScale+64)
	b.I("VMOVDQU32 %d(SI), Z25", offScale+128)
	b.I("VPANDD.BCST q4kz3f<>(SB), Z23, Z21")
	b.I("VPSRLD $2, Z23, Z26")
	b.I("VPANDD.BCST q4kz30<>(SB), Z26, Z26")
	b.I("VPANDD Z20, Z25, Z22")
	b.I("VPORD Z26, Z22, Z22")
	b.I("VPANDD.BCST q4kz3f<>(SB), Z24, Z23")
	b.I("VPSRLD $2, Z24, Z26")
	b.I("VPANDD.BCST q4kz30<>(SB), Z26, Z26")
	b.I("VPSRLD $4, Z25, Z24")
	b.I("VPANDD Z20, Z24, Z24")
	b.I("VPORD Z26, Z24, Z24")
	for o := 2048; o < block; o += 64 {
		b.I("PREFETCHT0 %d(R14)", o)
	}
	// The mins' part: X0 word j = bsums[2j]+bsums[2j+1] (the sums of the
	// eight 32-element sub-blocks); lane k of Q4KBODY's X12 is
	// m[2k]·word 2k + m[2k+1]·word 2k+1, and Z16+k accumulates
	// fma(dmin·dy, float32(lane k), ·).
	b.I("VMOVDQU (BX), X0")
	b.I("VPHADDW 16(BX), X0, X0")
	b.I("VCVTPH2PS %d(SI), Z26", offDmin)
	b.I("VMULPS.BCST (DX), Z26, Z26")
	for k := 0; k < 4; k++ {
		src := []string{"Z23", "Z23", "Z24", "Z24"}[k]
		b.I("VPSHUFB q4kzmw<>+%d(SB), %s, Z27", 64*(k%2), src)
		if k == 0 {
			b.I("VPBROADCASTD X0, Z28")
		} else {
			b.I("VPSHUFD $0x%02x, X0, X1", 0x55*k)
			b.I("VPBROADCASTD X1, Z28")
		}
		b.I("VPMADDWD Z28, Z27, Z27")
		b.I("VCVTDQ2PS Z27, Z27")
		b.I("VFMADD231PS Z27, Z26, Z%d", 16+k)
	}
	// The scales' part: Z(k) gets lane k of Q4KBODY's Y4 for the 16
	// rows: Σ over sub-blocks j of sc[j]·Σ of the products of elements
	// 4k..4k+3 of sub-block j. VPMADDUBSW sums the products in pairs
	// (at most 2·15·128, no saturation); VPDPWSSD multiplies both pair
	// sums by sc[j] (a word in both halves of each dword) and adds them.
	for k := 0; k < 8; k++ {
		b.I("VPXORD Z%d, Z%d, Z%d", k, k, k)
	}
	for c := 0; c < 4; c++ {
		for h := 0; h < 2; h++ { // sub-block 2c (low nibbles), 2c+1 (high)
			j := 2*c + h
			src := "Z21"
			if j >= 4 {
				src = "Z22"
			}
			b.I("VPSHUFB q4kzsel<>+%d(SB), %s, Z%d", 64*(j%4), src, 27+h)
		}
		for k := 0; k < 8; k++ {
			q, hi, a := 29, 30, 31 // lo is q, unpacked in place
			if k%2 == 1 {
				q, hi, a = 23, 24, 25
			}
			b.I("VMOVDQU32 %d(SI), Z%d", offQs+512*c+64*k, q)
			b.I("VPSRLW $4, Z%d, Z%d", q, hi)
			b.I("VPANDD Z20, Z%d, Z%d", q, q)
			b.I("VPANDD Z20, Z%d, Z%d", hi, hi)
			b.I("VPBROADCASTD %d(DI), Z%d", 64*c+4*k, a)
			b.I("VPMADDUBSW Z%d, Z%d, Z%d", a, q, q)
			b.I("VPBROADCASTD %d(DI), Z%d", 64*c+32+4*k, a)
			b.I("VPMADDUBSW Z%d, Z%d, Z%d", a, hi, hi)
			b.I("VPDPWSSD Z27, Z%d, Z%d", q, k)
			b.I("VPDPWSSD Z28, Z%d, Z%d", hi, k)
			b.I("PREFETCHT0 %d(R14)", 64*(8*c+k))
		}
	}
	// Σ d·sumi lanes: fma(d·dy, float32(lane k), Z8+k), Q4KBODY's last
	// three instructions.
	b.I("VCVTPH2PS %d(SI), Z26", offD)
	b.I("VMULPS.BCST (DX), Z26, Z26")
	for k := 0; k < 8; k++ {
		b.I("VCVTDQ2PS Z%d, Z%d", k, k)
		b.I("VFMADD231PS Z%d, Z26, Z%d", k, 8+k)
	}
	b.I("ADDQ $%d, SI", block)
	b.I("ADDQ $%d, R14", block)
	b.I("ADDQ $256, DI")
	b.I("ADDQ $4, DX")
	b.I("ADDQ $32, BX")
	b.I("DECQ CX")
	b.I("JNZ super")
	// HSUM8's order per row: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) for
	// the d lanes; the dmin lanes 4-7 are zeros, so their sum is
	// (m0+m2)+(m1+m3) (m+0 = m: the accumulators are never -0).
	for k := 0; k < 4; k++ {
		b.I("VADDPS Z%d, Z%d, Z%d", 12+k, 8+k, 8+k)
	}
	b.I("VADDPS Z10, Z8, Z8")
	b.I("VADDPS Z11, Z9, Z9")
	b.I("VADDPS Z9, Z8, Z8")
	b.I("VADDPS Z18, Z16, Z16")
	b.I("VADDPS Z19, Z17, Z17")
	b.I("VADDPS Z17, Z16, Z16")
	b.I("VSUBPS Z16, Z8, Z8")
	b.I("VMOVUPS Z8, (AX)")
	b.I("ADDQ $64, AX")
	b.I("DECQ R10")
	b.I("JNZ group")
	b.I("VZEROUPPER")
	b.I("RET")
}

// data writes the constants: the byte masks and the VPSHUFB masks that
// spread scale byte j%4 of each dword to both of its words (q4kzsel<>,
// 64 bytes per j%4) and make words of mins bytes 0,1 or 2,3 (q4kzmw<>).
func data() {
	fmt.Fprintf(&b, "\nDATA q4kz3f<>+0(SB)/4, $0x3f3f3f3f\nGLOBL q4kz3f<>(SB), RODATA|NOPTR, $4\n")
	fmt.Fprintf(&b, "DATA q4kz30<>+0(SB)/4, $0x30303030\nGLOBL q4kz30<>(SB), RODATA|NOPTR, $4\n")
	mask := func(sym string, idx int, f func(i int) [4]byte) {
		for q := 0; q < 64; q += 8 {
			var v uint64
			for by := 0; by < 8; by++ {
				i := (q + by) % 16 / 4 // dword within the 128-bit lane
				v |= uint64(f(i)[(q+by)%4]) << (8 * by)
			}
			fmt.Fprintf(&b, "DATA %s<>+%d(SB)/8, $0x%016x\n", sym, 64*idx+q, v)
		}
	}
	for j := 0; j < 4; j++ {
		mask("q4kzsel", j, func(i int) [4]byte { return [4]byte{byte(4*i + j), 0x80, byte(4*i + j), 0x80} })
	}
	fmt.Fprintf(&b, "GLOBL q4kzsel<>(SB), RODATA|NOPTR, $256\n")
	for h := 0; h < 2; h++ {
		mask("q4kzmw", h, func(i int) [4]byte { return [4]byte{byte(4*i + 2*h), 0x80, byte(4*i + 2*h + 1), 0x80} })
	}
	fmt.Fprintf(&b, "GLOBL q4kzmw<>(SB), RODATA|NOPTR, $128\n")
}

func main() {
	b.WriteString(`// Code generated by q4_k_decode_gen.go; DO NOT EDIT.

// Q4_K decode kernel on the decode layout (q4_k_decode.go): groups of 16
// rows, lane r of a zmm = row r, one super-block of the 16 rows in 2304
// contiguous bytes. It computes, per row, what gemvQ4_KAVX2 does
// (dot_kquant_amd64.s, Q4KBODY) with the same float operations on the
// same operands, so every result is bitwise that kernel's (TestQ4KZGemv):
// its eight float lanes of Σ d·sumi are Z8-Z15 here (lane k of the row =
// lane r of Z8+k), its four lanes of Σ dmin·summs Z16-Z19, and the
// integers behind them are exact sums in any order.
//
// Registers: Z0-Z7 the super-block's integer lanes, Z8-Z19 the float
// accumulators, Z20 the nibble mask, Z21 / Z22 scales 0-3 / 4-7 (bytes),
// Z23-Z31 temporaries; SI the group, R14 SI + pf (prefetch), DI, DX, BX
// the activations, their d and bsums, CX the super-blocks left, R10 the
// groups left, AX the output.

#include "textflag.h"
`)
	kernel()
	data()
	if err := b.Save("q4_k_decode_vnni_amd64.s"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
