// Shared by the AVX-512 attention kernels (attn_z_avx512_amd64.s, written
// by attn_z_gen.go; attn_chunk_avx512_amd64.s).

// EXPZ reads its constants from ·attnExpF, the table of EXPF in
// attn_exp_amd64.s: each constant is eight copies of one float32 (or
// int32) at a multiple of 32 bytes, and .BCST broadcasts the first copy
// to all 16 lanes.

// EXPZ: Z0 = expAttn(Z0) per lane, the operations of attn_exp_amd64.s's
// EXPF on 16 lanes (VRNDSCALEPS $0 rounds to even as VROUNDPS $0 does);
// clobbers Z1-Z5, K1, K2.
#define EXPZ \
	VMOVAPS          Z0, Z5; \
	VMAXPS.BCST      ·attnExpF+0(SB), Z0, Z0; \
	VPXORD           Z4, Z4, Z4; \
	VMINPS           Z4, Z0, Z0; \
	VMULPS.BCST      ·attnExpF+32(SB), Z0, Z1; \
	VRNDSCALEPS      $0, Z1, Z1; \
	VMULPS.BCST      ·attnExpF+64(SB), Z1, Z2; \
	VSUBPS           Z2, Z0, Z0; \
	VMULPS.BCST      ·attnExpF+96(SB), Z1, Z2; \
	VSUBPS           Z2, Z0, Z0; \
	VMULPS           Z0, Z0, Z3; \
	VMULPS.BCST      ·attnExpF+128(SB), Z0, Z2; \
	VADDPS.BCST      ·attnExpF+160(SB), Z2, Z2; \
	VMULPS           Z0, Z2, Z2; \
	VADDPS.BCST      ·attnExpF+192(SB), Z2, Z2; \
	VMULPS           Z0, Z2, Z2; \
	VADDPS.BCST      ·attnExpF+224(SB), Z2, Z2; \
	VMULPS           Z0, Z2, Z2; \
	VADDPS.BCST      ·attnExpF+256(SB), Z2, Z2; \
	VMULPS           Z0, Z2, Z2; \
	VADDPS.BCST      ·attnExpF+288(SB), Z2, Z2; \
	VMULPS           Z3, Z2, Z2; \
	VADDPS           Z0, Z2, Z2; \
	VADDPS.BCST      ·attnExpF+320(SB), Z2, Z2; \
	VCVTPS2DQ        Z1, Z1; \
	VPADDD.BCST      ·attnExpF+352(SB), Z1, Z1; \
	VPSLLD           $23, Z1, Z1; \
	VMULPS           Z1, Z2, Z0; \
	VCMPPS.BCST      $1, ·attnExpF+0(SB), Z5, K1; \
	VPXORD           Z0, Z0, K1, Z0; \
	VCMPPS           $3, Z5, Z5, K2; \
	VMOVAPS          Z5, K2, Z0
