//go:build unix

package gguf

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// mapFile maps size bytes of fh read-only and shared. The returned function
// unmaps them.
func mapFile(fh *os.File, size int) ([]byte, func() error, error) {
	b, err := syscall.Mmap(int(fh.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}

// copyFile reads size bytes of fh into private anonymous memory advised for
// transparent huge pages (where the kernel allows them), so the weights are
// read through 2 MiB pages: decode streams the whole model once per token,
// and 4 KiB pages cost a TLB miss every 4 KiB. The memory stays writable
// (File.ClaimWritable). The returned function unmaps the memory.
func copyFile(fh *os.File, size int, progress func(done, total int64)) ([]byte, func() error, error) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, err
	}
	_ = unix.Madvise(b, madvHugepage) // advice only: 4 KiB pages still work
	if err := readChunks(fh, b, progress); err != nil {
		_ = syscall.Munmap(b)
		return nil, nil, err
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
