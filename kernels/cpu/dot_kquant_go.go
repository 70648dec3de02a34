package cpu

// Portable K-quant dot kernels against Q8_K activations. Within a
// super-block everything is exact integer arithmetic (sub-block sums times
// their integer scales; the mins through the activation's 16-element sums);
// one float32 multiply-add per super-block scale accumulates in block order.

func dotQ2_KGo(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[84*b : 84*b+84]
		scales, qs := blk[0:16], blk[16:80]
		q8 := a.qs[qkK*b : qkK*b+qkK]
		bs := a.bsums[16*b : 16*b+16]
		var summs, isum int32
		for j := 0; j < 16; j++ {
			summs += int32(scales[j]>>4) * int32(bs[j])
		}
		// element n+32j+m (n in {0,128}) is byte n/4+m, bits 2j; sub-block e/16.
		for e := 0; e < qkK; e += 16 {
			n, j, m := e/128, (e%128)/32, e%32
			src := qs[32*n+m : 32*n+m+16]
			shift := uint(2 * j)
			var si int32
			for l, v := range src {
				si += int32((v>>shift)&3) * int32(q8[e+l])
			}
			isum += int32(scales[e/16]&15) * si
		}
		d := dy * tab[le16(blk[80:])]
		dmin := dy * tab[le16(blk[82:])]
		sum += d*float32(isum) - dmin*float32(summs)
	}
	return sum
}

func dotQ3_KGo(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[110*b : 110*b+110]
		hmask, qs, scales := blk[0:32], blk[32:96], blk[96:108]
		q8 := a.qs[qkK*b : qkK*b+qkK]
		var isum int32
		for e := 0; e < qkK; e += 16 {
			n, j, m := e/128, (e%128)/32, e%32
			src := qs[32*n+m : 32*n+m+16]
			hm := hmask[m : m+16]
			shift, bit := uint(2*j), byte(1)<<(e/32)
			var si int32
			for l, v := range src {
				w := int32((v >> shift) & 3)
				if hm[l]&bit == 0 {
					w -= 4
				}
				si += w * int32(q8[e+l])
			}
			isum += int32(scaleK3(e/16, scales)) * si
		}
		sum += dy * tab[le16(blk[108:])] * float32(isum)
	}
	return sum
}

// unpackScalesK4 decodes the eight 6-bit scales and mins of Q4_K/Q5_K.
func unpackScalesK4(s []byte) (sc, mn [8]int32) {
	for j := 0; j < 8; j++ {
		a, m := scaleMinK4(j, s)
		sc[j], mn[j] = int32(a), int32(m)
	}
	return sc, mn
}

func dotQ4_KGo(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[144*b : 144*b+144]
		sc, mn := unpackScalesK4(blk[4:16])
		qs := blk[16:144]
		q8 := a.qs[qkK*b : qkK*b+qkK]
		bs := a.bsums[16*b : 16*b+16]
		var summs, isum int32
		for j := 0; j < 8; j++ {
			summs += mn[j] * (int32(bs[2*j]) + int32(bs[2*j+1]))
		}
		for j := 0; j < 4; j++ {
			q := qs[32*j : 32*j+32]
			lo, hi := q8[64*j:64*j+32], q8[64*j+32:64*j+64]
			var s1, s2 int32
			for l, v := range q {
				s1 += int32(v&15) * int32(lo[l])
				s2 += int32(v>>4) * int32(hi[l])
			}
			isum += sc[2*j]*s1 + sc[2*j+1]*s2
		}
		d := dy * tab[le16(blk)]
		dmin := dy * tab[le16(blk[2:])]
		sum += d*float32(isum) - dmin*float32(summs)
	}
	return sum
}

func dotQ5_KGo(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[176*b : 176*b+176]
		sc, mn := unpackScalesK4(blk[4:16])
		qh, qs := blk[16:48], blk[48:176]
		q8 := a.qs[qkK*b : qkK*b+qkK]
		bs := a.bsums[16*b : 16*b+16]
		var summs, isum int32
		for j := 0; j < 8; j++ {
			summs += mn[j] * (int32(bs[2*j]) + int32(bs[2*j+1]))
		}
		for j := 0; j < 4; j++ {
			q := qs[32*j : 32*j+32]
			lo, hi := q8[64*j:64*j+32], q8[64*j+32:64*j+64]
			sh := uint(2 * j)
			var s1, s2 int32
			for l, v := range q {
				h := int32(qh[l] >> sh)
				s1 += (int32(v&15) | (h&1)<<4) * int32(lo[l])
				s2 += (int32(v>>4) | (h&2)<<3) * int32(hi[l])
			}
			isum += sc[2*j]*s1 + sc[2*j+1]*s2
		}
		d := dy * tab[le16(blk)]
		dmin := dy * tab[le16(blk[2:])]
		sum += d*float32(isum) - dmin*float32(summs)
	}
	return sum
}

func dotQ6_KGo(row []byte, a actView) float32 {
	tab := f16Table()
	var sum float32
	for b, dy := range a.d {
		blk := row[210*b : 210*b+210]
		ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
		q8 := a.qs[qkK*b : qkK*b+qkK]
		var isum int32
		for n := 0; n < 2; n++ {
			l0, h0, y := ql[64*n:64*n+64], qh[32*n:32*n+32], q8[128*n:128*n+128]
			var s [8]int32 // per 16-element sub-block of this half
			for l := 0; l < 32; l++ {
				h := h0[l]
				q1 := int32(l0[l]&15|(h&3)<<4) - 32
				q2 := int32(l0[l+32]&15|((h>>2)&3)<<4) - 32
				q3 := int32(l0[l]>>4|((h>>4)&3)<<4) - 32
				q4 := int32(l0[l+32]>>4|((h>>6)&3)<<4) - 32
				is := l / 16
				s[is] += q1 * int32(y[l])
				s[is+2] += q2 * int32(y[l+32])
				s[is+4] += q3 * int32(y[l+64])
				s[is+6] += q4 * int32(y[l+96])
			}
			for j, v := range s {
				isum += int32(int8(sc[8*n+j])) * v
			}
		}
		sum += dy * tab[le16(blk[208:])] * float32(isum)
	}
	return sum
}
