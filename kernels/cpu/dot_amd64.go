package cpu

import "oengine/ggml"

// AVX2 kernels (dot_amd64.s, dot_kquant_amd64.s). nb is the number of blocks;
// the float kernels take n, a multiple of 8.

//go:noescape
func dotQ4_1AVX2(row *byte, qs *int8, d, s *float32, nb int) float32

//go:noescape
func dotQ5_1AVX2(row *byte, qs *int8, d, s *float32, nb int) float32

//go:noescape
func dotF16AVX2(row *byte, x *float32, n int) float32

//go:noescape
func dotBF16AVX2(row *byte, x *float32, n int) float32

//go:noescape
func dotF32AVX2(row *byte, x *float32, n int) float32

//go:noescape
func dotQ2_KAVX2(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ3_KAVX2(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ4_KAVX2(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ5_KAVX2(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32

//go:noescape
func dotQ6_KAVX2(row *byte, qs *int8, d *float32, bsums *int16, nb int) float32

// simdKernels are the AVX2 replacements for the portable dot kernels.
// Q4_0, Q8_0, Q5_0 and IQ4_NL have none here: from AVX2 on they run the
// blocked kernels (dot_blk*.go, blk_conv.go).
var simdKernels = map[ggml.Type]func(row []byte, a actView) float32{
	ggml.TypeIQ4_XS: dotIQ4_XSSIMD, // dot_iq4_amd64.go; IQ4_NL runs the blocked Q8_0 kernels (tileConv)
	ggml.TypeQ4_1: func(row []byte, a actView) float32 {
		_ = row[20*len(a.d)-1]
		_ = a.qs[32*len(a.d)-1]
		_ = a.s[len(a.d)-1]
		return dotQ4_1AVX2(&row[0], &a.qs[0], &a.d[0], &a.s[0], len(a.d))
	},
	ggml.TypeQ5_1: func(row []byte, a actView) float32 {
		_ = row[24*len(a.d)-1]
		_ = a.qs[32*len(a.d)-1]
		_ = a.s[len(a.d)-1]
		return dotQ5_1AVX2(&row[0], &a.qs[0], &a.d[0], &a.s[0], len(a.d))
	},
	ggml.TypeQ2_K: func(row []byte, a actView) float32 {
		_ = row[84*len(a.d)-1]
		_ = a.qs[256*len(a.d)-1]
		_ = a.bsums[16*len(a.d)-1]
		return dotQ2_KAVX2(&row[0], &a.qs[0], &a.d[0], &a.bsums[0], len(a.d))
	},
	ggml.TypeQ3_K: func(row []byte, a actView) float32 {
		_ = row[110*len(a.d)-1]
		_ = a.qs[256*len(a.d)-1]
		_ = a.bsums[16*len(a.d)-1]
		return dotQ3_KAVX2(&row[0], &a.qs[0], &a.d[0], &a.bsums[0], len(a.d))
	},
	ggml.TypeQ4_K: func(row []byte, a actView) float32 {
		_ = row[144*len(a.d)-1]
		_ = a.qs[256*len(a.d)-1]
		_ = a.bsums[16*len(a.d)-1]
		return dotQ4_KAVX2(&row[0], &a.qs[0], &a.d[0], &a.bsums[0], len(a.d))
	},
	ggml.TypeQ5_K: func(row []byte, a actView) float32 {
		_ = row[176*len(a.d)-1]
		_ = a.qs[256*len(a.d)-1]
		_ = a.bsums[16*len(a.d)-1]
		return dotQ5_KAVX2(&row[0], &a.qs[0], &a.d[0], &a.bsums[0], len(a.d))
	},
	ggml.TypeQ6_K: func(row []byte, a actView) float32 {
		_ = row[210*len(a.d)-1]
		_ = a.qs[256*len(a.d)-1]
		_ = a.bsums[16*len(a.d)-1]
		return dotQ6_KAVX2(&row[0], &a.qs[0], &a.d[0], &a.bsums[0], len(a.d))
	},
	ggml.TypeF16: func(row []byte, a actView) float32 {
		x := a.x
		n8 := len(x) &^ 7
		_ = row[2*len(x)-1]
		s := dotF16AVX2(&row[0], &x[0], n8)
		tab := f16Table()
		for i := n8; i < len(x); i++ {
			s += tab[le16(row[2*i:])] * x[i]
		}
		return s
	},
	ggml.TypeBF16: func(row []byte, a actView) float32 {
		x := a.x
		n8 := len(x) &^ 7
		_ = row[2*len(x)-1]
		s := dotBF16AVX2(&row[0], &x[0], n8)
		for i := n8; i < len(x); i++ {
			s += BF16ToF32(le16(row[2*i:])) * x[i]
		}
		return s
	},
	ggml.TypeF32: func(row []byte, a actView) float32 {
		x := a.x
		n8 := len(x) &^ 7
		_ = row[4*len(x)-1]
		s := dotF32AVX2(&row[0], &x[0], n8)
		for i := n8; i < len(x); i++ {
			s += f32le(row[4*i:]) * x[i]
		}
		return s
	},
}

// Four-token kernels (dot_x4_amd64.s); strides are in bytes.

//go:noescape
func dotF16x4AVX2(row *byte, x *float32, n, xstride int, out *float32)

//go:noescape
func dotQ4_1x4AVX2(row *byte, qs *int8, d, s *float32, nb, qstride, dstride int, out *float32)

//go:noescape
func dotQ5_1x4AVX2(row *byte, qs *int8, d, s *float32, nb, qstride, dstride int, out *float32)

//go:noescape
func dotQ2_Kx4AVX2(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)

//go:noescape
func dotQ3_Kx4AVX2(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)

//go:noescape
func dotQ4_Kx4AVX2(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)

//go:noescape
func dotQ5_Kx4AVX2(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)

//go:noescape
func dotQ6_Kx4AVX2(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)

// kx4Func is the signature of the K-quant four-token kernels: row (nb
// super-blocks) against four tokens whose qs, d and bsums lie qstride,
// dstride and 8·dstride bytes apart.
type kx4Func func(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)

// kx4 wraps a K-quant four-token kernel (bs bytes per super-block) as a
// kernel.dot4, checking the bounds the assembly relies on.
func kx4(f kx4Func, bs int) func(row []byte, a actView, cols int) [4]float32 {
	return func(row []byte, a actView, cols int) (out [4]float32) {
		nb := cols / qkK
		_ = row[bs*nb-1]
		_ = a.qs[4*cols-1]
		_ = a.d[4*nb-1]
		_ = a.bsums[4*16*nb-1]
		f(&row[0], &a.qs[0], &a.d[0], &a.bsums[0], nb, cols, 4*nb, &out[0])
		return out
	}
}

// simdKernels4 are the four-token kernels; each must give, per token,
// bitwise the result of the one-token kernel in simdKernels. (Q4_0, Q8_0,
// Q5_0 and IQ4_NL have none: they run the blocked kernels, dot_blk*.go.)
var simdKernels4 = map[ggml.Type]func(row []byte, a actView, cols int) [4]float32{
	ggml.TypeIQ4_XS: dotIQ4_XSx4SIMD,
	ggml.TypeQ4_1: func(row []byte, a actView, cols int) (out [4]float32) {
		nb := cols / qk
		_ = row[20*nb-1]
		_ = a.qs[4*cols-1]
		_ = a.d[4*nb-1]
		_ = a.s[4*nb-1]
		dotQ4_1x4AVX2(&row[0], &a.qs[0], &a.d[0], &a.s[0], nb, cols, 4*nb, &out[0])
		return out
	},
	ggml.TypeQ5_1: func(row []byte, a actView, cols int) (out [4]float32) {
		nb := cols / qk
		_ = row[24*nb-1]
		_ = a.qs[4*cols-1]
		_ = a.d[4*nb-1]
		_ = a.s[4*nb-1]
		dotQ5_1x4AVX2(&row[0], &a.qs[0], &a.d[0], &a.s[0], nb, cols, 4*nb, &out[0])
		return out
	},
	ggml.TypeQ2_K: kx4(dotQ2_Kx4AVX2, 84),
	ggml.TypeQ3_K: kx4(dotQ3_Kx4AVX2, 110),
	ggml.TypeQ4_K: kx4(dotQ4_Kx4AVX2, 144),
	ggml.TypeQ5_K: kx4(dotQ5_Kx4AVX2, 176),
	ggml.TypeQ6_K: kx4(dotQ6_Kx4AVX2, 210),
	ggml.TypeF16: func(row []byte, a actView, cols int) (out [4]float32) {
		x := a.x
		n8 := cols &^ 7
		_ = row[2*cols-1]
		_ = x[4*cols-1]
		dotF16x4AVX2(&row[0], &x[0], n8, 4*cols, &out[0])
		if n8 < cols {
			tab := f16Table()
			for t := range out {
				s := out[t]
				for i := n8; i < cols; i++ {
					s += tab[le16(row[2*i:])] * x[t*cols+i]
				}
				out[t] = s
			}
		}
		return out
	},
}

//go:noescape
func dotF16x2x2AVX2(row *byte, rb int, x *float32, n, xstride int, out *float32)

// simdKernels22 are the two-row × two-token tile kernels; each pair must
// give bitwise the one-token kernel's result.
var simdKernels22 = map[ggml.Type]func(rows []byte, rb int, a actView, cols int) [4]float32{
	ggml.TypeF16: func(rows []byte, rb int, a actView, cols int) (out [4]float32) {
		x := a.x
		n8 := cols &^ 7
		_ = rows[rb+2*cols-1]
		_ = x[2*cols-1]
		dotF16x2x2AVX2(&rows[0], rb, &x[0], n8, 4*cols, &out[0])
		if n8 < cols {
			tab := f16Table()
			for p := range out {
				r, t := p/2, p%2
				s := out[p]
				for i := n8; i < cols; i++ {
					s += tab[le16(rows[r*rb+2*i:])] * x[t*cols+i]
				}
				out[p] = s
			}
		}
		return out
	},
}

//go:noescape
func quantQ8AVX2(x *float32, qs *int8, d *float32, nb int)

// quantQ8SIMD quantizes whole 32-blocks of x with quantQ8AVX2; it returns
// false (doing nothing) without AVX2.
func quantQ8SIMD(x []float32, qs []int8, d []float32) bool {
	nb := len(x) / qk
	if !hasAVX2 || nb == 0 {
		return hasAVX2
	}
	_ = qs[nb*qk-1]
	_ = d[nb-1]
	quantQ8AVX2(&x[0], &qs[0], &d[0], nb)
	return true
}

//go:noescape
func quantQ8KAVX2(x *float32, qs *int8, d *float32, bsums *int16, nb int)

// quantQ8KSIMD quantizes whole 256-blocks of x with quantQ8KAVX2; it
// returns false (doing nothing) without AVX2.
func quantQ8KSIMD(x []float32, qs []int8, d []float32, bsums []int16) bool {
	nb := len(x) / qkK
	if !hasAVX2 || nb == 0 {
		return hasAVX2
	}
	_ = qs[nb*qkK-1]
	_ = d[nb-1]
	_ = bsums[nb*16-1]
	quantQ8KAVX2(&x[0], &qs[0], &d[0], &bsums[0], nb)
	return true
}
