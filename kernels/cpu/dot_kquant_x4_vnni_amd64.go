package cpu

import "oengine/ggml"

// AVX-512 K-quant kernels (dot_kquant_x4_vnni_amd64.s): per (row, token), the same bits
// as the AVX2 four-token kernels (and so as the one-token kernels).

// dotQ*_KRowsx4AVX512 compute nrows contiguous rows (each nb super-blocks)
// against four tokens: out[t*ostride+r] for t < 4, r < nrows (ostride in
// floats). qstride, dstride are the token strides of qs and d in bytes; the
// bsums stride is 8·dstride.

//go:noescape
func dotQ4_KRowsx4AVX512(rows *byte, nrows int, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32, ostride int)

//go:noescape
func dotQ6_KRowsx4AVX512(rows *byte, nrows int, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32, ostride int)

// dotQ4_Kx4AVX512 and dotQ6_Kx4AVX512 are the one-row forms, with the
// signature of the AVX2 four-token kernels.
func dotQ4_Kx4AVX512(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32) {
	if nb > kzMaxNB || nb <= 0 {
		dotQ4_Kx4AVX2(row, qs, d, bsums, nb, qstride, dstride, out)
		return
	}
	dotQ4_KRowsx4AVX512(row, 1, qs, d, bsums, nb, qstride, dstride, out, 1)
}

func dotQ6_Kx4AVX512(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32) {
	if nb > kzMaxNB || nb <= 0 {
		dotQ6_Kx4AVX2(row, qs, d, bsums, nb, qstride, dstride, out)
		return
	}
	dotQ6_KRowsx4AVX512(row, 1, qs, d, bsums, nb, qstride, dstride, out, 1)
}

type kzRowsFunc func(rows *byte, nrows int, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32, ostride int)

// kzMaxNB bounds the super-blocks per row of the rows kernels (their frame
// holds 256 bytes of token data per super-block); longer rows take dot4.
const kzMaxNB = 64

// kzDot4Rows wraps a rows kernel (bs bytes per super-block, at most maxNB
// super-blocks per row when maxNB > 0) as a dot4r; other shapes take dot4
// row by row.
func kzDot4Rows(f kzRowsFunc, bs, maxNB int, dot4 func(row []byte, a actView, cols int) [4]float32) func(rows []byte, rb int, a actView, cols int, dst []float32, dstride int) {
	return func(rows []byte, rb int, a actView, cols int, dst []float32, dstride int) {
		nb := cols / qkK
		nrows := len(rows) / rb
		if nrows == 0 {
			return
		}
		if rb != bs*nb || nb == 0 || (maxNB > 0 && nb > maxNB) {
			for r := 0; r < nrows; r++ {
				o := dot4(rows[r*rb:(r+1)*rb], a, cols)
				for t, v := range o {
					dst[t*dstride+r] = v
				}
			}
			return
		}
		_ = rows[nrows*rb-1]
		_ = a.qs[4*cols-1]
		_ = a.d[4*nb-1]
		_ = a.bsums[4*16*nb-1]
		_ = dst[3*dstride+nrows-1]
		f(&rows[0], nrows, &a.qs[0], &a.d[0], &a.bsums[0], nb, cols, 4*nb, &dst[0], dstride)
	}
}

// kzKernels4 are the AVX-512 four-token kernels, installed over the AVX2
// ones by kernelSetFor (dispatch_amd64.go).
var kzKernels4 = map[ggml.Type]func(row []byte, a actView, cols int) [4]float32{
	ggml.TypeQ4_K: kx4(dotQ4_Kx4AVX512, 144),
	ggml.TypeQ6_K: kx4(dotQ6_Kx4AVX512, 210),
}

// kzKernels4r are the many-row forms (kernel.dot4r).
var kzKernels4r = map[ggml.Type]func(rows []byte, rb int, a actView, cols int, dst []float32, dstride int){
	ggml.TypeQ4_K: kzDot4Rows(dotQ4_KRowsx4AVX512, 144, kzMaxNB, kzKernels4[ggml.TypeQ4_K]),
	ggml.TypeQ6_K: kzDot4Rows(dotQ6_KRowsx4AVX512, 210, kzMaxNB, kzKernels4[ggml.TypeQ6_K]),
}
