// The IQ4_NL / IQ4_XS levels (iq4Values, quant_iq4.go) for VPSHUFB, one
// definition for every kernel file that includes it (the symbols are
// file-local, so each file gets its own copy of the same bytes):
//   iq4lev:    the levels as signed bytes (-127..113)
//   iq4lev128: the levels + 128 as unsigned bytes (1..241), for VPDPBUSD
// TestIQ4LevelsHeader checks both against iq4Values.

DATA iq4lev<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA iq4lev<>+8(SB)/8, $0x7159453526190d01
GLOBL iq4lev<>(SB), RODATA|NOPTR, $16

DATA iq4lev128<>+0(SB)/8, $0x766a5d4f3f2d1801
DATA iq4lev128<>+8(SB)/8, $0xf1d9c5b5a6998d81
GLOBL iq4lev128<>(SB), RODATA|NOPTR, $16
