// Shared by the AVX-512 VNNI Q4_0 decode kernels (dot_gemv16_vnni_amd64.s,
// q4_0_decode_vnni_amd64.s).

// Q4BLOCKSUM: the exact Q4_0 block sums I_b of 16 rows in Z10 (int32, lane
// r = row r) from the nibble dwords Z0..Z3 (Zk lane r = bytes 4k..4k+3 of
// row r's 16 nibble bytes), the token's activations at DI (32 int8) and
// its s8 = 8·Σq at (BX): Σ u·q by VPDPBUSD of the masked nibbles against
// the broadcast activation dwords (low nibbles: elements 4k..4k+3, high:
// 16+4k..), minus s8. Z29 = 0x0f bytes, Z31 = 0. Clobbers Z0..Z7, Z11.
#define Q4BLOCKSUM \
	VPSUBD.BCST (BX), Z31, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPANDD Z29, Z0, Z4; \
	VPDPBUSD.BCST 0(DI), Z4, Z10; \
	VPSRLD $4, Z0, Z0; \
	VPANDD Z29, Z0, Z0; \
	VPDPBUSD.BCST 16(DI), Z0, Z11; \
	VPANDD Z29, Z1, Z5; \
	VPDPBUSD.BCST 4(DI), Z5, Z10; \
	VPSRLD $4, Z1, Z1; \
	VPANDD Z29, Z1, Z1; \
	VPDPBUSD.BCST 20(DI), Z1, Z11; \
	VPANDD Z29, Z2, Z6; \
	VPDPBUSD.BCST 8(DI), Z6, Z10; \
	VPSRLD $4, Z2, Z2; \
	VPANDD Z29, Z2, Z2; \
	VPDPBUSD.BCST 24(DI), Z2, Z11; \
	VPANDD Z29, Z3, Z7; \
	VPDPBUSD.BCST 12(DI), Z7, Z10; \
	VPSRLD $4, Z3, Z3; \
	VPANDD Z29, Z3, Z3; \
	VPDPBUSD.BCST 28(DI), Z3, Z11; \
	VPADDD Z11, Z10, Z10
