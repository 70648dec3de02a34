package cpu

import "encoding/binary"

// ReadSum reads every byte of b once, as fast as the machine allows, and
// returns the wrapping sum of its little-endian 64-bit words (a tail of
// fewer than 8 bytes is ignored). It is the memory read-bandwidth probe of
// `oengine bench model --membw`: the decode kernels stream weights the same
// way, so its GB/s is the ceiling they are measured against. readSumGo is
// its plain twin.
func ReadSum(b []byte) uint64 {
	n := len(b) &^ 127
	var s uint64
	if n > 0 && readSIMD {
		s = readSum128(b[:n])
	} else {
		n = 0
	}
	return s + readSumGo(b[n:])
}

func readSumGo(b []byte) uint64 {
	var s0, s1, s2, s3 uint64
	i := 0
	for ; i+32 <= len(b); i += 32 {
		s0 += binary.LittleEndian.Uint64(b[i:])
		s1 += binary.LittleEndian.Uint64(b[i+8:])
		s2 += binary.LittleEndian.Uint64(b[i+16:])
		s3 += binary.LittleEndian.Uint64(b[i+24:])
	}
	for ; i+8 <= len(b); i += 8 {
		s0 += binary.LittleEndian.Uint64(b[i:])
	}
	return s0 + s1 + s2 + s3
}
