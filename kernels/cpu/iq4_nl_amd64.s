// IQ4_NL blocks to Q8_0 blocks (AVX2): twin iq4NLToQ8_0 (iq4_nl.go).
// Per block: the 2-byte scale is copied, the 16 nibble bytes become 32
// levels (low nibbles first, then high) by one VPSHUFB from iq4Values.

#include "textflag.h"
#include "iq4_levels_amd64.h"

DATA iq4c0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iq4c0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iq4c0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iq4c0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL iq4c0f<>(SB), RODATA|NOPTR, $32

// func iq4NLToQ8_0AVX2(dst, src *byte, nb int)
TEXT ·iq4NLToQ8_0AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	VBROADCASTI128 iq4lev<>(SB), Y2
	VMOVDQU        iq4c0f<>(SB), Y3
	TESTQ CX, CX
	JLE   done

loop:
	MOVWLZX     (SI), AX
	MOVW        AX, (DI)
	VMOVDQU     2(SI), X0
	VPSRLW      $4, X0, X1
	VINSERTI128 $1, X1, Y0, Y0
	VPAND       Y3, Y0, Y0
	VPSHUFB     Y0, Y2, Y0
	VMOVDQU     Y0, 2(DI)
	ADDQ        $18, SI
	ADDQ        $34, DI
	DECQ        CX
	JNZ         loop

done:
	VZEROUPPER
	RET
