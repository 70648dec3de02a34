//go:build !amd64

package cpu

const readSIMD = false

func readSum128(b []byte) uint64 { return readSumGo(b) }
