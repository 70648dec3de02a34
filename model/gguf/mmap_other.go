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

// copyFile is mapFile: the file is read into memory either way.
func copyFile(fh *os.File, size int) ([]byte, func() error, error) { return mapFile(fh, size) }
