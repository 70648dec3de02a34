//go:build !unix

package gguf

import (
	"io"
	"os"
)

// mapFile reads the file into memory where mmap is unavailable.
func mapFile(fh *os.File, size int) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(fh, b); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}

// copyFile reads the file into memory, as mapFile does here.
func copyFile(fh *os.File, size int, progress func(done, total int64)) ([]byte, func() error, error) {
	b := make([]byte, size)
	if err := readChunks(fh, b, progress); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
