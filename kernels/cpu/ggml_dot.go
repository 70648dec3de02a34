package cpu

import (
	"math"

	"oengine/ggml"
)

// llama.cpp-exact matrix products ("GGML arithmetic").
//
// oengine's own kernels (MatMul) give every (row, token) pair one canonical
// float32 summation order, bitwise the same for every batch shape. That order
// is not the one llama.cpp's x86 AVX2 CPU backend (the build that wrote the
// reference logits in shared/testdata) uses, and the tiny random-weight
// reference models amplify one-ulp differences through the rounding of the
// next layer's quantized activations into logprob differences of 0.01-0.3,
// enough to flip greedy tokens at near-ties. GGMLMat.MatMul reproduces ggml's
// order for the types whose kernels are emulated here, so that a model run
// with it computes what llama.cpp computes bit for bit:
//
//	Q8_0 (ggml_vec_dot_q8_0_q8_0 and llamafile's tinyBLAS_Q0_AVX, which agree):
//	  per 32-block, eight int32 lanes of four products each; lane j
//	  acc[j] = fma(dw·dx, float32(lane j), acc[j]); then hsum_float_8.
//	Q6_K (ggml_vec_dot_q6_K_q8_K): per 256-block eight int32 lanes (lane j
//	  holds elements 4j..4j+3 of every 32-value vector, times its sub-block
//	  scale, minus 32·(bsums·scales) of sub-blocks 2j, 2j+1);
//	  acc[j] = fma(dx·dw, float32(lane j), acc[j]); then hsum_float_8.
//	Q4_K (weights repacked as q4_K_8x8): ggml_gemv_q4_K_8x8_q8_K takes per
//	  256-block the exact integer sums I = Σ sc·Σq·q8 and M = Σ min·bsum32,
//	  then acc = fma(float32(I), dw·dx, acc), accm = fma(float32(M),
//	  dminw·dx, accm); result acc − accm. ggml_gemm_q4_K_8x8_q8_K (groups
//	  of 4 tokens) does the same per 64 values (two sub-blocks) instead of
//	  per 256, so its results differ: llama.cpp runs tokens 0..n−n%4−1 of a
//	  batch of n > 3 through the gemm and the rest through the gemv, which
//	  GGMLMat.MatMul follows (batch-dependent for Q4_K).
//
//	F16: the activations are rounded to F16 first (ggml converts them to
//	  the weights' vec_dot type). One token (ggml_vec_dot_f16): four 8-lane
//	  accumulators over steps of 32, reduced as dotF16Order. Two tokens or
//	  more (llamafile's tinyBLAS, rows a multiple of 4): one 8-lane
//	  accumulator over steps of 8, then hsum8 (batch-dependent).
//
// Q4_0 needs no twin here: MatMul's canonical Q4_0 order (dot_blk.go,
// acc = fma(dw·dx, float32(block sum), acc) per 32-block) is already what
// ggml's repacked q4_0_8x8 gemv and gemm compute per pair.
//
// Quantized activations are quantized exactly as MatMul quantizes them (quant_act.go
// follows ggml's quantize_row_q8_0 / quantize_row_q8_K). Other types fall
// back to MatMul. All of this is per (row, token), so it is batch-invariant
// too; it is slower than MatMul (plain Go) and meant for verification
// against llama.cpp (llama.Options.GGMLArithmetic).

// GGMLSupported reports whether GGMLMat.MatMul emulates ggml for type t (others
// run MatMul's arithmetic).
func GGMLSupported(t ggml.Type) bool {
	switch t {
	case ggml.TypeQ8_0, ggml.TypeQ6_K, ggml.TypeQ4_K, ggml.TypeF16:
		return true
	}
	return false
}

// fmaF32 returns a·b+c rounded once to float32, as the FMA instruction does
// (fma32 may round twice in a halfway case; this one corrects it).
func fmaF32(a, b, c float32) float32 {
	p := float64(a) * float64(b) // exact: 24+24 bits
	s := p + float64(c)
	r := float32(s)
	// Two-sum error of s: zero when s is exact.
	bb := s - p
	e := (p - (s - bb)) + (float64(c) - bb)
	if e == 0 {
		return r
	}
	bits := math.Float64bits(s)
	if bits&(1<<29-1) == 1<<28 { // s is halfway between two float32: round by e's sign
		if (e > 0) == (s > 0) {
			bits++
		} else {
			bits--
		}
		r = float32(math.Float64frombits(bits))
	}
	return r
}

// hsum8 is ggml's hsum_float_8 (and tinyBLAS's hsum): the two 128-bit
// halves added lane-wise, then (0+2)+(1+3).
func hsum8(a *[8]float32) float32 {
	r0, r1, r2, r3 := a[0]+a[4], a[1]+a[5], a[2]+a[6], a[3]+a[7]
	return (r0 + r2) + (r1 + r3)
}

// ggmlDotQ8_0 is ggml_vec_dot_q8_0_q8_0 (AVX2) for one row of Q8_0 blocks
// and one token's Q8_0 activations (qs [cols], d [cols/32] F16-rounded).
func ggmlDotQ8_0(row []byte, qs []int8, d []float32) float32 {
	tab := f16Table()
	var acc [8]float32
	for b, dy := range d {
		blk := row[34*b : 34*b+34]
		db := tab[le16(blk)] * dy
		w, q := blk[2:34], qs[32*b:32*b+32]
		for j := 0; j < 8; j++ {
			s := int32(int8(w[4*j]))*int32(q[4*j]) + int32(int8(w[4*j+1]))*int32(q[4*j+1]) +
				int32(int8(w[4*j+2]))*int32(q[4*j+2]) + int32(int8(w[4*j+3]))*int32(q[4*j+3])
			acc[j] = fmaF32(db, float32(s), acc[j])
		}
	}
	return hsum8(&acc)
}

// ggmlDotQ6_K is ggml_vec_dot_q6_K_q8_K (AVX2): blocks of 210 bytes
// (ql[128], qh[64], scales[16] int8, d F16) against Q8_K activations.
func ggmlDotQ6_K(row []byte, qs []int8, d []float32, bsums []int16) float32 {
	tab := f16Table()
	var acc [8]float32
	for b, dy := range d {
		blk := row[210*b : 210*b+210]
		ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
		q8 := qs[qkK*b : qkK*b+qkK]
		bs := bsums[16*b : 16*b+16]
		var lane [8]int32
		for jj := 0; jj < 2; jj++ { // 128 values each
			l0, h0 := ql[64*jj:64*jj+64], qh[32*jj:32*jj+32]
			for k := 0; k < 4; k++ { // 32-value vectors q4_0..q4_3
				y := q8[128*jj+32*k : 128*jj+32*k+32]
				for e := 0; e < 32; e++ {
					var v int32
					switch k {
					case 0:
						v = int32(l0[e]&15 | (h0[e]&3)<<4)
					case 1:
						v = int32(l0[32+e]&15 | ((h0[e]>>2)&3)<<4)
					case 2:
						v = int32(l0[e]>>4 | ((h0[e]>>4)&3)<<4)
					default:
						v = int32(l0[32+e]>>4 | ((h0[e]>>6)&3)<<4)
					}
					s := int32(int8(sc[8*jj+2*k+e/16]))
					lane[e/4] += s * v * int32(y[e])
				}
			}
		}
		for j := 0; j < 8; j++ {
			sub := int32(bs[2*j])*int32(int8(sc[2*j])) + int32(bs[2*j+1])*int32(int8(sc[2*j+1]))
			lane[j] -= sub << 5
		}
		dd := dy * tab[le16(blk[208:])]
		for j := 0; j < 8; j++ {
			acc[j] = fmaF32(dd, float32(lane[j]), acc[j])
		}
	}
	return hsum8(&acc)
}

// ggmlDotQ4_K is the value ggml_gemv_q4_K_8x8_q8_K (AVX2, repacked
// weights) computes for one weight row and one token; with gemm set, the
// value ggml_gemm_q4_K_8x8_q8_K computes (accumulation per 64 values).
func ggmlDotQ4_K(row []byte, qs []int8, d []float32, bsums []int16, gemm bool) float32 {
	tab := f16Table()
	var acc, accm float32
	for b, dy := range d {
		blk := row[144*b : 144*b+144]
		sc, mn := unpackScalesK4(blk[4:16])
		q := blk[16:144]
		q8 := qs[qkK*b : qkK*b+qkK]
		bs := bsums[16*b : 16*b+16]
		dw, dmin := tab[le16(blk)], tab[le16(blk[2:])]
		var I, M int32
		for j := 0; j < 4; j++ {
			qq := q[32*j : 32*j+32]
			lo, hi := q8[64*j:64*j+32], q8[64*j+32:64*j+64]
			var s1, s2 int32
			for l, v := range qq {
				s1 += int32(v&15) * int32(lo[l])
				s2 += int32(v>>4) * int32(hi[l])
			}
			i := sc[2*j]*s1 + sc[2*j+1]*s2
			m := mn[2*j]*(int32(bs[4*j])+int32(bs[4*j+1])) + mn[2*j+1]*(int32(bs[4*j+2])+int32(bs[4*j+3]))
			if gemm {
				acc = fmaF32(float32(i), dw*dy, acc)
				accm = fmaF32(float32(m), dmin*dy, accm)
			}
			I += i
			M += m
		}
		if !gemm {
			acc = fmaF32(float32(I), dw*dy, acc)
			accm = fmaF32(float32(M), dmin*dy, accm)
		}
	}
	return acc - accm
}

// ggmlDotF16 is ggml's F16 product of one weight row w (F16 values widened
// to float32) with one token's F16-rounded activations x: ggml_vec_dot_f16,
// or with gemm set llamafile's tinyBLAS (one fused multiply-add chain per
// lane, then the horizontal sum); avx512 selects the 16-lane forms.
func ggmlDotF16(w, x []float32, gemm, avx512 bool) float32 {
	switch {
	case !gemm && avx512:
		return dotF16Order512(w, x)
	case !gemm:
		return dotF16Order(w, x)
	}
	// The product of two F16 values is exact in float32, so the fused
	// multiply-add is a float32 add of the product.
	w = w[:len(x)]
	if avx512 {
		var acc [16]float32
		for l := 0; l+16 <= len(x); l += 16 {
			wl, xl := w[l:l+16], x[l:l+16]
			for m := range acc {
				acc[m] += wl[m] * xl[m]
			}
		}
		return reduceAdd512(&acc)
	}
	var acc [8]float32
	for l := 0; l+8 <= len(x); l += 8 {
		wl, xl := w[l:l+8], x[l:l+8]
		for m := range acc {
			acc[m] += wl[m] * xl[m]
		}
	}
	return hsum8(&acc)
}
