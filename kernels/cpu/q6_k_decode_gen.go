//go:build ignore

// q6_k_decode_gen.go writes q6_k_decode_vnni_amd64.s
// (go run q6_k_decode_gen.go).
package main

import (
	"fmt"
	"os"

	"oengine/kernels/cpu/internal/asmgen"
)

var b asmgen.File

// Offsets in a super-block's data in the Q6_K decode layout
// (q6_k_decode.go); its d are apart, after the group's data.
const (
	offScale = 0    // scale dword i (scales 4i..4i+3) at 64i, i = 0..3
	offQl    = 256  // ql dword m at 256+64m, m = 0..31
	offQh    = 2304 // qh dword m at 2304+64m, m = 0..15
	data     = 3328
)

func kernel() {
	b.WriteString(`
// func gemv16Q6_KP(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)
// ngroups ≥ 1, nb ≥ 1; out[16g+r] is row r of group g.
TEXT ·gemv16Q6_KP(SB), NOSPLIT, $0-64
`)
	b.I("MOVQ grp+0(FP), SI")
	b.I("MOVQ ngroups+8(FP), R10")
	b.I("MOVQ out+56(FP), AX")
	b.I("MOVL $0x0f0f0f0f, DX")
	b.I("VPBROADCASTD DX, Z16")
	b.I("MOVL $0x30303030, DX")
	b.I("VPBROADCASTD DX, Z17")
	b.I("MOVQ nb+40(FP), R11")
	b.I("IMULQ $%d, R11", data)
	b.I("MOVQ pf+48(FP), R12")
	fmt.Fprintf(&b, "\ngroup:\n")
	b.I("MOVQ qs+16(FP), DI")
	b.I("MOVQ d+24(FP), DX")
	b.I("MOVQ bsums+32(FP), BX")
	b.I("MOVQ nb+40(FP), CX")
	b.I("LEAQ (SI)(R11*1), R9") // the group's d
	b.I("LEAQ (SI)(R12*1), R14")
	for z := 8; z < 16; z++ {
		b.I("VPXORD Z%d, Z%d, Z%d", z, z, z)
	}
	fmt.Fprintf(&b, "\nsuper:\n")
	// Q6KBODY's start: lane i = -32·(sc[2i]·bsums[2i] + sc[2i+1]·bsums[2i+1]),
	// the scales sign-extended to words.
	for i := 0; i < 8; i++ {
		b.I("VMOVDQU32 %d(SI), Z18", offScale+64*(i/2))
		b.I("VPSHUFB q6kzpair<>+%d(SB), Z18, Z18", 64*(i%2))
		b.I("VPSRAW $8, Z18, Z18")
		b.I("VPBROADCASTD %d(BX), Z20", 4*i)
		b.I("VPMADDWD Z20, Z18, Z18")
		b.I("VPSLLD $5, Z18, Z18")
		b.I("VPXORD Z%d, Z%d, Z%d", i, i, i)
		b.I("VPSUBD Z18, Z%d, Z%d", i, i)
	}
	b.I("PREFETCHT0 (R9)(R12*1)") // the next group's d
	for p := 0; p < 4; p++ {
		b.I("PREFETCHT0 %d(R14)", 64*p)
	}
	// Lane k of the 32-byte groups: elements 4k..4k+3 of each of the
	// eight 32-element groups, group g of half h being elements
	// 128h+32g.. (sub-block 8h+2g for k < 4, 8h+2g+1 for k ≥ 4). A 6-bit
	// value is (ql nibble) | (qh bits 2g, 2g+1) << 4, unsigned; the -32 is
	// in the lane's start above. VPMADDUBSW sums its products with the
	// activations in pairs (at most 2·63·128, no saturation), VPDPWSSD
	// multiplies both by the sub-block's scale and adds them.
	pf := 4
	for h := 0; h < 2; h++ {
		for kh := 0; kh < 2; kh++ {
			for g := 0; g < 4; g++ {
				s := 8*h + 2*g + kh
				b.I("VMOVDQU32 %d(SI), Z%d", offScale+64*(s/4), 22+g)
				b.I("VPSHUFB q6kzsel<>+%d(SB), Z%d, Z%d", 64*(s%4), 22+g, 22+g)
				b.I("VPSRAW $8, Z%d, Z%d", 22+g, 22+g)
			}
			for k := 4 * kh; k < 4*kh+4; k++ {
				b.I("VMOVDQU32 %d(SI), Z26", offQl+64*(16*h+k))
				b.I("VMOVDQU32 %d(SI), Z27", offQl+64*(16*h+8+k))
				b.I("VMOVDQU32 %d(SI), Z28", offQh+64*(8*h+k))
				b.I("VPSRLW $4, Z26, Z29")
				b.I("VPSRLW $4, Z27, Z30")
				for g := 0; g < 4; g++ {
					hb := "Z28"
					switch g {
					case 0:
						b.I("VPSLLW $4, Z28, Z18")
						hb = "Z18"
					case 1:
						b.I("VPSLLW $2, Z28, Z18")
						hb = "Z18"
					case 3:
						b.I("VPSRLW $2, Z28, Z18")
						hb = "Z18"
					}
					b.I("VPANDD Z17, %s, Z18", hb)
					// Z18 |= nibbles & 0x0f (Z18 has only bits 4-5).
					b.I("VPTERNLOGD $0xf8, Z16, Z%d, Z18", []int{26, 27, 29, 30}[g])
					b.I("VPBROADCASTD %d(DI), Z20", 128*h+32*g+4*k)
					b.I("VPMADDUBSW Z20, Z18, Z18")
					b.I("VPDPWSSD Z%d, Z18, Z%d", 22+g, k)
				}
				for q := 0; q < 3 && pf < data/64; q++ {
					b.I("PREFETCHT0 %d(R14)", 64*pf)
					pf++
				}
			}
		}
	}
	// fma(d·dy, float32(lane k), Z8+k): Q6KBODY's last instructions.
	b.I("VCVTPH2PS (R9), Z19")
	b.I("VMULPS.BCST (DX), Z19, Z19")
	for k := 0; k < 8; k++ {
		b.I("VCVTDQ2PS Z%d, Z%d", k, k)
		b.I("VFMADD231PS Z%d, Z19, Z%d", k, 8+k)
	}
	b.I("ADDQ $32, R9")
	b.I("ADDQ $%d, SI", data)
	b.I("ADDQ $%d, R14", data)
	b.I("ADDQ $256, DI")
	b.I("ADDQ $4, DX")
	b.I("ADDQ $32, BX")
	b.I("DECQ CX")
	b.I("JNZ super")
	// HSUM8's order per row: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).
	for k := 0; k < 4; k++ {
		b.I("VADDPS Z%d, Z%d, Z%d", 12+k, 8+k, 8+k)
	}
	b.I("VADDPS Z10, Z8, Z8")
	b.I("VADDPS Z11, Z9, Z9")
	b.I("VADDPS Z9, Z8, Z8")
	b.I("VMOVUPS Z8, (AX)")
	b.I("MOVQ R9, SI") // the next group follows this one's d
	b.I("ADDQ $64, AX")
	b.I("DECQ R10")
	b.I("JNZ group")
	b.I("VZEROUPPER")
	b.I("RET")
}

// consts writes the VPSHUFB masks that put scale byte s%4 of each dword in
// the high byte of both its words (q6kzsel<>, 64 bytes per s%4) and scale
// bytes 0,1 or 2,3 in the high bytes of its two words (q6kzpair<>); an
// arithmetic shift by 8 then sign-extends them.
func consts() {
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
	b.WriteString("\n")
	for j := 0; j < 4; j++ {
		mask("q6kzsel", j, func(i int) [4]byte { return [4]byte{0x80, byte(4*i + j), 0x80, byte(4*i + j)} })
	}
	fmt.Fprintf(&b, "GLOBL q6kzsel<>(SB), RODATA|NOPTR, $256\n")
	for h := 0; h < 2; h++ {
		mask("q6kzpair", h, func(i int) [4]byte { return [4]byte{0x80, byte(4*i + 2*h), 0x80, byte(4*i + 2*h + 1)} })
	}
	fmt.Fprintf(&b, "GLOBL q6kzpair<>(SB), RODATA|NOPTR, $128\n")
}

func main() {
	b.WriteString(`// Code generated by q6_k_decode_gen.go; DO NOT EDIT.

// Q6_K decode kernel on the decode layout (q6_k_decode.go): groups of 16
// rows, lane r of a zmm = row r; a super-block's 3328 bytes of scales,
// ql and qh are contiguous, its 16 d after the group's data. It computes,
// per row, what gemvQ6_KAVX2 does (dot_kquant_amd64.s, Q6KBODY) with the
// same float operations on the same operands, so every result is bitwise
// that kernel's (TestQ6KZGemv): its eight float lanes are Z8-Z15 here
// (lane k of the row = lane r of Z8+k), and the integers behind them are
// exact sums in any order.
//
// Registers: Z0-Z7 the super-block's integer lanes, Z8-Z15 the float
// accumulators, Z16 / Z17 the 0x0f / 0x30 byte masks, Z22-Z25 the scales
// of the sub-blocks in progress (words), Z26-Z30 the ql / qh dwords,
// Z18-Z20 temporaries; SI the super-block, R9 its d, R12 pf, R14 SI + pf
// (prefetch), R11 the group's data size, DI, DX, BX
// the activations, their d and bsums, CX the super-blocks left, R10 the
// groups left, AX the output.

#include "textflag.h"
`)
	kernel()
	consts()
	if err := b.Save("q6_k_decode_vnni_amd64.s"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
