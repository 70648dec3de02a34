package gguf

import (
	"io"
	"os"
)

// readChunks fills b from the start of fh in 64 MiB reads, reporting the
// bytes read so far to progress (when not nil) after each.
func readChunks(fh *os.File, b []byte, progress func(done, total int64)) error {
	const chunk = 64 << 20
	for off := 0; off < len(b); off += chunk {
		end := min(off+chunk, len(b))
		if _, err := io.ReadFull(io.NewSectionReader(fh, int64(off), int64(end-off)), b[off:end]); err != nil {
			return err
		}
		if progress != nil {
			progress(int64(end), int64(len(b)))
		}
	}
	return nil
}
