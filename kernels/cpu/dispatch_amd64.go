package cpu

import (
	"golang.org/x/sys/cpu"

	"oengine/ggml"
)

// detectISA returns the highest level whose features the CPU and the OS
// both support (x/sys/cpu checks the OS saves the AVX and AVX-512 state,
// and applies GODEBUG=cpu.<feature>=off).
func detectISA() isa {
	x := &cpu.X86
	switch {
	case !(x.HasAVX2 && x.HasFMA && x.HasF16C):
		return isaGeneric
	case !(x.HasAVX512F && x.HasAVX512VL):
		return isaAVX2
	case !(x.HasAVX512BW && x.HasAVX512VNNI):
		return isaAVX512
	}
	return isaAVX512VNNI
}

// kernelSetFor builds the kernel set of level l: the portable kernels, then
// the substitutions of each level up to l, in order.
func kernelSetFor(l isa) kernelSet {
	s := kernelSet{isa: l, matmul: clonedKernels(portable)}
	if l < isaAVX2 {
		return s
	}
	// AVX2: one-token, four-token and 2×2 kernels (dot_amd64.go), the
	// many-row decode kernels (dot_gemv_amd64.go) and the SIMD helpers.
	for t, f := range simdKernels {
		k := s.matmul[t]
		k.dot = f
		k.dot4 = simdKernels4[t] // nil where there is none
		k.dot22 = simdKernels22[t]
		s.matmul[t] = k
	}
	// Q4_0 and Q8_0 switch to the blocked kernels (dot_blk*.go), whose
	// decode path replaces the four-token kernels; IQ4_NL and Q5_0 run
	// them on rows converted to Q8_0 (blk_conv.go).
	for t, bk := range blkKernels {
		k := s.matmul[t]
		k.blk, k.dot4 = bk, nil
		k.dot = blkSingle(bk)
		s.matmul[t] = k
	}
	s.rows, s.simd, s.blk = rowsKernels, true, true
	if l < isaAVX512 {
		return s
	}
	// AVX-512 F/VL: the F16 4×6 prefill tile (dot_f16tile_avx512_amd64.go).
	s.f16Z = true
	if l < isaAVX512VNNI {
		return s
	}
	// AVX-512 VNNI: K-quant four-token kernels over many rows
	// (dot_kquant_x4_vnni_amd64.go), 16-row Q4_0/Q8_0 prefill panels (dot_blk16*),
	// the 16-row Q4_0 decode kernel and decode layout (dot_gemv16_vnni, q4_0_decode*).
	for t, f := range kzKernels4 {
		k := s.matmul[t]
		if k.dot4 == nil {
			continue
		}
		k.dot4 = f
		k.dot4r = kzKernels4r[t]
		s.matmul[t] = k
	}
	// IQ4_XS: 16-lane VNNI kernels for one and four tokens
	// (dot_iq4_vnni_amd64.s); both change together, as the four-token
	// kernel must give the one-token kernel's bits.
	k := s.matmul[ggml.TypeIQ4_XS]
	k.dot, k.dot4 = dotIQ4_XSZSIMD, dotIQ4_XSx4ZSIMD
	s.matmul[ggml.TypeIQ4_XS] = k
	// IQ4_NL: the 16-row one-token kernel (iq4_gemv_amd64.s), in a copy of
	// the blocked kernel (the AVX2 set keeps the 8-row one).
	k = s.matmul[ggml.TypeIQ4_NL]
	bk := *k.blk
	bk.gemv, bk.gemvMax = iq4NLGemvZ, 6
	k.blk = &bk
	s.matmul[ggml.TypeIQ4_NL] = k
	s.vnni, s.blkZTile = true, tileBlkZ
	return s
}
