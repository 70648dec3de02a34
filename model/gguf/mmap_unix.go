//go:build unix

package gguf

import (
	"os"
	"syscall"
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
