//go:build ignore

// k_decode_gen.go writes k_decode_vnni_amd64.s (go run k_decode_gen.go):
// the Q2_K to Q6_K decode-layout kernels (k_decode.go), for one token,
// and for Q5_K and Q6_K two to four.
package main

import (
	"fmt"
	"os"

	"oengine/kernels/cpu/internal/asmgen"
)

var b asmgen.File

// Block offsets of the Q4_K decode layout (k_decode.go).
const (
	q4D     = 0   // the 16 rows' F16 d
	q4Dmin  = 32  // their F16 dmin
	q4Scale = 64  // scale dword i (bytes 4i..4i+3 of the 12) at 64+64i
	q4Qs    = 256 // nibble dword k of chunk c at 256+512c+64k
	q4Block = 2304
)

// Block offsets of the Q5_K decode layout (k_decode.go): Q4_K's, with
// the qh dwords before the nibbles.
const (
	q5Qh    = 256 // qh dword k (bytes 4k..4k+3 of the 32) at 256+64k
	q5Qs    = 768 // nibble dword k of chunk c at 768+512c+64k
	q5Block = 2816
)

// Block offsets of the Q2_K decode layout (k_decode.go).
const (
	q2D     = 0   // the 16 rows' F16 d
	q2Dmin  = 32  // their F16 dmin
	q2Scale = 64  // scale dword i (bytes 4i..4i+3 of the 16) at 64+64i
	q2Qs    = 320 // qs dword m at 320+64m, m = 0..15
	q2Block = 1344
)

// Offsets in a super-block's data in the Q3_K decode layout (k_decode.go);
// its d are apart, after the group's data.
const (
	q3Scale = 0   // scale dword i (bytes 4i..4i+3 of the 12) at 64i, i = 0..2
	q3Hmask = 192 // hmask dword k at 192+64k, k = 0..7
	q3Qs    = 704 // qs dword m at 704+64m, m = 0..15
	q3Data  = 1728
)

// Offsets in a super-block's data in the Q6_K decode layout
// (k_decode.go); its d are apart, after the group's data.
const (
	q6Scale = 0    // scale dword i (scales 4i..4i+3) at 64i, i = 0..3
	q6Ql    = 256  // ql dword m at 256+64m, m = 0..31
	q6Qh    = 2304 // qh dword m at 2304+64m, m = 0..15
	q6Data  = 3328
)

// dLanes writes the super-block's end of the one-token kernels: Z8+k =
// fma(d·dy, float32(lane k in Z(k)), Z8+k), the 16 F16 d at src, dd the
// register for d·dy.
func dLanes(src string, dd int) {
	b.I("VCVTPH2PS %s, Z%d", src, dd)
	b.I("VMULPS.BCST (DX), Z%d, Z%d", dd, dd)
	for k := 0; k < 8; k++ {
		b.I("VCVTDQ2PS Z%d, Z%d", k, k)
		b.I("VFMADD231PS Z%d, Z%d, Z%d", k, dd, 8+k)
	}
}

// nextSuper moves the one-token kernels to the next super-block (size
// bytes of data) and loops to label.
func nextSuper(size int, label string) {
	b.I("ADDQ $%d, SI", size)
	b.I("ADDQ $%d, R14", size)
	b.I("ADDQ $256, DI")
	b.I("ADDQ $4, DX")
	b.I("ADDQ $32, BX")
	b.I("DECQ CX")
	b.I("JNZ %s", label)
}

// q5Step is one (chunk c, dword k) step of gemv16Q5_KP: Q5KPAIR's
// values, nibble | (bit 2c or 2c+1 of qh byte l) << 4 (0..31: pair sums
// at most 2·31·128), into lane k as in gemv16Q4_KP.
func q5Step(qsOff, c, k int) {
	b.I("VMOVDQU32 %d(SI), Z29", qsOff+512*c+64*k)
	b.I("VPSRLW $4, Z29, Z30")
	b.I("VMOVDQU32 %d(SI), Z26", q5Qh+64*k)
	q5Values(c, 26, 29, 20, 23)
	b.I("VPBROADCASTD %d(DI), Z31", 64*c+4*k)
	b.I("VPMADDUBSW Z31, Z23, Z23")
	b.I("VPBROADCASTD %d(DI), Z31", 64*c+32+4*k)
	b.I("VPMADDUBSW Z31, Z24, Z24")
	b.I("VPDPWSSD Z27, Z23, Z%d", k)
	b.I("VPDPWSSD Z28, Z24, Z%d", k)
	b.I("PREFETCHT0 %d(R14)", 64*(8*c+k))
}

// scalesMins loads the 12 scale bytes of a Q4_K/Q5_K super-block of the 16
// rows (three dwords each, into Z(in), Z(in+1), Z(in+2)) and unpacks them
// bytewise as Q4KBODY's scalar code does: sc[0..3] = s0 & 63 into Z(sc),
// sc[4..7] = (s2 & 15) | (s0>>6)<<4 into Z(sc+1), m[0..3] = s1 & 63 into
// Z(in), m[4..7] = (s2>>4) | (s1>>6)<<4 into Z(in+1); Z(tmp) is clobbered,
// Z(m0f) holds the 0x0f bytes.
func scalesMins(in, sc, tmp, m0f int) {
	for i := 0; i < 3; i++ {
		b.I("VMOVDQU32 %d(SI), Z%d", q4Scale+64*i, in+i)
	}
	b.I("VPANDD.BCST kz3f<>(SB), Z%d, Z%d", in, sc)
	b.I("VPSRLD $2, Z%d, Z%d", in, tmp)
	b.I("VPANDD.BCST kz30<>(SB), Z%d, Z%d", tmp, tmp)
	b.I("VPANDD Z%d, Z%d, Z%d", m0f, in+2, sc+1)
	b.I("VPORD Z%d, Z%d, Z%d", tmp, sc+1, sc+1)
	b.I("VPANDD.BCST kz3f<>(SB), Z%d, Z%d", in+1, in)
	b.I("VPSRLD $2, Z%d, Z%d", in+1, tmp)
	b.I("VPANDD.BCST kz30<>(SB), Z%d, Z%d", tmp, tmp)
	b.I("VPSRLD $4, Z%d, Z%d", in+2, in+1)
	b.I("VPANDD Z%d, Z%d, Z%d", m0f, in+1, in+1)
	b.I("VPORD Z%d, Z%d, Z%d", tmp, in+1, in+1)
}

// minLane writes Z(dst) = lane k (0..3) of the mins' part of Q4_K and
// Q5_K, m[2k]·B[2k] + m[2k+1]·B[2k+1] per row as dwords: the mins bytewise
// in Z(m) (m[0..3]) and Z(m+1) (m[4..7]), B's eight words (the bsums
// summed in pairs) in X0; Z(tmp) and X1 are clobbered.
func minLane(k, m, tmp, dst int) {
	b.I("VPSHUFB kzmw<>+%d(SB), Z%d, Z%d", 64*(k%2), m+k/2, dst)
	if k == 0 {
		b.I("VPBROADCASTD X0, Z%d", tmp)
	} else {
		b.I("VPSHUFD $0x%02x, X0, X1", 0x55*k)
		b.I("VPBROADCASTD X1, Z%d", tmp)
	}
	b.I("VPMADDWD Z%d, Z%d, Z%d", tmp, dst, dst)
}

// q5Values writes the values of chunk c's sub-blocks 2c (into Z(dst), from
// the low nibbles in Z(nib)) and 2c+1 (into Z(dst+1), from the high nibbles
// in Z(nib+1)): nibble | (bit 2c+h of the qh dword in Z(qh)) << 4, with the
// 0x0f byte mask in Z(m0f).
func q5Values(c, qh, nib, m0f, dst int) {
	for h := 0; h < 2; h++ {
		d, src := dst+h, fmt.Sprintf("Z%d", dst+h)
		switch bit := 2*c + h; {
		case bit < 4:
			b.I("VPSLLW $%d, Z%d, Z%d", 4-bit, qh, d)
		case bit > 4:
			b.I("VPSRLW $%d, Z%d, Z%d", bit-4, qh, d)
		default:
			src = fmt.Sprintf("Z%d", qh)
		}
		b.I("VPANDD.BCST kz10<>(SB), %s, Z%d", src, d)
		// Z(d) |= nibbles & 0x0f (Z(d) has only bit 4).
		b.I("VPTERNLOGD $0xf8, Z%d, Z%d, Z%d", m0f, nib+h, d)
	}
}

// scaleWords writes Z(z) = the scales of sub-block s of the 16 rows as
// sign-extended words, in both halves of each dword (kzq6sel<>), or with
// pair, scales s and s+1 (s even) in the two halves (kzq6pair<>). Q6_K's
// scale bytes are loaded from the super-block; Q3_K's (q3) are decoded
// already, scales 4i..4i+3 in Z26+i (q3Scales).
func scaleWords(q3 bool, s, z int, pair bool) {
	src := z
	if q3 {
		src = 26 + s/4
	} else {
		b.I("VMOVDQU32 %d(SI), Z%d", q6Scale+64*(s/4), z)
	}
	if pair {
		b.I("VPSHUFB kzq6pair<>+%d(SB), Z%d, Z%d", 64*(s%4/2), src, z)
	} else {
		b.I("VPSHUFB kzq6sel<>+%d(SB), Z%d, Z%d", 64*(s%4), src, z)
	}
	b.I("VPSRAW $8, Z%d, Z%d", z, z)
}

// q6Load writes the ql and qh dwords of lane k of half h: Z(r) / Z(r+1)
// the ql dwords of groups 0,2 / 1,3, Z(r+2) the qh dword, Z(r+3) / Z(r+4)
// the high nibbles of Z(r) / Z(r+1).
func q6Load(h, k, r int) {
	b.I("VMOVDQU32 %d(SI), Z%d", q6Ql+64*(16*h+k), r)
	b.I("VMOVDQU32 %d(SI), Z%d", q6Ql+64*(16*h+8+k), r+1)
	b.I("VMOVDQU32 %d(SI), Z%d", q6Qh+64*(8*h+k), r+2)
	b.I("VPSRLW $4, Z%d, Z%d", r, r+3)
	b.I("VPSRLW $4, Z%d, Z%d", r+1, r+4)
}

// q6Value writes Z(dst) = the 6-bit values of group g from q6Load's
// registers at r: (ql nibble) | (qh bits 2g, 2g+1) << 4, with the byte
// masks 0x0f in Z(m0f) and 0x30 in Z(m30).
func q6Value(g, r, dst, m0f, m30 int) {
	qh := fmt.Sprintf("Z%d", r+2)
	hb := fmt.Sprintf("Z%d", dst)
	switch g {
	case 0:
		b.I("VPSLLW $4, %s, %s", qh, hb)
	case 1:
		b.I("VPSLLW $2, %s, %s", qh, hb)
	case 2:
		hb = qh
	case 3:
		b.I("VPSRLW $2, %s, %s", qh, hb)
	}
	b.I("VPANDD Z%d, %s, Z%d", m30, hb, dst)
	// Z(dst) |= nibbles & 0x0f (Z(dst) has only bits 4-5).
	b.I("VPTERNLOGD $0xf8, Z%d, Z%d, Z%d", m0f, []int{r, r + 1, r + 3, r + 4}[g], dst)
}

// q45k1 writes gemv16Q4_KP, or (q5) gemv16Q5_KP: the same kernel with
// the 5th bits of Q5_K's values ORed into the nibbles.
func q45k1(q5 bool) {
	name, block, qsOff, lbl := "gemv16Q4_KP", q4Block, q4Qs, "q4"
	if q5 {
		name, block, qsOff, lbl = "gemv16Q5_KP", q5Block, q5Qs, "q5"
	}
	fmt.Fprintf(&b, `
// func %[1]s(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)
// ngroups ≥ 1, nb ≥ 1; out[16g+r] is row r of group g.
TEXT ·%[1]s(SB), NOSPLIT, $0-64
`, name)
	b.I("MOVQ grp+0(FP), SI")
	b.I("MOVQ ngroups+8(FP), R10")
	b.I("MOVQ pf+48(FP), R14")
	b.I("ADDQ SI, R14")
	b.I("MOVQ out+56(FP), AX")
	b.I("MOVL $0x0f0f0f0f, DX")
	b.I("VPBROADCASTD DX, Z20")
	fmt.Fprintf(&b, "\n%sgroup:\n", lbl)
	b.I("MOVQ qs+16(FP), DI")
	b.I("MOVQ d+24(FP), DX")
	b.I("MOVQ bsums+32(FP), BX")
	b.I("MOVQ nb+40(FP), CX")
	for z := 8; z < 20; z++ {
		b.I("VPXORD Z%d, Z%d, Z%d", z, z, z)
	}
	fmt.Fprintf(&b, "\n%ssuper:\n", lbl)
	// Scales and mins, as Q4KBODY's scalar code unpacks them, for the 16
	// rows at once: sc[0..3] = s0 & 63, sc[4..7] = (s2 & 15) | (s0>>6)<<4,
	// m[0..3] = s1 & 63, m[4..7] = (s2>>4) | (s1>>6)<<4, bytewise.
	scalesMins(23, 21, 26, 20)
	for o := 2048; o < block; o += 64 {
		b.I("PREFETCHT0 %d(R14)", o)
	}
	// The mins' part: X0 word j = bsums[2j]+bsums[2j+1] (the sums of the
	// eight 32-element sub-blocks); lane k of Q4KBODY's X12 is
	// m[2k]·word 2k + m[2k+1]·word 2k+1, and Z16+k accumulates
	// fma(dmin·dy, float32(lane k), ·).
	b.I("VMOVDQU (BX), X0")
	b.I("VPHADDW 16(BX), X0, X0")
	b.I("VCVTPH2PS %d(SI), Z26", q4Dmin)
	b.I("VMULPS.BCST (DX), Z26, Z26")
	for k := 0; k < 4; k++ {
		minLane(k, 23, 28, 27)
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
			b.I("VPSHUFB kzsel<>+%d(SB), %s, Z%d", 64*(j%4), src, 27+h)
		}
		for k := 0; k < 8; k++ {
			if q5 {
				q5Step(qsOff, c, k)
				continue
			}
			q, hi, a := 29, 30, 31 // lo is q, unpacked in place
			if k%2 == 1 {
				q, hi, a = 23, 24, 25
			}
			b.I("VMOVDQU32 %d(SI), Z%d", qsOff+512*c+64*k, q)
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
	dLanes(fmt.Sprintf("%d(SI)", q4D), 26)
	nextSuper(block, lbl+"super")
	// HSUM8's order per row for the d lanes; the dmin lanes 4-7 are
	// zeros, so their sum is (m0+m2)+(m1+m3) (m+0 = m: the accumulators
	// are never -0).
	b.HSum8(8)
	b.I("VADDPS Z18, Z16, Z16")
	b.I("VADDPS Z19, Z17, Z17")
	b.I("VADDPS Z17, Z16, Z16")
	b.I("VSUBPS Z16, Z8, Z8")
	b.I("VMOVUPS Z8, (AX)")
	b.I("ADDQ $64, AX")
	b.I("DECQ R10")
	b.I("JNZ %sgroup", lbl)
	b.I("VZEROUPPER")
	b.I("RET")
}

// q2k1 writes gemv16Q2_KP: dotQ2_KAVX2's arithmetic for 16 rows (Q2_K:
// sixteen 4-bit scales and mins a super-block, 2-bit values). Its eight
// float lanes of Σ d·sumi are Z8-Z15, its eight of Σ dmin·summs Z16-Z23.
// Registers: Z0-Z7 the integer lanes, Z24 the 0x03 byte mask, Z25-Z28
// the scales of the sub-blocks in progress (words), Z29-Z31 temporaries.
func q2k1() {
	b.WriteString(`
// func gemv16Q2_KP(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)
// ngroups ≥ 1, nb ≥ 1; out[16g+r] is row r of group g.
TEXT ·gemv16Q2_KP(SB), NOSPLIT, $0-64
`)
	b.I("MOVQ grp+0(FP), SI")
	b.I("MOVQ ngroups+8(FP), R10")
	b.I("MOVQ pf+48(FP), R14")
	b.I("ADDQ SI, R14")
	b.I("MOVQ out+56(FP), AX")
	b.I("MOVL $0x03030303, DX")
	b.I("VPBROADCASTD DX, Z24")
	fmt.Fprintf(&b, "\nq2group:\n")
	b.I("MOVQ qs+16(FP), DI")
	b.I("MOVQ d+24(FP), DX")
	b.I("MOVQ bsums+32(FP), BX")
	b.I("MOVQ nb+40(FP), CX")
	for z := 8; z < 24; z++ {
		b.I("VPXORD Z%d, Z%d, Z%d", z, z, z)
	}
	fmt.Fprintf(&b, "\nq2super:\n")
	// The mins' part: lane i of dotQ2_KAVX2's Y8 is m[2i]·bsums[2i] +
	// m[2i+1]·bsums[2i+1] (m = scale byte >> 4), Z16+i accumulates
	// fma(dmin·dy, float32(lane i), ·).
	b.I("VCVTPH2PS %d(SI), Z29", q2Dmin)
	b.I("VMULPS.BCST (DX), Z29, Z29")
	for q := 0; q < 4; q++ {
		b.I("VMOVDQU32 %d(SI), Z25", q2Scale+64*q)
		b.I("VPSRLD $4, Z25, Z26")
		b.I("VPANDD.BCST kz0f<>(SB), Z26, Z26")
		for h := 0; h < 2; h++ {
			i := 2*q + h
			b.I("VPSHUFB kzmw<>+%d(SB), Z26, Z27", 64*h)
			b.I("VPBROADCASTD %d(BX), Z28", 4*i)
			b.I("VPMADDWD Z28, Z27, Z27")
			b.I("VCVTDQ2PS Z27, Z27")
			b.I("VFMADD231PS Z27, Z29, Z%d", 16+i)
		}
	}
	for p := 0; p < 5; p++ { // 21 lines: five here, one a step below
		b.I("PREFETCHT0 %d(R14)", 64*p)
	}
	for k := 0; k < 8; k++ {
		b.I("VPXORD Z%d, Z%d, Z%d", k, k, k)
	}
	// The scales' part: the value of element l of group g of half h (qs
	// bytes 32h+l) is its bits 2g, 2g+1; lanes, sub-blocks and the pair
	// sums as gemv16Q6_KP's.
	pf := 5
	for h := 0; h < 2; h++ {
		for kh := 0; kh < 2; kh++ {
			for g := 0; g < 4; g++ {
				sb := 8*h + 2*g + kh
				b.I("VMOVDQU32 %d(SI), Z%d", q2Scale+64*(sb/4), 25+g)
				b.I("VPANDD.BCST kz0f<>(SB), Z%d, Z%d", 25+g, 25+g)
				b.I("VPSHUFB kzsel<>+%d(SB), Z%d, Z%d", 64*(sb%4), 25+g, 25+g)
			}
			for k := 4 * kh; k < 4*kh+4; k++ {
				b.I("VMOVDQU32 %d(SI), Z29", q2Qs+64*(8*h+k))
				for g := 0; g < 4; g++ {
					src := "Z29"
					if g > 0 {
						b.I("VPSRLW $%d, Z29, Z30", 2*g)
						src = "Z30"
					}
					b.I("VPANDD Z24, %s, Z30", src)
					b.I("VPBROADCASTD %d(DI), Z31", 128*h+32*g+4*k)
					b.I("VPMADDUBSW Z31, Z30, Z30")
					b.I("VPDPWSSD Z%d, Z30, Z%d", 25+g, k)
				}
				b.I("PREFETCHT0 %d(R14)", 64*pf)
				pf++
			}
		}
	}
	// Σ d·sumi lanes: fma(d·dy, float32(lane k), Z8+k).
	dLanes(fmt.Sprintf("%d(SI)", q2D), 25)
	nextSuper(q2Block, "q2super")
	// HSUM8's order per row for both sets of lanes, then their difference.
	b.HSum8(8)
	b.HSum8(16)
	b.I("VSUBPS Z16, Z8, Z8")
	b.I("VMOVUPS Z8, (AX)")
	b.I("ADDQ $64, AX")
	b.I("DECQ R10")
	b.I("JNZ q2group")
	b.I("VZEROUPPER")
	b.I("RET")
}

// q36k1 writes gemv16Q6_KP, or (q3) gemv16Q3_KP: the same frame around
// Q3_K's scales (sixteen 6-bit ones packed in 12 bytes, stored +32) and
// 3-bit values (two bits of qs, the third from hmask, stored +4).
func q36k1(q3 bool) {
	name, data, lbl := "gemv16Q6_KP", q6Data, "q6"
	if q3 {
		name, data, lbl = "gemv16Q3_KP", q3Data, "q3"
	}
	fmt.Fprintf(&b, `
// func %[1]s(grp *byte, ngroups int, qs *int8, d *float32, bsums *int16, nb, pf int, out *float32)
// ngroups ≥ 1, nb ≥ 1; out[16g+r] is row r of group g.
TEXT ·%[1]s(SB), NOSPLIT, $0-64
`, name)
	b.I("MOVQ grp+0(FP), SI")
	b.I("MOVQ ngroups+8(FP), R10")
	b.I("MOVQ out+56(FP), AX")
	if q3 {
		b.I("MOVL $0x03030303, DX")
		b.I("VPBROADCASTD DX, Z16")
		b.I("MOVL $0x04040404, DX")
		b.I("VPBROADCASTD DX, Z17")
		b.I("MOVL $0x20202020, DX")
		b.I("VPBROADCASTD DX, Z31")
	} else {
		b.I("MOVL $0x0f0f0f0f, DX")
		b.I("VPBROADCASTD DX, Z16")
		b.I("MOVL $0x30303030, DX")
		b.I("VPBROADCASTD DX, Z17")
	}
	b.I("MOVQ nb+40(FP), R11")
	b.I("IMULQ $%d, R11", data)
	b.I("MOVQ pf+48(FP), R12")
	fmt.Fprintf(&b, "\n%sgroup:\n", lbl)
	b.I("MOVQ qs+16(FP), DI")
	b.I("MOVQ d+24(FP), DX")
	b.I("MOVQ bsums+32(FP), BX")
	b.I("MOVQ nb+40(FP), CX")
	b.I("LEAQ (SI)(R11*1), R9") // the group's d
	b.I("LEAQ (SI)(R12*1), R14")
	for z := 8; z < 16; z++ {
		b.I("VPXORD Z%d, Z%d, Z%d", z, z, z)
	}
	fmt.Fprintf(&b, "\n%ssuper:\n", lbl)
	if q3 {
		q3Scales()
	}
	// Q6KBODY's (Q3_K: dotQ3_KAVX2's) start: lane i = -32 (-4)·(sc[2i]·
	// bsums[2i] + sc[2i+1]·bsums[2i+1]), the scales sign-extended to words.
	for i := 0; i < 8; i++ {
		scaleWords(q3, 2*i, 18, true)
		b.I("VPBROADCASTD %d(BX), Z20", 4*i)
		b.I("VPMADDWD Z20, Z18, Z18")
		if q3 {
			b.I("VPSLLD $2, Z18, Z18")
		} else {
			b.I("VPSLLD $5, Z18, Z18")
		}
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
	// value is (ql nibble) | (qh bits 2g, 2g+1) << 4, a 3-bit one (qs bits
	// 2g, 2g+1) | (hmask bit 4h+g) << 2, unsigned; the -32 (-4) is in the
	// lane's start above. VPMADDUBSW sums its products with the
	// activations in pairs (at most 2·63·128, no saturation), VPDPWSSD
	// multiplies both by the sub-block's scale and adds them.
	pf := 4
	for h := 0; h < 2; h++ {
		for kh := 0; kh < 2; kh++ {
			for g := 0; g < 4; g++ {
				scaleWords(q3, 8*h+2*g+kh, 22+g, false)
			}
			for k := 4 * kh; k < 4*kh+4; k++ {
				if q3 {
					b.I("VMOVDQU32 %d(SI), Z21", q3Qs+64*(8*h+k))
					b.I("VMOVDQU32 %d(SI), Z30", q3Hmask+64*k)
				} else {
					q6Load(h, k, 26)
				}
				for g := 0; g < 4; g++ {
					if q3 {
						q3Value(4*h+g, g)
					} else {
						q6Value(g, 26, 18, 16, 17)
					}
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
	dLanes("(R9)", 19)
	b.I("ADDQ $32, R9")
	nextSuper(data, lbl+"super")
	b.HSum8(8)
	b.I("VMOVUPS Z8, (AX)")
	b.I("MOVQ R9, SI") // the next group follows this one's d
	b.I("ADDQ $64, AX")
	b.I("DECQ R10")
	b.I("JNZ %sgroup", lbl)
	b.I("VZEROUPPER")
	b.I("RET")
}

// q3Scales writes Z26-Z29 = Q3_K's scales 0-3, 4-7, 8-11, 12-15 of the
// 16 rows as signed bytes, as dotQ3_KAVX2 decodes them (scaleK3): low
// four bits from scale bytes 0-7, high two from bytes 8-11, minus 32.
func q3Scales() {
	b.I("VMOVDQU32 %d(SI), Z18", q3Scale)     // s0: bytes 0-3
	b.I("VMOVDQU32 %d(SI), Z19", q3Scale+64)  // s1: bytes 4-7
	b.I("VMOVDQU32 %d(SI), Z20", q3Scale+128) // s2: bytes 8-11
	for i, c := range []struct {
		lo     int  // Z18 or Z19
		loHigh bool // the high nibbles of lo
		shift  int  // s2's bits 2i, 2i+1 moved to 4, 5: <0 right
	}{{18, false, 4}, {19, false, 2}, {18, true, 0}, {19, true, -2}} {
		z := 26 + i
		if c.loHigh {
			b.I("VPSRLD $4, Z%d, Z%d", c.lo, z)
			b.I("VPANDD.BCST kz0f<>(SB), Z%d, Z%d", z, z)
		} else {
			b.I("VPANDD.BCST kz0f<>(SB), Z%d, Z%d", c.lo, z)
		}
		hi := "Z20"
		switch {
		case c.shift > 0:
			b.I("VPSLLD $%d, Z20, Z21", c.shift)
			hi = "Z21"
		case c.shift < 0:
			b.I("VPSRLD $%d, Z20, Z21", -c.shift)
			hi = "Z21"
		}
		b.I("VPANDD.BCST kz30<>(SB), %s, Z21", hi)
		b.I("VPORD Z21, Z%d, Z%d", z, z)
		b.I("VPSUBB Z31, Z%d, Z%d", z, z)
	}
}

// q3Value writes Z18 = the 3-bit values of group gi (0-7; g = gi%4) from
// the qs dword in Z21 and the hmask dword in Z30: (qs bits 2g, 2g+1) |
// (hmask bit gi) << 2, with the byte masks 0x03 in Z16 and 0x04 in Z17.
func q3Value(gi, g int) {
	hm := "Z18"
	switch {
	case gi < 2:
		b.I("VPSLLW $%d, Z30, Z18", 2-gi)
	case gi > 2:
		b.I("VPSRLW $%d, Z30, Z18", gi-2)
	default:
		hm = "Z30"
	}
	b.I("VPANDD Z17, %s, Z18", hm)
	two := "Z21"
	if g > 0 {
		b.I("VPSRLW $%d, Z21, Z19", 2*g)
		two = "Z19"
	}
	// Z18 |= two bits & 0x03 (Z18 has only bit 2).
	b.I("VPTERNLOGD $0xf8, Z16, %s, Z18", two)
}

// The Q6_K (and Q5_K, q5kFew) kernels for T = 2..4 tokens read each
// super-block once for all of them. (Such kernels for Q4_K ran slower than
// its one-token kernel once a token, which has little to unpack;
// docs/performance.md.) They
// run lane by lane (k outer): for lane k every sub-block's dword k is
// unpacked once and multiplied with each token's activations into that
// token's integer lane (two accumulators, then one exact add), and the
// lane's float FMA is done with its accumulator kept in the stack frame:
// per token and row the same integers and the same float operations, in
// the same order per float lane, as the one-token kernel, so every
// result is bitwise its (TestKZGemvFew).

// fewHeader writes the TEXT line and the set-up shared by the T-token
// kernels; frame is the accumulator bytes per token.
func fewHeader(name string, T, frame int) {
	fmt.Fprintf(&b, "\n// func %s(grp *byte, ngroups int, qs *int8, qstride int, d *float32, bsums *int16, dstride, bstride, nb, pf int, out *float32, ostride int)\n", name)
	fmt.Fprintf(&b, "// The one-token kernel for %d tokens: token t's activations at qs +\n// t·qstride, its d at d + t·dstride, its bsums at bsums + t·bstride,\n// its results at out + t·ostride (bytes).\n", T)
	fmt.Fprintf(&b, "TEXT ·%s(SB), 0, $%d-96\n", name, T*frame)
	b.I("MOVQ grp+0(FP), SI")
	b.I("MOVQ qstride+24(FP), R8")
	b.I("LEAQ (R8)(R8*2), R12")
	b.I("MOVQ dstride+48(FP), R9")
	b.I("LEAQ (R9)(R9*2), R11")
	b.I("MOVL $0x0f0f0f0f, AX")
	b.I("VPBROADCASTD AX, Z31")
}

func qsAt(t, off int) string { return asmgen.TokAddr([2]string{"DI", ""}, "R8", "R12", t, off) }
func dAt(t int) string       { return asmgen.TokAddr([2]string{"DX", ""}, "R9", "R11", t, 0) }

// fewFloat: token t's lane k (integers in Z(acc)) into its accumulator at
// off(SP): fma(dd, float32(lane), acc) with dd in Z(dd).
func fewFloat(acc, dd, off int) {
	b.I("VCVTDQ2PS Z%d, Z%d", acc, acc)
	b.I("VFMADD213PS %d(SP), Z%d, Z%d", off, dd, acc)
	b.I("VMOVUPS Z%d, %d(SP)", acc, off)
}

// fewStore writes token t's 16 results: HSUM8's order over its eight lane
// accumulators at fo(SP).
func fewStore(t, fo int) {
	for k := 0; k < 8; k++ {
		b.I("VMOVUPS %d(SP), Z%d", fo+64*k, k)
	}
	for k := 0; k < 4; k++ {
		b.I("VADDPS Z%d, Z%d, Z%d", 4+k, k, k)
	}
	b.I("VADDPS Z2, Z0, Z0")
	b.I("VADDPS Z3, Z1, Z1")
	b.I("VADDPS Z1, Z0, Z0")
	b.I("VMOVUPS Z0, %s", asmgen.TokAddr([2]string{"AX", ""}, "CX", "R13", t, 0))
}

// q6kFew: gemv16Q6_KPT{T}. Registers: Z31 / Z30 the 0x0f / 0x30 byte
// masks, Z13+t token t's d·dy, Z17+4h+g the scales of sub-block
// 8h+2g+(k ≥ 4) (words), Z(t) / Z(9+t) token t's integer lane (half 0 /
// half 1), Z25-Z29 the ql / qh dwords, Z5-Z8 temporaries; R13 the
// super-block's d. Frame: token t's eight lanes at 576t (a line of
// padding per token: BenchmarkKZMatMul measured up to 1.2x slower
// without it, probably 4 KiB aliasing between the frame's stores and the
// loads of activations that lie 2048 bytes apart per token).
func q6kFew(T int) {
	const frame = 576
	fewHeader(fmt.Sprintf("gemv16Q6_KPT%d", T), T, frame)
	b.I("MOVL $0x30303030, AX")
	b.I("VPBROADCASTD AX, Z30")
	fmt.Fprintf(&b, "\nq6t%dgroup:\n", T)
	b.I("MOVQ pf+72(FP), R14")
	b.I("ADDQ SI, R14")
	b.I("MOVQ nb+64(FP), CX")
	b.I("IMUL3Q $%d, CX, R13", q6Data)
	b.I("ADDQ SI, R13")
	b.I("MOVQ qs+16(FP), DI")
	b.I("MOVQ d+32(FP), DX")
	b.I("MOVQ bsums+40(FP), BX")
	b.I("VPXORD Z0, Z0, Z0")
	for o := 0; o < T*frame; o += 64 {
		b.I("VMOVUPS Z0, %d(SP)", o)
	}
	fmt.Fprintf(&b, "\nq6t%dsuper:\n", T)
	b.I("VCVTPH2PS (R13), Z8")
	for t := 0; t < T; t++ {
		b.I("VMULPS.BCST %s, Z8, Z%d", dAt(t), 13+t)
	}
	for p := 0; p < 4; p++ {
		b.I("PREFETCHT0 %d(R14)", 64*p)
	}
	pf := 4
	for kh := 0; kh < 2; kh++ {
		for h := 0; h < 2; h++ {
			for g := 0; g < 4; g++ {
				scaleWords(false, 8*h+2*g+kh, 17+4*h+g, false)
			}
		}
		for k := 4 * kh; k < 4*kh+4; k++ {
			// The lane's start: -32·(sc[2k]·bsums[2k] + sc[2k+1]·bsums[2k+1]).
			scaleWords(false, 2*k, 8, true)
			b.I("MOVQ bstride+56(FP), AX")
			for t := 0; t < T; t++ {
				switch t {
				case 0:
					b.I("VPBROADCASTD %d(BX), Z6", 4*k)
				case 1:
					b.I("VPBROADCASTD %d(BX)(AX*1), Z6", 4*k)
				case 2:
					b.I("VPBROADCASTD %d(BX)(AX*2), Z6", 4*k)
				case 3:
					b.I("LEAQ (AX)(AX*2), AX")
					b.I("VPBROADCASTD %d(BX)(AX*1), Z6", 4*k)
				}
				b.I("VPMADDWD Z6, Z8, Z6")
				b.I("VPSLLD $5, Z6, Z6")
				b.I("VPXORD Z%d, Z%d, Z%d", t, t, t)
				b.I("VPSUBD Z6, Z%d, Z%d", t, t)
				b.I("VPXORD Z%d, Z%d, Z%d", 9+t, 9+t, 9+t)
			}
			for h := 0; h < 2; h++ {
				q6Load(h, k, 25)
				for g := 0; g < 4; g++ {
					q6Value(g, 25, 5, 31, 30)
					for t := 0; t < T; t++ {
						b.I("VPBROADCASTD %s, Z6", qsAt(t, 128*h+32*g+4*k))
						b.I("VPMADDUBSW Z6, Z5, Z7")
						b.I("VPDPWSSD Z%d, Z7, Z%d", 17+4*h+g, t+9*h)
					}
				}
				for q := 0; q < 3 && pf < q6Data/64; q++ {
					b.I("PREFETCHT0 %d(R14)", 64*pf)
					pf++
				}
			}
			for t := 0; t < T; t++ {
				b.I("VPADDD Z%d, Z%d, Z%d", 9+t, t, t)
				fewFloat(t, 13+t, frame*t+64*k)
			}
		}
	}
	b.I("ADDQ $32, R13")
	b.I("ADDQ $%d, SI", q6Data)
	b.I("ADDQ $%d, R14", q6Data)
	b.I("ADDQ $256, DI")
	b.I("ADDQ $4, DX")
	b.I("ADDQ $32, BX")
	b.I("DECQ CX")
	fmt.Fprintf(&b, "\tJNZ q6t%dsuper\n", T)
	b.I("MOVQ R13, SI") // the next group follows this one's d
	b.I("MOVQ out+80(FP), AX")
	b.I("MOVQ ostride+88(FP), CX")
	b.I("LEAQ (CX)(CX*2), R13")
	for t := 0; t < T; t++ {
		fewStore(t, frame*t)
	}
	b.I("ADDQ $64, AX")
	b.I("MOVQ AX, out+80(FP)")
	b.I("DECQ ngroups+8(FP)")
	fmt.Fprintf(&b, "\tJNZ q6t%dgroup\n", T)
	b.I("VZEROUPPER")
	b.I("RET")
}

// q5kFew: gemv16Q5_KPT{T}, gemv16Q5_KP's arithmetic lane by lane (k
// outer): for lane k each chunk's dword k is unpacked once (nibbles, the
// fifth bits ORed in as in q5Step) and multiplied with each token's
// activations into that token's integer lane (one accumulator for the
// low-nibble sub-blocks, one for the high, then one exact add), and the
// lane's float FMA is done with its accumulator kept in the stack frame.
// The mins' part is the one-token kernel's, token by token, into four
// more accumulators in the frame.
//
// Registers: Z31 the 0x0f byte mask, Z16+j the scales of sub-block j
// (words in both halves of each dword), Z8+t / Z12+t token t's d·dy and
// dmin·dy, Z(t) / Z(4+t) token t's integer lane (low / high sub-blocks;
// X0 / X1 the bsums pairs before the lanes start), Z24-Z30 temporaries. Frame: token t's eight d lanes at 832t, its four
// dmin lanes after them, and a line of padding (as q6kFew's).
func q5kFew(T int) {
	const frame = 832
	fewHeader(fmt.Sprintf("gemv16Q5_KPT%d", T), T, frame)
	fmt.Fprintf(&b, "\nq5t%dgroup:\n", T)
	b.I("MOVQ pf+72(FP), R14")
	b.I("ADDQ SI, R14")
	b.I("MOVQ nb+64(FP), CX")
	b.I("MOVQ qs+16(FP), DI")
	b.I("MOVQ d+32(FP), DX")
	b.I("MOVQ bsums+40(FP), BX")
	b.I("MOVQ bstride+56(FP), R13")
	b.I("VPXORD Z0, Z0, Z0")
	for o := 0; o < T*frame; o += 64 {
		b.I("VMOVUPS Z0, %d(SP)", o)
	}
	fmt.Fprintf(&b, "\nq5t%dsuper:\n", T)
	// Scales and mins bytewise as in gemv16Q4_KP: sc[0..3] in Z24,
	// sc[4..7] in Z25, m[0..3] in Z26, m[4..7] in Z27.
	scalesMins(26, 24, 29, 31)
	for j := 0; j < 8; j++ {
		src := "Z24"
		if j >= 4 {
			src = "Z25"
		}
		b.I("VPSHUFB kzsel<>+%d(SB), %s, Z%d", 64*(j%4), src, 16+j)
	}
	b.I("VCVTPH2PS %d(SI), Z28", q4D)
	b.I("VCVTPH2PS %d(SI), Z29", q4Dmin)
	for t := 0; t < T; t++ {
		b.I("VMULPS.BCST %s, Z28, Z%d", dAt(t), 8+t)
		b.I("VMULPS.BCST %s, Z29, Z%d", dAt(t), 12+t)
	}
	// The mins' part, per token: lane k = m[2k]·B[2k] + m[2k+1]·B[2k+1]
	// (B = the bsums summed in pairs), into its accumulator with dmin·dy.
	b.I("MOVQ BX, AX")
	for t := 0; t < T; t++ {
		if t > 0 {
			b.I("ADDQ R13, AX")
		}
		b.I("VMOVDQU (AX), X0") // VEX: X0-X15 only (Z0, Z1 are free here)
		b.I("VPHADDW 16(AX), X0, X0")
		for k := 0; k < 4; k++ {
			minLane(k, 26, 25, 24)
			fewFloat(24, 12+t, frame*t+512+64*k)
		}
	}
	pf := 0
	for k := 0; k < 8; k++ {
		for t := 0; t < T; t++ {
			b.I("VPXORD Z%d, Z%d, Z%d", t, t, t)
			b.I("VPXORD Z%d, Z%d, Z%d", 4+t, 4+t, 4+t)
		}
		b.I("VMOVDQU32 %d(SI), Z26", q5Qh+64*k)
		for c := 0; c < 4; c++ {
			b.I("VMOVDQU32 %d(SI), Z27", q5Qs+512*c+64*k)
			b.I("VPSRLW $4, Z27, Z28")
			q5Values(c, 26, 27, 31, 24)
			for t := 0; t < T; t++ {
				for h := 0; h < 2; h++ {
					b.I("VPBROADCASTD %s, Z29", qsAt(t, 64*c+32*h+4*k))
					b.I("VPMADDUBSW Z29, Z%d, Z30", 24+h)
					b.I("VPDPWSSD Z%d, Z30, Z%d", 16+2*c+h, 4*h+t)
				}
			}
			if pf < q5Block/64 {
				b.I("PREFETCHT0 %d(R14)", 64*pf)
				pf++
			}
		}
		for t := 0; t < T; t++ {
			b.I("VPADDD Z%d, Z%d, Z%d", 4+t, t, t)
			fewFloat(t, 8+t, frame*t+64*k)
		}
	}
	for ; pf < q5Block/64; pf++ {
		b.I("PREFETCHT0 %d(R14)", 64*pf)
	}
	b.I("ADDQ $%d, SI", q5Block)
	b.I("ADDQ $%d, R14", q5Block)
	b.I("ADDQ $256, DI")
	b.I("ADDQ $4, DX")
	b.I("ADDQ $32, BX")
	b.I("DECQ CX")
	fmt.Fprintf(&b, "\tJNZ q5t%dsuper\n", T)
	b.I("MOVQ out+80(FP), AX")
	b.I("MOVQ ostride+88(FP), CX")
	b.I("LEAQ (CX)(CX*2), R13")
	for t := 0; t < T; t++ {
		// HSUM8's order over the d lanes, minus (m0+m2)+(m1+m3), as
		// gemv16Q5_KP ends.
		fo := frame * t
		for k := 0; k < 8; k++ {
			b.I("VMOVUPS %d(SP), Z%d", fo+64*k, k)
		}
		for k := 0; k < 4; k++ {
			b.I("VADDPS Z%d, Z%d, Z%d", 4+k, k, k)
		}
		b.I("VADDPS Z2, Z0, Z0")
		b.I("VADDPS Z3, Z1, Z1")
		b.I("VADDPS Z1, Z0, Z0")
		for k := 0; k < 4; k++ {
			b.I("VMOVUPS %d(SP), Z%d", fo+512+64*k, 4+k)
		}
		b.I("VADDPS Z6, Z4, Z4")
		b.I("VADDPS Z7, Z5, Z5")
		b.I("VADDPS Z5, Z4, Z4")
		b.I("VSUBPS Z4, Z0, Z0")
		b.I("VMOVUPS Z0, %s", asmgen.TokAddr([2]string{"AX", ""}, "CX", "R13", t, 0))
	}
	b.I("ADDQ $64, AX")
	b.I("MOVQ AX, out+80(FP)")
	b.I("DECQ ngroups+8(FP)")
	fmt.Fprintf(&b, "\tJNZ q5t%dgroup\n", T)
	b.I("VZEROUPPER")
	b.I("RET")
}

// consts writes the constants: the byte masks; the VPSHUFB masks that
// spread Q4_K scale byte j%4 of each dword to both of its words (kzsel<>,
// 64 bytes per j%4) and make words of mins bytes 0,1 or 2,3 (kzmw<>); and
// those that put Q6_K scale byte s%4 in the high byte of both words
// (kzq6sel<>) or scale bytes 0,1 or 2,3 in the high bytes of the two
// words (kzq6pair<>), which an arithmetic shift by 8 then sign-extends.
func consts() {
	fmt.Fprintf(&b, "\nDATA kz3f<>+0(SB)/4, $0x3f3f3f3f\nGLOBL kz3f<>(SB), RODATA|NOPTR, $4\n")
	fmt.Fprintf(&b, "DATA kz30<>+0(SB)/4, $0x30303030\nGLOBL kz30<>(SB), RODATA|NOPTR, $4\n")
	fmt.Fprintf(&b, "DATA kz10<>+0(SB)/4, $0x10101010\nGLOBL kz10<>(SB), RODATA|NOPTR, $4\n")
	fmt.Fprintf(&b, "DATA kz0f<>+0(SB)/4, $0x0f0f0f0f\nGLOBL kz0f<>(SB), RODATA|NOPTR, $4\n")
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
		mask("kzsel", j, func(i int) [4]byte { return [4]byte{byte(4*i + j), 0x80, byte(4*i + j), 0x80} })
	}
	fmt.Fprintf(&b, "GLOBL kzsel<>(SB), RODATA|NOPTR, $256\n")
	for h := 0; h < 2; h++ {
		mask("kzmw", h, func(i int) [4]byte { return [4]byte{byte(4*i + 2*h), 0x80, byte(4*i + 2*h + 1), 0x80} })
	}
	fmt.Fprintf(&b, "GLOBL kzmw<>(SB), RODATA|NOPTR, $128\n")
	for j := 0; j < 4; j++ {
		mask("kzq6sel", j, func(i int) [4]byte { return [4]byte{0x80, byte(4*i + j), 0x80, byte(4*i + j)} })
	}
	fmt.Fprintf(&b, "GLOBL kzq6sel<>(SB), RODATA|NOPTR, $256\n")
	for h := 0; h < 2; h++ {
		mask("kzq6pair", h, func(i int) [4]byte { return [4]byte{0x80, byte(4*i + 2*h), 0x80, byte(4*i + 2*h + 1)} })
	}
	fmt.Fprintf(&b, "GLOBL kzq6pair<>(SB), RODATA|NOPTR, $128\n")
}

func main() {
	b.WriteString(`// Code generated by k_decode_gen.go; DO NOT EDIT.

// Q2_K to Q6_K decode kernels on their decode layouts (k_decode.go):
// groups of 16 rows, lane r of a zmm = row r. gemv16Q5_KP is
// gemv16Q4_KP with Q5_K's fifth bits, gemv16Q3_KP gemv16Q6_KP's frame
// around Q3_K's values, and gemv16Q2_KP is described at its code in the
// generator; every one is bitwise its row-major twin (TestKZGemv). The
// kernels for two to four tokens (gemv16Q5_KPT*, gemv16Q6_KPT*) are
// bitwise the one-token kernel per token (TestKZGemvFew).
//
// gemv16Q4_KP computes, per row, what gemvQ4_KAVX2 does
// (dot_kquant_amd64.s, Q4KBODY) with the same float operations on the
// same operands, so every result is bitwise that kernel's (TestKZGemv):
// its eight float lanes of Σ d·sumi are Z8-Z15 here (lane k of the row =
// lane r of Z8+k), its four lanes of Σ dmin·summs Z16-Z19, and the
// integers behind them are exact sums in any order. Registers: Z0-Z7 the
// super-block's integer lanes, Z8-Z19 the float accumulators, Z20 the
// nibble mask, Z21 / Z22 scales 0-3 / 4-7 (bytes), Z23-Z31 temporaries;
// SI the group, R14 SI + pf (prefetch), DI, DX, BX the activations, their
// d and bsums, CX the super-blocks left, R10 the groups left, AX the
// output.
//
// gemv16Q6_KP does the same for gemvQ6_KAVX2 (Q6KBODY): its eight float
// lanes are Z8-Z15. Registers: Z0-Z7 the super-block's integer lanes,
// Z8-Z15 the float accumulators, Z16 / Z17 the 0x0f / 0x30 byte masks,
// Z22-Z25 the scales of the sub-blocks in progress (words), Z26-Z30 the
// ql / qh dwords, Z18-Z20 temporaries; SI the super-block, R9 its d, R12
// pf, R14 SI + pf (prefetch), R11 the group's data size, DI, DX, BX the
// activations, their d and bsums, CX the super-blocks left, R10 the groups
// left, AX the output.

#include "textflag.h"
`)
	q45k1(false)
	q45k1(true)
	q2k1()
	q36k1(true)
	q36k1(false)
	for T := 2; T <= 4; T++ {
		q6kFew(T)
	}
	for T := 2; T <= 4; T++ {
		q5kFew(T)
	}
	consts()
	if err := b.Save("k_decode_vnni_amd64.s"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
