package cpu

import (
	"golang.org/x/sys/cpu"

	"oengine/model/gguf"
)

// AVX-512 K-quant kernels (dot_kz_amd64.s): same signatures and, per token,
// the same bits as the AVX2 four-token kernels they replace.

// hasAVX512KZ reports whether the CPU (and OS) support the kernels of
// dot_kz_amd64.s (AVX-512 F/BW/VL and VNNI for VPDPWSSD).
var hasAVX512KZ = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW &&
	cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

//go:noescape
func dotQ6_Kx4AVX512(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)

//go:noescape
func dotQ4_Kx4AVX512(row *byte, qs *int8, d *float32, bsums *int16, nb, qstride, dstride int, out *float32)

// kzKernels4 are the AVX-512 four-token kernels, installed over the AVX2 ones.
var kzKernels4 = map[gguf.Type]func(row []byte, a actView, cols int) [4]float32{
	gguf.TypeQ4_K: func(row []byte, a actView, cols int) (out [4]float32) {
		nb := cols / qkK
		_ = row[144*nb-1]
		_ = a.qs[4*cols-1]
		_ = a.d[4*nb-1]
		_ = a.bsums[4*16*nb-1]
		dotQ4_Kx4AVX512(&row[0], &a.qs[0], &a.d[0], &a.bsums[0], nb, cols, 4*nb, &out[0])
		return out
	},
	gguf.TypeQ6_K: func(row []byte, a actView, cols int) (out [4]float32) {
		nb := cols / qkK
		_ = row[210*nb-1]
		_ = a.qs[4*cols-1]
		_ = a.d[4*nb-1]
		_ = a.bsums[4*16*nb-1]
		dotQ6_Kx4AVX512(&row[0], &a.qs[0], &a.d[0], &a.bsums[0], nb, cols, 4*nb, &out[0])
		return out
	},
}

// installKZ switches the four-token kernels of kzKernels4 in (called by init
// after the AVX2 kernels are in place).
func installKZ() {
	if !hasAVX512KZ {
		return
	}
	for t, f := range kzKernels4 {
		k := kernels[t]
		if k.dot4 == nil {
			continue
		}
		k.dot4 = f
		kernels[t] = k
	}
}
