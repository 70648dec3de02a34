//go:build !unix

package gguf

import "os"

// mapFile reads the file into memory where mmap is unavailable (copyFile
// without progress).
func mapFile(fh *os.File, size int) ([]byte, func() error, error) { return copyFile(fh, size, nil) }

// copyFile reads the file into memory.
func copyFile(fh *os.File, size int, progress func(done, total int64)) ([]byte, func() error, error) {
	b := make([]byte, size)
	if err := readChunks(fh, b, progress); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
