//go:build !amd64

package cpu

func readSum128(b []byte) uint64 { return readSumGo(b) }
