package cpu

// readSum128 sums b (len a multiple of 128) with readAVX2, prefetching
// 2 KiB ahead as the decode kernels do.
func readSum128(b []byte) uint64 { return readAVX2(&b[0], len(b), 2048) }
