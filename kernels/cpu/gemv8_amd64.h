// Shared by the AVX2 eight-row kernels (dot_blk_amd64.s, dot_gemv_amd64.s,
// iq4_gemv_amd64.s): lane r of a ymm = row r of a group of 8 rows.

// HADD8: Y0,Y1,Y2,Y3,Y4,Y6,Y7,Y9 (8 int32 lanes each) -> Y0 lane k = sum
// of the lanes of input k, by a VPHADDD tree. Clobbers Y1..Y4, Y6, Y7, Y9,
// Y11.
#define HADD8 \
	VPHADDD    Y1, Y0, Y0; \
	VPHADDD    Y3, Y2, Y2; \
	VPHADDD    Y6, Y4, Y4; \
	VPHADDD    Y9, Y7, Y7; \
	VPHADDD    Y2, Y0, Y0; \
	VPHADDD    Y7, Y4, Y4; \
	VPERM2I128 $0x20, Y4, Y0, Y11; \
	VPERM2I128 $0x31, Y4, Y0, Y0; \
	VPADDD     Y11, Y0, Y0

// SCALES8(o): the F16 scales at offset o of rows SI + r·R8 (r = 0..7;
// R9 = 3·R8, R10 = SI + 4·R8) as float32 in Y10.
#define SCALES8(o) \
	VPINSRW   $0, o(SI), X10, X10; \
	VPINSRW   $1, o(SI)(R8*1), X10, X10; \
	VPINSRW   $2, o(SI)(R8*2), X10, X10; \
	VPINSRW   $3, o(SI)(R9*1), X10, X10; \
	VPINSRW   $4, o(R10), X10, X10; \
	VPINSRW   $5, o(R10)(R8*1), X10, X10; \
	VPINSRW   $6, o(R10)(R8*2), X10, X10; \
	VPINSRW   $7, o(R10)(R9*1), X10, X10; \
	VCVTPH2PS X10, Y10
