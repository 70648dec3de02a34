package cpu

import "math"

// Attention over an F16 K/V store, computed the way ggml's CPU flash
// attention (ggml_compute_forward_flash_attn_ext_f16, one query row at a
// time) computes it, because llama.cpp's reference logits come from it and
// random-weight quantized models amplify every difference:
//
//   - the query is rounded to F16, then dotted with each F16 key in float32
//     with ggml's AVX2 summation order (4 vectors of 8 lanes over 32-value
//     steps, then a fixed tree reduction); products of two F16 values are
//     exact in float32, so fused or not gives the same sums;
//   - softmax is online (running max M and sum S in float32, expf);
//   - the V accumulator is F16: every update rounds
//     acc = f16(fma(v, w, acc)), and a new max rescales acc = f16(acc*ms);
//   - finally out = float32(acc) * (1/S).
//
// Positions are visited in order 0..n-1. attendF16Ref is its plain twin
// (element by element, through F16ToF32/F32ToF16); attn_test.go compares them
// bit for bit and both with the float64 AttendRef within F16 tolerance.

// AttendF16 computes the same attention as Attend (same arguments) with the
// F16 arithmetic described above. K and V must be F16 stores; an F32 store
// falls back to Attend.
func AttendF16(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, scratch []float32) {
	AttendF16Window(out, q, g, k, v, table, n, off, scale, AttnOpts{}, scratch)
}

// AttendF16Window is AttendF16 with o's Skip and Sinks, as ggml's flash
// attention applies them: masked positions are passed over, and after the
// last position each head's sink joins its softmax (a sink above the
// running maximum M rescales the accumulator, now float32, by e^(M−sink)
// and the sum to S·e^(M−sink) + 1; otherwise the sum gains
// e^(sink−M)). With a Softcap it is AttendWindow.
func AttendF16Window(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, o AttnOpts, scratch []float32) {
	if k.F16 == nil || v.F16 == nil || o.Softcap != 0 {
		AttendWindow(out, q, g, k, v, table, n, off, scale, o, scratch)
		return
	}
	if o.Skip < 0 || o.Skip >= n {
		panic("cpu: attention window skips every position")
	}
	if attendF16SIMD(out, q, g, k, v, table, n, off, scale, o, scratch) { // AVX2, bitwise the same (attn_f16_amd64.go)
		return
	}
	d := len(q) / g
	// scratch: q16 [g][d] | acc [g][d] | row [d] | M, S [g] each.
	q16 := scratch[:g*d]
	acc := scratch[g*d : 2*g*d]
	row := scratch[2*g*d : 2*g*d+d]
	ms := scratch[2*g*d+d : 2*g*d+d+2*g]
	M, S := ms[:g], ms[g:2*g]
	for i, x := range q[:g*d] {
		q16[i] = roundF16(x)
	}
	for i := range acc {
		acc[i] = 0
	}
	for h := 0; h < g; h++ {
		M[h] = float32(math.Inf(-1))
		S[h] = 0
	}
	tab := f16Table()
	for p := o.Skip; p < n; p++ {
		ki := k.index(table, p, off)
		kr := k.F16[ki : ki+d]
		for j, b := range kr {
			row[j] = tab[b]
		}
		vi := v.index(table, p, off)
		vr := v.F16[vi : vi+d]
		for h := 0; h < g; h++ {
			s := dotF16Order(q16[h*d:h*d+d], row) * scale
			a := acc[h*d : h*d+d]
			w := float32(1)
			if s > M[h] {
				m := float32(math.Exp(float64(M[h] - s)))
				M[h] = s
				for j := range a {
					a[j] = roundF16(a[j] * m)
				}
				S[h] = fmaF32(S[h], m, 1) // ggml: S = S*ms + vs, fused (gnu++17 builds contract)
			} else {
				w = float32(math.Exp(float64(s - M[h])))
				S[h] += w
			}
			for j, b := range vr {
				a[j] = roundF16(float32(math.FMA(float64(tab[b]), float64(w), float64(a[j]))))
			}
		}
	}
	attnF16Finish(out, acc, M, S, o.Sinks, g, d)
}

// attnF16Finish ends AttendF16Window for the g heads: each sink (when
// sinks is set) joins its head's softmax, then out = acc · (1/S).
func attnF16Finish(out, acc, M, S, sinks []float32, g, d int) {
	for h := 0; h < g; h++ {
		a := acc[h*d : h*d+d]
		if sinks != nil {
			if s := sinks[h]; s > M[h] {
				ms := float32(math.Exp(float64(M[h] - s)))
				for j := range a {
					a[j] *= ms
				}
				S[h] = fmaF32(S[h], ms, 1)
			} else {
				S[h] += float32(math.Exp(float64(s - M[h])))
			}
		}
		inv := 1 / S[h]
		o := out[h*d : h*d+d]
		for j := range o {
			o[j] = a[j] * inv
		}
	}
}

// dotF16Order sums a[i]*b[i] in the order of ggml_vec_dot_f16 with AVX2:
// lane l of vector j (j<4, l<8) accumulates the elements 32*t + 8*j + l;
// then vectors 0+2, 1+3, 0+1; then lanes l and l+4; then (0+1)+(2+3).
// Values past the last whole 32-step are added one by one afterwards.
func dotF16Order(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var acc [32]float32
	np := n &^ 31
	for i := 0; i < np; i += 32 {
		x, y := a[i:i+32], b[i:i+32]
		for l := range acc {
			acc[l] += x[l] * y[l]
		}
	}
	var v [8]float32
	for l := 0; l < 8; l++ {
		v[l] = (acc[l] + acc[16+l]) + (acc[8+l] + acc[24+l])
	}
	t0, t1, t2, t3 := v[0]+v[4], v[1]+v[5], v[2]+v[6], v[3]+v[7]
	sum := float64((t0 + t1) + (t2 + t3))
	for i := np; i < n; i++ {
		sum += float64(a[i] * b[i])
	}
	return float32(sum)
}

// roundF16 returns x rounded to the nearest F16 value (ties to even) as a
// float32: F16ToF32(F32ToF16(x)), with a fast path for the normal range.
func roundF16(x float32) float32 {
	b := math.Float32bits(x)
	if a := b & 0x7fffffff; a >= 0x38800000 && a < 0x477ff000 { // 2^-14 <= |x| < 65520
		b += 0xfff + (b>>13)&1
		return math.Float32frombits(b &^ 0x1fff)
	}
	return F16ToF32(F32ToF16(x))
}

// attendF16Ref is the plain twin of AttendF16: the same arithmetic written
// element by element with the exported conversions.
func attendF16Ref(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, o AttnOpts) {
	d := len(q) / g
	for h := 0; h < g; h++ {
		qh := make([]float32, d)
		for j := range qh {
			qh[j] = F16ToF32(F32ToF16(q[h*d+j]))
		}
		acc := make([]uint16, d)
		M, S := float32(math.Inf(-1)), float32(0)
		krow := make([]float32, d)
		for p := o.Skip; p < n; p++ {
			for j := range krow {
				krow[j] = k.At(table, p, off+j)
			}
			s := dotF16Order(qh, krow) * scale
			w, m := float32(1), float32(1)
			if s > M {
				m = float32(math.Exp(float64(M - s)))
				M = s
				for j := range acc {
					acc[j] = F32ToF16(F16ToF32(acc[j]) * m)
				}
			} else {
				w = float32(math.Exp(float64(s - M)))
			}
			for j := range acc {
				x := math.FMA(float64(v.At(table, p, off+j)), float64(w), float64(F16ToF32(acc[j])))
				acc[j] = F32ToF16(float32(x))
			}
			S = fmaF32(S, m, w) // S*ms + vs, fused as in ggml's build
		}
		ms := float32(1)
		if o.Sinks != nil {
			if s := o.Sinks[h]; s > M {
				ms = float32(math.Exp(float64(M - s)))
				S = fmaF32(S, ms, 1)
			} else {
				S = fmaF32(S, 1, float32(math.Exp(float64(s-M))))
			}
		}
		for j := 0; j < d; j++ {
			a := F16ToF32(acc[j])
			if ms != 1 {
				a *= ms
			}
			out[h*d+j] = a * (1 / S)
		}
	}
}
